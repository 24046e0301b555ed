"""Canonical JSON and its hash: what every key and hash in the engine is computed over."""

import hashlib
import json
from collections.abc import Callable
from typing import Any


def json_encoder(*, default: Callable[[Any], Any], separators: tuple[str, str], sort_keys: bool) -> Callable[[Any], str]:
    """What json.dumps(value, ...) gives with these options (ASCII, NaN allowed), made ready once: json.dumps
    and JSONEncoder.encode build a new C encoder for each value, a cost paid per key and per cache entry. No
    check for circular values (a JSON value read or built here has none: they recurse until RecursionError).
    The C encoder's signature is private: where it is missing or not the one expected, JSONEncoder's own."""
    public = json.JSONEncoder(default=default, separators=separators, sort_keys=sort_keys).encode
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return public
    try:
        encode = make(None, default, json.encoder.encode_basestring_ascii, None, separators[1], separators[0],
                      sort_keys, False, True)
        sample = {"b": [1, 2.5, None, True, "é\n\"", {"z": 1, "a": float("inf")}], "a": ""}
        if "".join(encode(sample, 0)) != public(sample) or "".join(encode("é", 0)) != public("é"):
            return public
    except Exception:  # another Python's signature
        return public
    return lambda value: "".join(encode(value, 0))


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_CANONICAL = json_encoder(default=_not_json, separators=(",", ":"), sort_keys=True)


def canonical_json(value: Any) -> str:
    """Keys sorted, no spaces: the same value always gives the same text."""
    return _CANONICAL(value)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
