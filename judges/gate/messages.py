"""What every module of the command shares about messages: the config error (exit 2) and the one
function that makes untrusted text safe to print."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import TextIO

# Every control character (C0, DEL, C1 with NEL) and the Unicode line and paragraph separators.
_LINE_BREAKING_RE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# GitHub Actions reads `::command::` at the start of a line (after spaces) and `##[command]` anywhere.
_COMMAND_RE = re.compile(r":(?=:)|#(?=#\[)")
LIMIT = 300


class ConfigError(Exception):
    """A usage or config problem: exit 2, with this message and, below it, one detail a line."""

    def __init__(self, message: str, details: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.details = list(details)


def one_line(text: object, limit: int | None = LIMIT) -> str:
    """Untrusted text (slugs, case ids, judge reasons, anything read from a file or a server) made safe
    to print: one line, no control characters, and no workflow command (`::` and `##[` are split).

    Every message of the command passes what it did not write itself through here: GitHub Actions
    reads a line starting with `::` as a command, so no such text may start a line or break one.
    """
    text = " ".join(_LINE_BREAKING_RE.sub(" ", str(text)).split())
    text = _COMMAND_RE.sub(lambda m: m.group(0) + " ", text)
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def print_error(error: ConfigError, out: TextIO | None = None) -> None:
    out = out or sys.stderr
    print(f"evalhub-gate: error: {one_line(error.message, None)}", file=out)
    for detail in error.details:
        print(f"  {one_line(detail, None)}", file=out)
