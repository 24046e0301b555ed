"""Canonical JSON and its hash: what every key and hash in the engine is computed over."""

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Keys sorted, no spaces: the same value always gives the same text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
