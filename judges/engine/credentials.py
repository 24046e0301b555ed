"""Credentials: what `no_secrets` looks for, and what the engine hides of a key in its messages.

The shapes are a maintained scanner's rules (labeling.importing.credentials, shared with the `secret`
redaction), plus the config's own `secret_patterns`, run by RE2 (linear in the text, whatever the pattern:
a config is untrusted, and `no_secrets` reads every answer).
"""

import re
from collections.abc import Iterable
from functools import lru_cache

import re2

from labeling.importing.credentials import credential_kinds, scanner_identity

from .fields import compile_linear

# The pattern engine of `secret_patterns`: part of the contract layer's rules (contract_rules).
PATTERN_ENGINE = "re2"


def contract_rules() -> str:
    """The identity of the rules `no_secrets` applies: the scanner (its version, its catalog) and the engine
    of the config's own patterns. It enters the judgment cache key of a config that runs `no_secrets`, so a
    verdict made by other rules is never reused (cache.py)."""
    return f"{scanner_identity()}; secret_patterns by {PATTERN_ENGINE}"


@lru_cache(maxsize=256)
def compile_secret_pattern(pattern: str) -> "re2._Regexp":
    """`pattern` compiled by RE2; ValueError saying why when RE2 cannot run it (lookarounds and
    backreferences are what it refuses)."""
    try:
        return compile_linear(pattern)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(f"secret_patterns: {pattern[:80]!r} is not a pattern RE2 can run ({reason}); "
                         "write it without lookarounds or backreferences") from None


def secret_kinds(text: str, *, extra_patterns: Iterable[str] = ()) -> list[str]:
    """The kinds of credential `text` carries: the scanner's names, and `secret_patterns[i]` for a config's own.
    Only the kind is ever shown, never what matched."""
    kinds = credential_kinds(text)
    kinds += [f"a match of secret_patterns[{i}]" for i, p in enumerate(extra_patterns)
              if compile_secret_pattern(p).search(text)]
    return kinds


# A provider's error may echo part of a key ("sk-proj-****abcd"): any run this long of the key's
# head or tail is hidden, and any run twice as long from anywhere in it.
MIN_EDGE_RUN = 4
MIN_INNER_RUN = 8


# A key of lowercase words and hyphens ("stand-in-needs-no-key", the demo's) is a placeholder, not a secret a
# provider would echo in part: hidden whole, but its fragments are ordinary words ("scripted stand-in" must
# not read "scripted ***"). One shaped like a provider's key (sk-…) is a secret, whatever its letters.
PLACEHOLDER_KEY = re.compile(r"(?!sk-)[a-z]+(-[a-z]+)*")


def redact_key(text: str, key: str, *, mask: str = "***") -> str:
    """`text` with the key, and every fragment of it a provider might echo, replaced by `mask` (a placeholder
    key only whole)."""
    if not key or not text:
        return text
    if PLACEHOLDER_KEY.fullmatch(key):
        return text.replace(key, mask)
    hidden = [False] * len(text)

    def hide(start: int, end: int) -> None:
        hidden[start:end] = [True] * (end - start)

    if len(key) >= MIN_EDGE_RUN:
        head, tail = key[:MIN_EDGE_RUN], key[-MIN_EDGE_RUN:]
        for m in re.finditer(re.escape(head), text):
            end = m.end()
            while end < len(text) and end - m.start() < len(key) and text[end] == key[end - m.start()]:
                end += 1
            hide(m.start(), end)
        for m in re.finditer(f"(?={re.escape(tail)})", text):
            start, end = m.start(), m.start() + MIN_EDGE_RUN
            k = len(key) - MIN_EDGE_RUN
            while start > 0 and k > 0 and text[start - 1] == key[k - 1]:
                start, k = start - 1, k - 1
            hide(start, end)
    runs = {key[i : i + MIN_INNER_RUN] for i in range(len(key) - MIN_INNER_RUN + 1)}
    for i in range(len(text) - MIN_INNER_RUN + 1):
        if text[i : i + MIN_INNER_RUN] in runs:
            hide(i, i + MIN_INNER_RUN)
    if len(key) < MIN_EDGE_RUN:
        return text.replace(key, mask)
    out, i = [], 0
    while i < len(text):
        if hidden[i]:
            while i < len(text) and hidden[i]:
                i += 1
            out.append(mask)
        else:
            out.append(text[i])
            i += 1
    return "".join(out)
