"""Cache keys and the two caches: identical work (case content, config_hash, repeat) is asked once.

The app keeps its cache in the database (any object with `get`/`put` will do); the CI command
keeps one in a folder (folder_cache.py). Only evaluated judgments (pass/fail) are ever put: a not-evaluated one
must be asked again next time.
"""

import copy
import hashlib
import re
import threading
from typing import Any, Protocol

from .canonical import canonical_json

_HEX = re.compile(r"[0-9a-f]*")

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
    if type(repeat) is int and _HEX.fullmatch(content_key) and _HEX.fullmatch(config_hash):
        # The canonical JSON written out (keys in order, hex needing no escaping; the salt, any string,
        # through the encoder): a key per judgment, without a dict to encode.
        text = f'{{"case":"{content_key}","config_hash":"{config_hash}","repeat":{repeat}'
        text += f',"salt":{canonical_json(salt)}}}' if salt else "}"
        return hashlib.sha256(text.encode()).hexdigest()
    payload: dict[str, Any] = {"case": content_key, "config_hash": config_hash, "repeat": repeat}
    if salt:
        payload["salt"] = salt
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def cache_scope(config_hash: str, contract_rules: str = "") -> str:
    """What a config's judgments are keyed under: its `config_hash`, and the identity of the rules its
    contract layer applies beyond the config's own text (the credential scanner and its version, the
    pattern engine: credentials.contract_rules) when it has such rules. A new scanner release changes what
    `no_secrets` finds, and so the verdict, without changing the config: its keys change with it, and no
    verdict of the old rules is reused. A config with no such rules keeps its hash as its scope, and its
    keys as they always were."""
    if not contract_rules:
        return config_hash
    payload = {"config_hash": config_hash, "contract_rules": contract_rules}
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
