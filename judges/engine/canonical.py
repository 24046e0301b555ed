"""Canonical JSON and its hash: what every key and hash in the engine is computed over."""

import hashlib
import json
from typing import Any


# One encoder for every call: json.dumps builds a new one per call when given options (a key per judgment).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def canonical_json(value: Any) -> str:
    """Keys sorted, no spaces: the same value always gives the same text."""
    return _CANONICAL.encode(value)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
