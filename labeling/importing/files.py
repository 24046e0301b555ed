"""Writing a result file whole or not at all: the exports' and the CI command's files (--json, --junit).

Plain Python, no Django (the CI command imports it). The text goes to a temporary file beside the target,
flushed to disk, and only then is renamed over it: a reader never sees a half-written file, and a failure —
a full disk first of all — leaves the target as it was (absent, or its previous content) and no temporary file
behind. A target that is not a regular file (a pipe, /dev/stdout) cannot be replaced and is written in place.
"""

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable


def write_whole(path: str | os.PathLike, pieces: Iterable[str] | Iterable[bytes], *, binary: bool = False) -> int:
    """Write the pieces (text, or bytes with `binary`) to `path` whole or not at all; how many pieces.
    Raises OSError (its strerror says why: "No space left on device") with the target untouched."""
    target = os.path.realpath(path)  # a symlink stays one: what it points to is replaced
    try:
        regular = stat.S_ISREG(os.stat(target).st_mode)
    except FileNotFoundError:
        regular = True
    if not regular:
        return _write(open(target, "wb" if binary else "w", **_text(binary)), pieces)  # noqa: SIM115 - closed in _write
    fd, partial = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".partial",
                                   dir=os.path.dirname(target))
    try:
        count = _write(os.fdopen(fd, "wb" if binary else "w", **_text(binary)), pieces, sync=True)
        os.chmod(partial, _mode(target))
        os.replace(partial, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        raise
    return count


def _text(binary: bool) -> dict:
    # newline="": CSV rows end in \r\n already, and cells may hold line breaks of their own.
    return {} if binary else {"encoding": "utf-8", "newline": ""}


def _write(out, pieces, *, sync: bool = False) -> int:
    count = 0
    with out:
        for piece in pieces:
            out.write(piece)
            count += 1
        out.flush()
        if sync:
            os.fsync(out.fileno())
    return count


def _mode(target: str) -> int:
    """The replaced file's permissions, or a new file's (mkstemp makes it readable by its owner only)."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
