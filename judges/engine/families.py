"""Model families and pinned snapshots, read from a model's name.

A second opinion is only worth having from another vendor line, and a judge config must name a
snapshot that cannot change under it; both are decided from the name alone, by small tables.
"""

import re

# First match wins: distilled models name their teacher first ("deepseek-r1-distill-llama-70b").
_FAMILY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("anthropic", re.compile(r"claude")),
    ("openai", re.compile(r"^(gpt-|chatgpt|o1($|-)|o3($|-)|o4($|-))")),
    ("deepseek", re.compile(r"deepseek")),
    ("alibaba", re.compile(r"qwen|qwq")),
    ("meta", re.compile(r"llama")),
    ("mistral", re.compile(r"mistral|mixtral|codestral|ministral|magistral")),
    ("google", re.compile(r"gemini|gemma")),
)

_PINNED_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"(^|[-_@:.])(\d{4}-\d{2}-\d{2}|\d{8})($|[-_:.])"),  # gpt-4o-2024-08-06, claude-…-20250929
    re.compile(r"-\d{3,4}$"),  # gpt-4-0613 (MMDD), mistral-large-2411 (YYMM), gemini-1.5-pro-002
    re.compile(r"[-_]v\d+\.\d+"),  # open weights released under a version: mistral-7b-instruct-v0.3
    re.compile(r"@(sha256:)?[0-9a-f]{7,64}$"),  # a content digest or a commit
)


def _bare_name(model: str) -> str:
    # "meta-llama/Llama-3.1-8B" and "openrouter/anthropic/claude-…" name the model after the last slash.
    return model.strip().lower().rsplit("/", 1)[-1]


def model_family(model: str | None, override: str | None = None) -> str:
    """The vendor line of `model`, or `override` when the config sets one; "unknown" otherwise."""
    if override and override.strip():
        return override.strip().lower()
    if not model:
        return "unknown"
    name = _bare_name(model)
    for family, pattern in _FAMILY_PATTERNS:
        if pattern.search(name):
            return family
    return "unknown"


def is_pinned_snapshot(model: str | None) -> bool:
    """True when the name pins a dated or versioned snapshot; aliases and "-latest" are not pinned."""
    if not model:
        return False
    name = _bare_name(model)
    if "latest" in name:
        return False
    return any(pattern.search(name) for pattern in _PINNED_PATTERNS)
