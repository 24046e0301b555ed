"""`json_view`: a JSON value as readable text for a page, bounded in depth, width and length.

A legal value can still be huge (a list of 100,000 items, a string of a million characters, 64 levels
of nesting); a page shows the start of it and says "… more" where it is cut, so it stays small and fast.
"""

import json
from itertools import islice
from typing import Any

from django import template

register = template.Library()

MAX_DEPTH = 6  # containers deeper than this show as "[… 3 items]"
MAX_ITEMS = 50  # entries of one list or object
MAX_STRING = 2_000  # characters of one string inside a value
MAX_CHARS = 50_000  # characters in all


@register.filter
def json_view(value: Any) -> str:
    """Strings as they are, anything else as indented JSON; cut with "… more" past the limits above."""
    if isinstance(value, str):
        return _clipped(value, MAX_CHARS)
    writer = _Writer()
    writer.value(value, depth=0)
    return "".join(writer.parts)


def _clipped(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(_clipped(value, MAX_STRING), ensure_ascii=False)
    return json.dumps(value)


class _Writer:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0

    def put(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)

    def value(self, value: Any, depth: int) -> None:
        if not isinstance(value, dict | list) or not value:
            self.put(_scalar(value))
            return
        opening, closing = ("{", "}") if isinstance(value, dict) else ("[", "]")
        if depth >= MAX_DEPTH:
            noun = "keys" if isinstance(value, dict) else "items"
            self.put(f"{opening}… {len(value):,} {noun}{closing}")
            return
        entries = iter(value.items()) if isinstance(value, dict) else ((None, item) for item in value)
        pad = "  " * (depth + 1)
        self.put(opening + "\n")
        shown = 0
        for key, item in islice(entries, MAX_ITEMS):
            if self.size >= MAX_CHARS:
                break
            self.put(pad if key is None else f"{pad}{_scalar(key)}: ")
            self.value(item, depth + 1)
            shown += 1
            self.put(",\n" if shown < len(value) else "\n")
        if shown < len(value):
            self.put(f"{pad}… {len(value) - shown:,} more\n")
        self.put("  " * depth + closing)
