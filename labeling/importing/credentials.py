"""Credentials in text, found by the rules of a maintained secret scanner. No Django: `no_secrets` (the
engine, the CI command) and the `secret` redaction use it.

The rules are Yelp's detect-secrets plugins, used as a library (docs/security.md, "Finding credentials"
says why this one): every plugin it ships that matches a credential's own shape, so a new release's
plugins count at once. Left out: high-entropy strings (ordinary ids, digests and hashes are random too),
the keyword plugin (`password = …` in source files; it reads file types, not prose) and public IP
addresses (not a credential; `ip` is a redaction kind of its own). A few shapes the plugins do not cover
yet are added below; each is anchored on a vendor's fixed prefix or a labelled context, so order
numbers, UUIDs and hex digests never look like one.
"""

import re
import re._parser as sre_parse  # type: ignore[import-not-found]  # the standard library's own reader of patterns (see _required_literals)
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

import re2
from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import BasePlugin

from labeling.importing.prefilter import PatternSet

LEFT_OUT = {"Base64 High Entropy String", "Hex High Entropy String", "Secret Keyword", "Public IP (ipv4)"}

# (kind, shape) for credentials the plugins do not know yet.
ADDED_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("Anthropic API Key", re.compile(r"\bsk-ant-[A-Za-z0-9]{2,10}-[A-Za-z0-9_-]{20,}")),
    ("OpenAI API Key", re.compile(r"\bsk-(?!ant-)(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}")),
    ("AWS Secret Access Key",
     re.compile(r"(?i)\baws_?secret_?access_?key[\"']?\s*[:=]\s*[\"']?[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])")),
    ("GitHub Fine-grained Token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}")),
    ("Google API Key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("Bearer Token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{20,}=*")),
)


@cache
def scanner_plugins() -> tuple[BasePlugin, ...]:
    """One instance of each detect-secrets plugin that `no_secrets` uses, by kind."""
    mapping: Mapping[str, type[BasePlugin]] = get_mapping_from_secret_type_to_class()
    return tuple(plugin() for kind, plugin in sorted(mapping.items()) if kind not in LEFT_OUT)


def _required(items: Any) -> list[set[str]]:
    """Sets of literal text, one of which every match of the parsed pattern `items` must contain."""
    found: list[set[str]] = []
    runs = {""}  # the literal text just read, in each of its ways: "gh" then [pou] reads as ghp, gho, ghu
    for op, arg in list(items) + [(None, None)]:
        ways = _literal_ways(op, arg)
        if ways is not None and len(runs) * len(ways) <= 64:
            runs = {run + way for run in runs for way in ways}
            continue
        if runs != {""}:
            found.append(runs)
        runs = {""}
        if ways is not None:
            runs = set(ways)
        elif op is sre_parse.SUBPATTERN:
            found += _required(arg[3])
        elif op in (sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT) and arg[0] >= 1:
            found += _required(arg[2])
        elif op is sre_parse.BRANCH:
            branches = [best for branch in arg[1] if (best := _best(branch))]
            if len(branches) == len(arg[1]):  # every branch has one: a match holds one of theirs
                found.append(set().union(*branches))
    return found


def _literal_ways(op: Any, arg: Any) -> list[str] | None:
    """The texts a parsed item matches when it is a literal, a set of literal characters or a choice of
    literal texts (a few), else None."""
    if op is sre_parse.LITERAL:
        return [chr(arg)]
    if op is sre_parse.IN and len(arg) <= 8 and all(item_op is sre_parse.LITERAL for item_op, _ in arg):
        return [chr(c) for _, c in arg]
    if op is sre_parse.BRANCH and len(arg[1]) <= 8 and all(
            all(item_op is sre_parse.LITERAL for item_op, _ in branch) for branch in arg[1]):
        return ["".join(chr(c) for _, c in branch) for branch in arg[1]]
    return None


def _best(items: Any) -> set[str] | None:
    options = _required(items)
    return max(options, key=lambda texts: min(map(len, texts))) if options else None


@cache
def _required_literals(pattern: re.Pattern[str]) -> tuple[bool, tuple[frozenset[str], ...]]:
    """(case-insensitive?, sets of texts): every match of `pattern` contains one text of each set.

    Looking for them first (all rules' at once, see scanner_literals) spares running the pattern over text
    that cannot match: some rules begin with lookbehinds or optional groups, which the regular-expression
    engine tries at every position. A case-insensitive rule's texts are lowercased and looked for in any
    case; a case-sensitive rule's as they are ("AKIA", not "akia", which ordinary words hold).
    """
    parsed = sre_parse.parse(pattern.pattern, pattern.flags)
    insensitive = bool(parsed.state.flags & re.IGNORECASE) or "(?i" in pattern.pattern
    sets = set()
    for texts in _required(parsed):
        texts = {text.lower() if insensitive else text for text in texts}
        # A text that holds another of its set adds nothing ("cl" stands for '"cl'); one that is empty, the set.
        if "" not in texts:
            sets.add(frozenset(text for text in texts if not any(other != text and other in text for other in texts)))
    return insensitive, tuple(sorted(sets, key=lambda texts: (-min(map(len, texts)), sorted(texts))))


_WORD_OR_DASH = re.compile(r"[\w-]")
_NOT_WORD_OR_DASH = re.compile(r"[^\w-]+")


def _word_class(item: Any) -> bool:
    """Whether a parsed single-character item matches only word characters or "-"."""
    op, arg = item
    if op is sre_parse.LITERAL:
        return bool(_WORD_OR_DASH.fullmatch(chr(arg)))
    if op is sre_parse.IN:
        return all(_word_class(part) for part in arg)
    if op is sre_parse.RANGE:
        low, high = arg
        return high - low < 256 and all(_WORD_OR_DASH.fullmatch(chr(c)) for c in range(low, high + 1))
    if op is sre_parse.CATEGORY:
        return arg in (sre_parse.CATEGORY_DIGIT, sre_parse.CATEGORY_WORD)
    return False


def _required_run(items: Any) -> int:
    """The length of a run of word characters and "-" that every match of the parsed pattern holds (0: none
    known): its longest repeat of such a character, with no way around it."""
    longest = 0
    for op, arg in items:
        if op is sre_parse.SUBPATTERN:
            longest = max(longest, _required_run(arg[3]))
        elif op in (sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT) and len(arg[2]) == 1 and _word_class(arg[2][0]):
            longest = max(longest, arg[0])
    return longest


def _required_word_run(pattern: re.Pattern[str]) -> int:
    """_required_run of `pattern` when it is costly to run (it begins with alternatives, lookbehinds among
    them, which the regular-expression engine tries at every position), else 0: a text whose runs of word
    characters and "-" are all shorter cannot match (a 44-character key, a 64-character token), and
    counting them costs less than running such a pattern."""
    parsed = sre_parse.parse(pattern.pattern, pattern.flags)
    if not parsed.data or parsed.data[0][0] is not sre_parse.BRANCH:
        return 0
    return _required_run(parsed)


# ASCII word characters and "-" marked "w", every other byte " " (_word_marks).
_WORD_MARKS = bytes(ord("w") if chr(b).isalnum() or chr(b) in "_-" else ord(" ") for b in range(128)) + b" " * 128


def _word_marks(text: str) -> bytes:
    """`text` with each word character and "-" as "w", others as " ": a run of n of them in `text` is
    b"w" * n in the marks, which a plain byte search finds. ASCII text is marked by one translation."""
    if text.isascii():
        return text.encode("ascii").translate(_WORD_MARKS)
    return b" ".join(b"w" * len(run) for run in _NOT_WORD_OR_DASH.split(text))


def scanner_kinds() -> list[str]:
    """Every kind of credential found: the plugins' and the added shapes'."""
    return [plugin.secret_type for plugin in scanner_plugins()] + [kind for kind, _ in ADDED_SHAPES]


# A plugin's pattern may take in the space, quote or `=` around a credential: those stay in the text.
_EDGES = " \t\r\n\"'=:/"
# A pattern may also stop inside its token (JSON Web Token's ends lazily before the signature): a
# credential runs on to the end of its token.
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_-]*")
# The private-key plugin matches the block's first line only: the key is the block, to its END line or to
# the last of its base64 lines.
_KEY_BLOCK = re.compile(r"-*(?:\s*[A-Za-z0-9+/=]{16,})*(?:\s*-----END [A-Z0-9 ]*(?:PRIVATE KEY|KEY BLOCK)-----)?")


# One rule: (kind, pattern, the plugin that confirms a match, or None for an added shape), with what every
# match holds (sets of literal ids, see scanner_literals: one of each set) and the run _required_word_run
# says it needs.
Rule = tuple[str, re.Pattern[str], BasePlugin | None, tuple[frozenset[int], ...], int]


@cache
def _rules_and_literals() -> tuple[tuple[Rule, ...], tuple[tuple[str, bool], ...]]:
    patterns: list[tuple[str, re.Pattern[str], BasePlugin | None]] = [
        (plugin.secret_type, pattern, plugin) for plugin in scanner_plugins()
        for pattern in getattr(plugin, "denylist", ())]
    patterns += [(kind, shape, None) for kind, shape in ADDED_SHAPES]
    literals: dict[tuple[str, bool], int] = {}
    rules = []
    for kind, pattern, plugin in patterns:
        insensitive, required = _required_literals(pattern)
        ids = tuple(frozenset(literals.setdefault((text, insensitive), len(literals)) for text in texts)
                    for texts in required)
        rules.append((kind, pattern, plugin, ids, _required_word_run(pattern)))
    return tuple(rules), tuple(literals)


def scanner_rules() -> tuple[Rule, ...]:
    """Every pattern of the plugins, then the added shapes: what credential_spans runs, in order."""
    return _rules_and_literals()[0]


def scanner_literals() -> tuple[str, ...]:
    """RE2 patterns (see prefilter.py) of the literal texts the rules need, by id. A case-insensitive rule's
    are found in any case as Python's `re` compares cases, which is not lowercasing (`(?i)secret` matches
    "ſecret", whose lower case is "ſecret"): RE2's case folding, and for "i" also "İ" and "ı", which only
    Python's finds (tests/labeling/importing/test_redaction_prefilter.py checks every character)."""
    return tuple(re2_literal(text, insensitive) for text, insensitive in _rules_and_literals()[1])


def re2_literal(text: str, insensitive: bool) -> str:
    """An RE2 pattern that finds `text` wherever Python's `re` would (in any case, if `insensitive`)."""
    return "(?i)" + re2.escape(text).replace("i", "[iİı]") if insensitive else re2.escape(text)


@cache
def _literal_set() -> PatternSet:
    return PatternSet(scanner_literals())


@cache
def _rules_by_literal() -> tuple[dict[int, list[int]], list[int]]:
    """The rules (their indexes) that a literal may let through, by the literal's id: each rule under the
    literals of its first set; and the rules that need no literal at all."""
    by_literal: dict[int, list[int]] = {}
    needing_none = []
    for index, (_, _, _, required, _) in enumerate(scanner_rules()):
        for literal in required[0] if required else ():
            by_literal.setdefault(literal, []).append(index)
        if not required:
            needing_none.append(index)
    return by_literal, needing_none


def _plugin_spans(plugin: BasePlugin, pattern: re.Pattern[str], text: str) -> Iterator[tuple[int, int]]:
    """Where the pattern matches, whole: a plugin reports only a pattern's group (GitHub's reports `ghp`),
    which is not the credential's extent. A match counts when the plugin confirms it (a JWT must decode)."""
    # The last token run read: a match that ends inside it runs on to its end too (read once, not for every
    # match in a long run of them, which would take the square of its length).
    run_from = run_end = -1
    for m in pattern.finditer(text):
        value = m.group()
        if value and any(plugin.analyze_string(value)):
            start = m.start() + len(value) - len(value.lstrip(_EDGES))
            end = m.end() - len(value) + len(value.rstrip(_EDGES))
            if plugin.secret_type == "Private Key":
                end = block.end() if (block := _KEY_BLOCK.match(text, end)) else end  # it matches "" too
            elif start < end and (text[end - 1] == "." or text[end - 1].isalnum()):
                if not run_from <= end <= run_end:
                    run_from, run_end = end, run.end() if (run := _TOKEN_RUN.match(text, end)) else end
                end = run_end
            if start < end:
                yield start, end


def credential_spans(text: str, literals: frozenset[int] | None = None) -> list[tuple[str, int, int]]:
    """(kind, start, end) of each credential in `text`. An added shape counts only where no plugin found one.

    A rule runs only where `text` holds one literal of each of its sets: `literals` are the ids of those
    it holds (scanner_literals), when the caller has looked them up with its own (redaction.py), else
    they are looked up here, all in one pass."""
    present = _literal_set().found(text) if literals is None else literals
    rules = scanner_rules()
    by_literal, needing_none = _rules_by_literal()
    candidates = sorted({*needing_none, *(index for literal in present for index in by_literal.get(literal, ()))})
    found: list[tuple[str, int, int]] = []
    marks: bytes | None = None  # where the word characters and "-" are, read when a rule first needs it
    for kind, pattern, plugin, required, needed in map(rules.__getitem__, candidates):
        if not all(not present.isdisjoint(ids) for ids in required[1:]):
            continue
        if needed:
            if marks is None:
                marks = _word_marks(text)
            if b"w" * needed not in marks:
                continue
        if plugin is not None:
            found += [(kind, start, end) for start, end in _plugin_spans(plugin, pattern, text)]
            continue
        for m in pattern.finditer(text):
            if not any(start < m.end() and m.start() < end for _, start, end in found):
                found.append((kind, *m.span()))
    return found


def credential_kinds(text: str) -> list[str]:
    """The kinds of credential `text` carries, each once, in the order first found. Never the values."""
    return list(dict.fromkeys(kind for kind, _, _ in credential_spans(text)))
