"""What every module of the command shares about messages: the config error (exit 2) and the one
function that puts untrusted text on a line."""

from __future__ import annotations

import re

_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class ConfigError(Exception):
    """A usage or config problem: exit 2, with this message."""


def one_line(text: str, limit: int = 300) -> str:
    """Untrusted text (judge reasons, case ids) on one line with no control characters.

    One line matters in CI: GitHub Actions reads any output line starting with `::` as a command, and
    every line printed here starts with text of ours.
    """
    text = " ".join(_CONTROL_RE.sub(" ", str(text)).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"

