"""The cache folder the CI command keeps (`--cache-dir`): entries written in bulk, as packs, each entry
authenticated with the gate step's cache key.

A folder holds:
  pack-<time>-<random>.jsonl   finished packs, read by every later run; the newest pack wins a key two hold
  .pack-<random>.tmp           a pack being written, renamed once whole: a crashed run leaves only this, ignored
  .compact.lock                held by the one process compacting the folder
A pack is one header line (`{"evalhub_cache_pack": 2, "entries": N, "bytes": B}`, padded to HEADER_SIZE)
and one line per entry, `{"key": "<hex>", "mac": "<hex>", "value": {...}}`. A run reads the packs' keys when
the cache is opened, each value when it is asked for; what it puts is kept in memory and written as one new
pack when the cache is flushed (at the end of the run, or when the pending pack grows past PACK_BYTES or
PACK_SECONDS, so a killed run loses at most that much). Several processes may share a folder: each writes
packs of its own under unique names, and only whole packs are ever renamed into place. When a folder holds
more than MAX_PACKS packs (or a damaged pack, or one of an older format), the flush compacts it into one.

The folder is outside the engine's hands (restored by CI, committed in a checkout, writable by the agent a
job ran before the gate), so nothing in it is trusted for what it says: an entry's `mac` is the HMAC-SHA256,
under the cache key, of its key and its value's bytes, and an entry whose mac does not verify is a miss
(said once), judged again and replaced by the next put. Only a holder of the key (the gate step) can write
an entry a later run will use. Values are JSON only, never pickle; an entry is a value only when it
verifies and holds an object. A pack cut short or with lines that are not entries is said once (a warning);
its whole entries are still used. Packs of format 1 (before entries were authenticated) and the older
one-file-per-entry layout (`<key>.json`) are never read: the next compaction removes them. The value's own
shape is its reader's to check (a judgment, a vector).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
import tempfile
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from .canonical import json_encoder

try:
    import fcntl
except ImportError:  # Windows: compaction goes without its lock (two compactions lose nothing, only time)
    fcntl = None  # type: ignore[assignment]

FORMAT = 2  # 1: entries without a mac (never read since: anyone could have written them)
MIN_KEY_BYTES = 16  # a cache key shorter than this is refused: it could be guessed
HEADER_SIZE = 128  # the header line's bytes, newline included: rewritten in place once a pack's size is known
MAX_ENTRY = 16 * 1024 * 1024  # a longer line is not read (an entry that long is not written: it is judged again)
PACK_BYTES = 64 * 1024 * 1024  # pending entries written as a pack once they reach this size...
PACK_SECONDS = 300  # ...or once the oldest has waited this long
MAX_PACKS = 8  # more packs than this and the next flush compacts the folder
STALE_SECONDS = 3600  # a temp file this old was left by a crashed run: compaction removes it

_KEY_RE = re.compile(r"^[0-9a-f]{16,128}$")
_PACK_RE = re.compile(r"^pack-[0-9]{20}-[0-9a-f]{8}\.jsonl$")
_LEGACY_RE = re.compile(r"^([0-9a-f]{16,128})\.json$")
_LINE_START = b'{"key": "'
_MAC_LENGTH = 64  # HMAC-SHA256 in hex
_VALUE_START = b'", "value": '
_ARRAY = "__evalhub_f8__"  # an array of floats, as base64 of its little-endian float64 bytes


class CacheFolderWarning(UserWarning):
    """A cache folder's pack could not be read whole, or a pack could not be written."""


def _warn(message: str) -> None:
    warnings.warn(message, CacheFolderWarning, stacklevel=3)


def _check_key(key: str) -> None:
    if not _KEY_RE.match(key):  # keys are hex digests; anything else could name a path outside
        raise ValueError(f"cache key must be a hex digest, got {key!r}")


def _base64(vector: Any) -> bytes:
    # An embedding is put as a numpy array: kept exactly, as its float64 bytes (a list of numbers costs
    # a float's repr each, written and read).
    import numpy as np

    return base64.b64encode(np.asarray(vector, dtype="<f8").tobytes())


def _encoded(value: Any) -> Any:
    if _is_vector(value):  # deeper in the value than its top level
        return {_ARRAY: _base64(value).decode("ascii")}
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} cannot be written as JSON")


def _decoded_arrays(obj: dict[str, Any]) -> Any:
    if len(obj) == 1 and isinstance(obj.get(_ARRAY), str):
        import numpy as np

        # A bad length or alphabet raises ValueError (binascii.Error is one): the entry is a miss.
        return np.frombuffer(base64.b64decode(obj[_ARRAY], validate=True), dtype="<f8").copy()
    return obj


def _is_vector(value: Any) -> bool:
    return hasattr(value, "tobytes") and getattr(value, "ndim", None) == 1


# json.dumps(value, default=_encoded), its encoder made once (a judgment's entry is written per judgment).
_JSON = json_encoder(default=_encoded, separators=(", ", ": "), sort_keys=False)


def _mac(secret: bytes, key: str, body: bytes) -> bytes:
    return hmac.new(secret, key.encode("ascii") + b"\n" + body, hashlib.sha256).hexdigest().encode("ascii")


def entry_line(key: str, value: dict[str, Any], secret: bytes) -> bytes:
    """One entry as a pack holds it: a JSON line, the key first so an index is read without the value, then
    the mac of the key and the value's bytes under `secret`, then the value."""
    vector = value.get("vector")
    if len(value) == 1 and _is_vector(vector):  # an embedding: the one shape the semantic layer puts
        # An embedding's base64 needs no escaping: spliced in as it is, not through json's string encoder.
        body = b'{"vector": {"%s": "%s"}}' % (_ARRAY.encode(), _base64(vector))
    else:  # an array deeper in it is written by _encoded, as base64 too
        body = _JSON(value).encode()
    return b'{"key": "%s", "mac": "%s%s%s}\n' % (key.encode("ascii"), _mac(secret, key, body), _VALUE_START, body)


def verified_body(raw: bytes, key: str, secret: bytes) -> bytes | None:
    """The value's bytes of an entry's line when its mac verifies for `key` under `secret`; None for anything
    else (another key, a forged or damaged line, one written under another cache key). Nothing of the line is
    parsed before it verifies."""
    start = b'{"key": "%s", "mac": "' % key.encode("ascii")
    body_at = len(start) + _MAC_LENGTH + len(_VALUE_START)
    value_start = raw[body_at - len(_VALUE_START):body_at]
    if not (raw.startswith(start) and raw.endswith(b"}\n") and value_start == _VALUE_START):
        return None
    body = raw[body_at:-2]
    return body if hmac.compare_digest(raw[len(start):len(start) + _MAC_LENGTH], _mac(secret, key, body)) else None


def decode_body(body: bytes) -> dict[str, Any] | None:
    """The value a verified entry holds: an object; None for anything else."""
    start = b'{"vector": {"%s": "' % _ARRAY.encode()
    if body.startswith(start) and body.endswith(b'"}}'):  # an embedding as entry_line writes it: no JSON to parse
        import numpy as np

        try:  # validate: the base64 alphabet only (no quote: the line holds nothing else), a whole number of floats
            return {"vector": np.frombuffer(base64.b64decode(body[len(start):-3], validate=True), dtype="<f8").copy()}
        except ValueError:
            pass  # something else after all: read as JSON, as any value
    try:
        value = json.loads(body, object_hook=_decoded_arrays) if _ARRAY.encode() in body else json.loads(body)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, nested past parsing, a bad array
        return None
    return value if isinstance(value, dict) else None


def decode_entry(raw: bytes, key: str, secret: bytes) -> dict[str, Any] | None:
    """The value of an entry's line when it is one for `key` that verifies under `secret`; None otherwise."""
    body = verified_body(raw, key, secret)
    return None if body is None else decode_body(body)


def _line_key(line: bytes) -> str | None:
    """The key an entry's line starts with, read without parsing its value; None when it starts otherwise."""
    if not line.startswith(_LINE_START):
        return None
    end = line.find(b'"', len(_LINE_START), len(_LINE_START) + 129)
    key = line[len(_LINE_START):end].decode("ascii", "replace") if end > 0 else ""
    return key if _KEY_RE.match(key) else None


def _header(entries: int, size: int) -> bytes:
    text = json.dumps({"evalhub_cache_pack": FORMAT, "entries": entries, "bytes": size}).encode()
    return text.ljust(HEADER_SIZE - 1) + b"\n"  # JSON allows the padding; a fixed size is rewritten in place


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:  # a symlink loop, say
        return False


class _Pack:
    """A finished pack held open: its values are read by offset, even once another process has
    compacted it away (the descriptor keeps the file)."""

    def __init__(self, name: str, fd: int) -> None:
        self.name, self.fd = name, fd
        self.lock = threading.Lock()

    def read(self, offset: int, length: int) -> bytes:
        try:
            if hasattr(os, "pread"):
                return os.pread(self.fd, length, offset)
            with self.lock:  # no pread (Windows): a seek and a read, one thread at a time
                os.lseek(self.fd, offset, os.SEEK_SET)
                return os.read(self.fd, length)
        except OSError:
            return b""

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


def _scan(fh: IO[bytes]) -> tuple[list[tuple[str, int, int]], str | None]:
    """A pack's entries as (key, offset, length), in the pack's order, and what is wrong with it (None
    when nothing is). Lines are located by their keys only: values are read when asked for."""
    header = fh.readline(HEADER_SIZE)
    try:
        meta = json.loads(header)
        version = meta.get("evalhub_cache_pack")
        declared = (int(meta["entries"]), int(meta["bytes"])) if version == FORMAT else None
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        version = declared = None
    if version == 1:
        return [], "a pack of format 1, whose entries are not authenticated: not read (judged again)"
    if declared is None or not header.endswith(b"\n"):
        return [], "not a cache pack (no pack header): skipped"
    entries: list[tuple[str, int, int]] = []
    offset = start = len(header)
    damaged = 0
    cut_short = False
    while line := fh.readline(MAX_ENTRY):
        length = len(line)
        if not line.endswith(b"\n"):
            if length < MAX_ENTRY:  # the file ends inside a line
                cut_short = True
                offset += length
                break
            while not line.endswith(b"\n") and (more := fh.readline(MAX_ENTRY)):  # a line too long to keep
                line, length = more, length + len(more)
            damaged += 1
            offset += length
            continue
        key = _line_key(line)
        if key is None:
            damaged += 1
        else:
            entries.append((key, offset, length))
        offset += length
    problems = []
    if cut_short or offset - start < declared[1]:
        problems.append(f"cut short ({offset - start} of its {declared[1]} bytes)")
    if damaged:
        problems.append(f"{damaged} line(s) that are not entries")
    if not problems and (len(entries) != declared[0] or offset - start != declared[1]):
        problems.append(f"{len(entries)} entries in {offset - start} bytes where its header says "
                        f"{declared[0]} in {declared[1]}")
    if not problems:
        return entries, None
    return entries, f"{'; '.join(problems)}: its {len(entries)} whole entries are still used, the rest is judged again"


def _open_pack(path: Path) -> tuple[_Pack, list[tuple[str, int, int]], str | None] | None:
    """The pack at `path` held open, its entries and its problem; None when it is no longer there (a
    compaction took it)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        return _Pack(path.name, -1), [], f"cannot be read ({exc.strerror or exc}): skipped"
    pack = _Pack(path.name, fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return pack, [], "not a file: skipped"
        with os.fdopen(os.dup(fd), "rb") as fh:
            entries, problem = _scan(fh)
    except OSError as exc:
        return pack, [], f"cannot be read ({exc.strerror or exc}): skipped"
    return pack, entries, problem


def _write_pack(folder: Path, lines: Iterator[bytes], stamp: int | None = None) -> tuple[str, int, list[int]]:
    """Write `lines` as a new pack: into a temp file, its header rewritten once its size is known, then
    renamed into place whole, named by `stamp` (now, by default: packs are read in that order). Returns the
    pack's name, a descriptor open on it and each line's offset."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".pack-", suffix=".tmp")
    try:
        offsets = []
        with os.fdopen(os.dup(fd), "wb", buffering=1024 * 1024) as fh:
            fh.write(_header(0, 0))
            offset = HEADER_SIZE
            for line in lines:
                offsets.append(offset)
                fh.write(line)
                offset += len(line)
            fh.seek(0)
            fh.write(_header(len(offsets), offset - HEADER_SIZE))
        name = f"pack-{time.time_ns() if stamp is None else stamp:020d}-{secrets.token_hex(4)}.jsonl"
        os.replace(tmp, folder / name)
    except BaseException:
        os.close(fd)
        Path(tmp).unlink(missing_ok=True)
        raise
    return name, fd, offsets


class _Store:
    """A folder's packs and pending entries, apart from the FolderCache so its finalizer can flush them."""

    def __init__(self, path: Path, secret: bytes, warn: Callable[[str], None]) -> None:
        self.path, self.secret, self.warn = path, secret, warn
        self.unverified = 0  # entries read that did not verify under the key: misses, said once
        self.lock = threading.Lock()
        self.packs: list[_Pack] = []
        self.index: dict[str, tuple[_Pack, int, int]] = {}
        self.pending: dict[str, bytes] = {}
        self.pending_bytes = 0
        self.pending_since = 0.0
        self.legacy: set[str] = set()
        self.damaged = False  # a pack was damaged: the next flush compacts it away
        self.write_failed = False
        self._read_index()

    def listing(self) -> tuple[list[Path], set[str]]:
        """The folder's finished packs, oldest first, and the keys of its entries of the older layout (to remove)."""
        packs, legacy = [], set()
        try:
            with os.scandir(self.path) as entries:
                for entry in entries:
                    if _PACK_RE.match(entry.name):
                        packs.append(self.path / entry.name)
                    elif (match := _LEGACY_RE.match(entry.name)) and _is_file(entry):
                        legacy.add(match.group(1))  # never read: the next compaction removes it
        except OSError as exc:
            self.warn(f"the cache folder {self.path} cannot be listed ({exc.strerror or exc}): nothing is read from it")
        return sorted(packs), legacy

    def _read_index(self) -> None:
        for _attempt in range(3):  # a pack listed but gone was compacted meanwhile: list the folder again
            paths, self.legacy = self.listing()
            opened = [_open_pack(path) for path in paths]
            if all(o is not None for o in opened):
                break
            for o in opened:
                if o is not None:
                    o[0].close()
        for path, o in zip(paths, opened, strict=True):
            if o is None:
                continue
            pack, entries, problem = o
            self.packs.append(pack)
            if problem:
                self.damaged = True
                self.warn(f"cache pack {path}: {problem}")
            for key, offset, length in entries:  # a later line, and a later pack, wins a key
                self.index[key] = (pack, offset, length)

    def get(self, key: str) -> dict[str, Any] | None:
        with self.lock:
            raw = self.pending.get(key)
            where = self.index.get(key) if raw is None else None
        if raw is None and where is not None:
            pack, offset, length = where
            raw = pack.read(offset, length)
        if raw is None:
            return None
        body = verified_body(raw, key, self.secret)
        if body is None:
            with self.lock:
                self.unverified += 1
                first = self.unverified == 1
            if first:
                self.warn(f"the cache folder {self.path} holds entries that do not verify under this cache key "
                          "(forged, damaged, or written under another key): not used, judged again (said once)")
            return None
        return decode_body(body)

    def put(self, key: str, value: dict[str, Any]) -> None:
        line = entry_line(key, value, self.secret)
        if len(line) > MAX_ENTRY:
            return  # not kept: judged again next time
        with self.lock:
            if not self.pending:
                self.pending_since = time.monotonic()
            self.pending[key] = line
            self.pending_bytes += len(line)
            if self.pending_bytes >= PACK_BYTES or time.monotonic() - self.pending_since >= PACK_SECONDS:
                self._finish_pack()

    def keys(self) -> set[str]:
        with self.lock:
            return set(self.index) | set(self.pending)

    def _finish_pack(self) -> None:
        """Write the pending entries as one pack (the lock held); they are then read from it."""
        if not self.pending or self.write_failed:
            return
        pending = list(self.pending.items())
        try:
            name, fd, offsets = _write_pack(self.path, (line for _, line in pending))
        except OSError as exc:
            self.write_failed = True  # kept in memory for this run; not tried again at each put
            self.warn(f"the cache folder {self.path}: a pack cannot be written ({exc.strerror or exc}): "
                      f"{len(pending)} entries of this run are not kept")
            return
        pack = _Pack(name, fd)
        self.packs.append(pack)
        for (key, line), offset in zip(pending, offsets, strict=True):
            self.index[key] = (pack, offset, len(line))
        self.pending.clear()
        self.pending_bytes = 0

    def flush(self) -> None:
        with self.lock:
            self._finish_pack()
            due = self.damaged or bool(self.legacy)
        if not due:
            due = len(self.listing()[0]) > MAX_PACKS
        if due and not self.write_failed:
            self.compact()

    def compact(self) -> None:
        """Merge the folder's packs and its entries of the older layout into one pack, then remove what was
        merged (the older layout's files are removed unread); skipped while another process compacts. An entry is
        kept only when it verifies and reads as one (damaged and forged lines go), the newest of a key; every
        entry stays readable throughout."""
        free, lock = self._compaction_lock()
        if not free:
            return
        try:
            paths, legacy = self.listing()
            opened = [(path, _open_pack(path)) for path in paths]
            merged = [(path, o) for path, o in opened if o is not None]
            seen: set[str] = set()

            def lines() -> Iterator[bytes]:
                for _path, (pack, entries, _problem) in reversed(merged):  # newest first: it wins a key
                    for key, offset, length in reversed(entries):
                        raw = pack.read(offset, length)
                        if key not in seen and decode_entry(raw, key, self.secret) is not None:
                            seen.add(key)
                            yield raw

            # Named as the newest pack it merges, not now: a pack another process finished meanwhile is newer
            # and still wins a key both hold.
            stamp = int(paths[-1].name.split("-")[1]) if paths else 0
            try:
                _name, fd, _offsets = _write_pack(self.path, lines(), stamp)
            except OSError as exc:
                self.warn(f"the cache folder {self.path} cannot be compacted ({exc.strerror or exc})")
                return
            finally:
                for _path, (pack, _entries, _problem) in merged:
                    pack.close()
            os.close(fd)
            for path in [p for p, _o in merged] + [self.path / f"{key}.json" for key in legacy]:
                try:
                    path.unlink(missing_ok=True)
                except OSError:  # a directory under a pack's or an entry's name, say: left as it is, a miss
                    pass
            with self.lock:
                self.legacy -= legacy
                self.damaged = False
            self._remove_stale_temp_files()
        finally:
            if lock is not None:
                lock.close()

    def _compaction_lock(self) -> tuple[bool, IO[bytes] | None]:
        """(whether this process may compact, the lock it holds: a file whose close releases it). Where there
        are no locks (Windows) it may, holding none; while another process holds the lock it may not."""
        if fcntl is None:
            return True, None
        try:
            fh = open(self.path / ".compact.lock", "ab")  # noqa: SIM115 - held until compaction ends
        except OSError:
            return False, None
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            return False, None
        return True, fh

    def _remove_stale_temp_files(self) -> None:
        now = time.time()
        for tmp in self.path.glob(".*.tmp"):
            try:
                if now - tmp.lstat().st_mtime > STALE_SECONDS:
                    tmp.unlink()
            except OSError:
                pass

    def close(self) -> None:
        self.flush()
        with self.lock:
            for pack in self.packs:
                pack.close()
            self.packs.clear()
            self.index.clear()


class FolderCache:
    """The cache folder of the CI command and the pytest plugin (module docstring): get/put as any cache, each
    entry authenticated with `key` (the gate step's secret, at least MIN_KEY_BYTES), written as a pack when
    flushed — `flush()` at the end of a run, `close()` (or a `with` block) when done;
    a cache that is dropped or left at exit is flushed then too."""

    def __init__(
        self, path: str | os.PathLike[str], *, key: bytes, warn: Callable[[str], None] | None = None
    ) -> None:
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(f"a cache key must be at least {MIN_KEY_BYTES} bytes")
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._key = key
        self._warn = _warn if warn is None else warn
        self._store = _Store(self.path, key, self._warn)
        self._subfolders: dict[str, FolderCache] = {}
        self._finalizer = weakref.finalize(self, self._store.close)

    def get(self, key: str) -> dict[str, Any] | None:
        _check_key(key)
        return self._store.get(key)

    def put(self, key: str, judgment: dict[str, Any]) -> None:
        _check_key(key)
        self._store.put(key, judgment)

    def subfolder(self, name: str) -> FolderCache:
        """The cache kept in a folder inside this one (the semantic layer's `embeddings/`), opened once and
        flushed with this one."""
        if name not in self._subfolders:
            self._subfolders[name] = FolderCache(self.path / name, key=self._key, warn=self._warn)
        return self._subfolders[name]

    def flush(self) -> None:
        """Write what was put since the last flush as one pack; compact the folder when it is due."""
        for sub in self._subfolders.values():
            sub.flush()
        self._store.flush()

    def compact(self) -> None:
        self._store.compact()

    def close(self) -> None:
        for sub in self._subfolders.values():
            sub.close()
        self._finalizer()

    def __enter__(self) -> FolderCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self._store.keys())
