"""Credentials: what `no_secrets` looks for, and what the engine hides of a key in its messages.

The shapes are a maintained scanner's rules (labeling.importing.credentials, shared with the `secret`
redaction), plus the config's own `secret_patterns`.
"""

import re
from collections.abc import Iterable

from labeling.importing.credentials import credential_kinds


def secret_kinds(text: str, *, extra_patterns: Iterable[str] = ()) -> list[str]:
    """The kinds of credential `text` carries: the scanner's names, and `secret_patterns[i]` for a config's own.
    Only the kind is ever shown, never what matched."""
    kinds = credential_kinds(text)
    kinds += [f"a match of secret_patterns[{i}]" for i, p in enumerate(extra_patterns) if re.search(p, text)]
    return kinds


# A provider's error may echo part of a key ("sk-proj-****abcd"): any run this long of the key's
# head or tail is hidden, and any run twice as long from anywhere in it.
MIN_EDGE_RUN = 4
MIN_INNER_RUN = 8


# A key of lowercase words and hyphens ("stand-in-needs-no-key", the demo's) is a placeholder, not a secret a
# provider would echo in part: hidden whole, but its fragments are ordinary words ("scripted stand-in" must
# not read "scripted ***").
PLACEHOLDER_KEY = re.compile(r"[a-z]+(-[a-z]+)*")


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
