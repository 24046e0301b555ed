"""Cache keys and the two caches: identical work (case content, config_hash, repeat) is asked once.

The app keeps its cache in the database (any object with `get`/`put` will do); the CI command
keeps one in a folder. Only evaluated judgments (pass/fail) are ever put: a not-evaluated one
must be asked again next time.
"""

import copy
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import threading
from pathlib import Path
from typing import Any, Protocol

from .canonical import canonical_json

# What the judge sees of a case; external_id and metadata (but its references) change no verdict.
CASE_CONTENT_FIELDS: tuple[str, ...] = (
    "input",
    "output",
    "trace",
    "golden_answer",
    "expected_behaviour",
    "expected_tool",
    "expected_tool_argument",
    "expected_source",
    "category",
)


def case_content(case: dict[str, Any]) -> dict[str, Any]:
    """The fields of a case that can change a verdict; a missing field reads as null.

    `metadata.references` (the semantic layer's other acceptable answers) is judged content too; it is
    left out when absent or empty, so the keys of cases without references stay as they were.
    """
    content = {name: case.get(name) for name in CASE_CONTENT_FIELDS}
    metadata = case.get("metadata")
    if isinstance(metadata, dict) and metadata.get("references"):
        content["references"] = metadata["references"]
    return content


def case_content_key(case: dict[str, Any]) -> str:
    """sha256 hex over the canonical JSON of the case's judged content (`case_content`)."""
    return hashlib.sha256(canonical_json(case_content(case)).encode()).hexdigest()


def cache_key(case: dict[str, Any], config_hash: str, repeat: int, salt: str = "") -> str:
    """The key of one judgment's work: the case's content, the config's hash and the repeat.

    A fresh run's `salt` (its own, "run:<id>") keys its work apart from every other run's: it reuses no cached
    verdict and overwrites none. Unsalted keys are as they always were.
    """
    return content_cache_key(case_content_key(case), config_hash, repeat, salt)


def content_cache_key(content_key: str, config_hash: str, repeat: int, salt: str = "") -> str:
    """`cache_key` from the case's `case_content_key`: a run's repeats of one case hash its content once."""
    payload: dict[str, Any] = {"case": content_key, "config_hash": config_hash, "repeat": repeat}
    if salt:
        payload["salt"] = salt
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def judge_cache_key(key: str, judge: str) -> str:
    """The key of another judge's verdict (second_opinion, adjudicator) on the work `key` names: each judge's
    verdict is cached under its own key, so a cached primary verdict can still get a second opinion."""
    return hashlib.sha256(f"{judge}:{key}".encode()).hexdigest()


class Cache(Protocol):
    def get(self, key: str) -> dict[str, Any] | None: ...

    def put(self, key: str, judgment: dict[str, Any]) -> None: ...


class MemoryCache:
    """A dict behind a lock; copies in and out, so a caller cannot change what is stored.

    `copies=False` shares the values instead, for values nobody changes (the semantic layer's
    embeddings, read into arrays): copying a vector float by float costs more than embedding it.
    """

    def __init__(self, *, copies: bool = True) -> None:
        self._data: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._copy = copy.deepcopy if copies else (lambda value: value)

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            value = self._data.get(key)
        return self._copy(value)

    def put(self, key: str, judgment: dict[str, Any]) -> None:
        with self._lock:
            self._data[key] = self._copy(judgment)

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)


def _listed(value: Any) -> Any:
    # An embedding is put as a numpy array; a file keeps it as a list of numbers.
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} cannot be written as JSON")


_KEY_RE = re.compile(r"^[0-9a-f]{16,128}$")


class FolderCache:
    """One JSON file per key in a folder; written to a temp file then renamed, so a reader never sees half.

    The folder is outside the engine's hands (restored by CI, editable by anyone with the checkout), so
    what it holds is checked before it is trusted: each file is `{"key": ..., "value": {...}}`, the key
    it was written for, and anything else under an entry's name (not JSON, not UTF-8, not an object, a
    directory, unreadable, written under another key or before entries recorded their key) is a miss,
    replaced by the next put. The value's own shape is its reader's to check (a judgment, a vector).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)

    def _file(self, key: str) -> Path:
        if not _KEY_RE.match(key):  # keys are hex digests; anything else could name a path outside
            raise ValueError(f"cache key must be a hex digest, got {key!r}")
        return self.path / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._file(key)
        try:
            # Non-blocking, so a FIFO under an entry's name cannot hang the reader; only a file is read.
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError:  # missing, unreadable, or a directory on some systems
            return None
        try:
            with os.fdopen(fd, "rb") as fh:
                if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                    return None
                entry = json.loads(fh.read().decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            return None  # a damaged entry is a miss: the work is simply done again
        if not isinstance(entry, dict) or entry.get("key") != key or not isinstance(entry.get("value"), dict):
            return None  # copied from another key, hand-written, or from before entries recorded their key
        value: dict[str, Any] = entry["value"]
        return value

    def put(self, key: str, judgment: dict[str, Any]) -> None:
        target = self._file(key)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)  # a directory under an entry's name would refuse the rename below
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=f".{key[:16]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"key": key, "value": judgment}, fh, sort_keys=True, default=_listed)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def __len__(self) -> int:
        return sum(1 for _ in self.path.glob("*.json"))
