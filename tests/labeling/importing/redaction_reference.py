"""The redaction's finders as they were before their fast paths (a frozen copy, for tests only): each
pattern run over the whole text, with no prefilter (credentials are the scanner's own finds). The
property tests in test_redaction_fast_paths.py hold the live module to what this finds."""

import dataclasses
import ipaddress
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import phonenumbers
from schwifty import IBAN
from schwifty.exceptions import SchwiftyException

from labeling.importing.credentials import credential_spans as live_credential_spans
from labeling.importing.reading import CASE_FIELDS, CaseData

REDACT_KINDS = ("email", "phone", "card", "iban", "ip", "secret")
# Not content: the dataset's own names for a case (and whether an argument is checked).
KEPT_FIELDS = ("external_id", "category", "kind", "checks_tool_argument")
REDACT_KIND_HELP = {
    "email": "e-mail addresses",
    "phone": "phone numbers in international form (+44 20 7946 0958)",
    "card": "payment card numbers that pass the Luhn check",
    "iban": "IBANs with a valid checksum",
    "ip": "IPv4 and IPv6 addresses",
    "secret": "credentials, by the rules no_secrets uses",
}

# Each pattern begins with a character it must see, and checks what stands before that character after it
# (`\d(?<![\w-]\d)`): a pattern that begins with a lookbehind is tried at every position of the text,
# several times slower.
_EMAIL = re.compile(r"[A-Za-z0-9._%+-](?<![\w.%+-][A-Za-z0-9._%+-])[A-Za-z0-9._%+-]*@(?:[^\W_]|-)+(?:\.(?:[^\W_]|-)+)*"
                    r"\.(?:[^\W\d_]{2,}|xn--[a-z0-9-]+)(?![\w-])")
# Groups of digits joined by single spaces or dashes, never inside a word: where card numbers are.
_DIGIT_RUN = re.compile(r"\d(?<![\w-]\d)\d*(?:[ \u00a0\u202f.-]\d+)*(?![\w-])")
_DIGITS = re.compile(r"\d+")
# A country code, check digits, then up to 30 letters or digits, optionally in groups of four.
_IBAN = re.compile(r"[A-Za-z](?<!\w[A-Za-z])[A-Za-z]\d{2}(?:[ -]?[A-Za-z0-9]){11,30}")
_PHONE = re.compile(r"(?:\+(?<![\w+]\+)|0(?<![\w+]0)0)\d(?:[ .()-]{0,2}\d){6,18}")
_IPV4 = re.compile(r"\d(?<![\w.]\d)\d{0,2}(?:\.\d{1,3}){3}(?!\w|\.\d)")
_IPV6_HINT = re.compile(r":[0-9A-Fa-f]{0,4}:")  # two colons with at most one group between: in every IPv6
_IPV6 = re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{1,4})?(?![\w:]|\.\d)")


def luhn_valid(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        n = int(ch)
        if i % 2:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def _emails(text: str) -> Iterator[tuple[int, int]]:
    if "@" in text:
        for m in _EMAIL.finditer(text):
            yield m.span()


def _cards(text: str) -> Iterator[tuple[int, int]]:
    # A run of digit groups may hold more than a card ("+44 20 7946 0958 4111 1111 1111 1111"): from each
    # group, the longest Luhn-valid stretch of 13 to 19 digits is a candidate, and where candidates overlap
    # the earliest wins (Redactor.text), so a phone number before a card leaves the card whole.
    for m in _DIGIT_RUN.finditer(text):
        if len(m.group()) < 13:
            continue  # fewer than 13 digits
        groups = [g.span() for g in _DIGITS.finditer(m.group())]
        for i, (start, _) in enumerate(groups):
            digits = ""
            best = None
            for j, (g_start, g_end) in enumerate(groups[i:]):
                digits += m.group()[g_start:g_end]
                stretch = groups[i:i + j + 1]
                # A stretch with a dot between its groups is a card only in groups of four.
                if len(digits) > 19 or ("." in m.group()[start:g_end] and any(e - s != 4 for s, e in stretch)):
                    break
                if len(digits) >= 13 and luhn_valid(digits):
                    best = g_end
            if best is not None:
                yield m.start() + start, m.start() + best


def _ibans(text: str) -> Iterator[tuple[int, int]]:
    # The pattern may run on into what follows (another IBAN, a word): the longest prefix schwifty accepts
    # is the IBAN, and the search goes on after it.
    yield from _longest_valid(_IBAN, text, _iban_valid, shortest=15)


def _iban_valid(candidate: str) -> bool:
    if candidate.endswith((" ", "-")):
        return False
    try:
        IBAN(candidate.replace("-", " ").upper())
    except SchwiftyException:
        return False
    return True


def _longest_valid(pattern: re.Pattern[str], text: str, valid: Callable[[str], bool], *,
                   shortest: int) -> Iterator[tuple[int, int]]:
    """Spans of the longest prefix of each match of `pattern` that `valid` accepts and that does not end
    inside a word or a run of digits, searching on after it (or after the match's first character)."""
    at = 0
    while m := pattern.search(text, at):
        candidate = m.group()
        end = next((end for end in range(len(candidate), shortest - 1, -1)
                    if not candidate[end:end + 1].isalnum() and valid(candidate[:end])), None)
        if end is None:
            at = m.start() + 1
            continue
        yield m.start(), m.start() + end
        at = m.start() + end


def _ips(text: str) -> Iterator[tuple[int, int]]:
    patterns = (_IPV4, _IPV6) if _IPV6_HINT.search(text) else (_IPV4,)
    for pattern in patterns:
        for m in pattern.finditer(text):
            try:
                ipaddress.ip_address(m.group())
            except ValueError:
                continue
            yield m.span()


def _phones(text: str) -> Iterator[tuple[int, int]]:
    # International form only (a leading +): without its country, "4155550132" reads as well as an order
    # number as a phone number. A candidate may run on into the digits after it ("+44 20 7946 0958 4111…"),
    # so the longest prefix that libphonenumber's metadata calls a valid number is the number.
    yield from _longest_valid(_PHONE, text, _phone_valid, shortest=8)


def _phone_valid(candidate: str) -> bool:
    if not candidate[-1].isdigit():
        return False
    try:
        return phonenumbers.is_valid_number(phonenumbers.parse("+" + candidate[2:] if candidate.startswith("00")
                                                               else candidate, None))
    except phonenumbers.NumberParseException:
        return False


def credential_spans(text: str) -> list[tuple[str, int, int]]:
    """The scanner's own finds (credentials.py): it has no fast path of evalhub's to hold it to."""
    return live_credential_spans(text)


def _secrets(text: str) -> Iterator[tuple[int, int]]:
    for _, start, end in credential_spans(text):
        yield start, end


class Redactor:
    """Finds the chosen kinds in text and replaces each value by its placeholder."""

    def __init__(self, kinds: Iterable[str]) -> None:
        unknown = [k for k in kinds if k not in REDACT_KINDS]
        if unknown:
            raise ValueError(f"cannot redact {', '.join(map(repr, unknown))}: the kinds are {', '.join(REDACT_KINDS)}")
        finders = {"secret": _secrets, "email": _emails, "iban": _ibans, "card": _cards, "ip": _ips,
                   "phone": _phones}
        # Secrets first: where two kinds overlap, the earlier kind here wins (a key is not a phone number).
        self.finders: list[tuple[str, Callable[[str], Iterator[tuple[int, int]]]]] = [
            (kind, finders[kind]) for kind in finders if kind in set(kinds)]

    def __bool__(self) -> bool:
        return bool(self.finders)

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, kind) of what to replace in `text`, in order, never overlapping: where two finds
        overlap, the one that starts first wins (then the longer, then the kind listed first)."""
        found: list[tuple[int, int, int, str]] = []
        for rank, (kind, find) in enumerate(self.finders):
            found += [(start, -(end - start), rank, kind) for start, end in find(text)]
        spans, at = [], 0
        for start, negative_length, _, kind in sorted(found):
            if start >= at:
                spans.append((start, start - negative_length, kind))
                at = start - negative_length
        return spans

    def text(self, text: str, placeholders: "Placeholders") -> str:
        return _replaced(text, self.spans(text), placeholders)

    def case(self, data: CaseData) -> CaseData:
        """The case with its content and expectations redacted through one map."""
        return CaseData(**self.fields({f.name: getattr(data, f.name) for f in dataclasses.fields(data)}))

    def fields(self, case: dict[str, Any]) -> dict[str, Any]:
        """A case as a dict (the CI command's), redacted through one map. external_id, category and kind are
        the dataset's own names for the case and stay. Fields are redacted in the case format's order,
        whatever the dict's, so the server and the CI command number the same case's values alike.

        The case's strings are searched as one text, joined by line breaks (a line break ends a value as a
        string's end does): one pass a kind instead of one a string. A find that crosses from one string
        into the next (none of the kinds spans a line break on its own) is replaced in both."""
        if not self.finders:
            return case
        order = {name: i for i, name in enumerate(CASE_FIELDS)}
        names = sorted((name for name in case if name not in KEPT_FIELDS), key=lambda n: order.get(n, len(order)))
        strings = list(_strings([case[name] for name in names]))
        joined = "\n".join(strings)
        spans = self.spans(joined)
        if not spans:
            return case
        p = Placeholders()
        for start, end, kind in spans:
            p.of(kind, joined[start:end])  # numbered in the order of the case's fields
        redacted, offset, i = [], 0, 0
        for text in strings:
            inside = []
            while i < len(spans) and spans[i][0] < offset + len(text):
                start, end, kind = spans[i]
                inside.append((max(start, offset) - offset, min(end, offset + len(text)) - offset,
                               kind, joined[start:end]))
                if end > offset + len(text):
                    break  # it goes on into the next string
                i += 1
            redacted.append(_replaced(text, inside, p) if inside else text)
            offset += len(text) + 1
        values = iter(redacted)
        rebuilt = {name: _rebuilt(case[name], values) for name in names}
        return {name: rebuilt.get(name, case[name]) for name in case}


def _replaced(text: str, spans: Iterable[tuple], placeholders: "Placeholders") -> str:
    """`text` with each (start, end, kind[, value]) span replaced by the value's placeholder."""
    out, at = [], 0
    for start, end, kind, *value in spans:
        out += [text[at:start], placeholders.of(kind, value[0] if value else text[start:end])]
        at = end
    out.append(text[at:])
    return "".join(out)


def _rebuilt(value: Any, strings: Iterator[str]) -> Any:
    """`value` with its strings taken, in _strings' order, from `strings`."""
    if isinstance(value, str):
        return next(strings)
    if isinstance(value, dict):
        rebuilt = {}
        for item in value.values():
            key = next(strings)  # a key comes before its value, as in _strings
            rebuilt[key] = _rebuilt(item, strings)
        return rebuilt
    if isinstance(value, list):
        return [_rebuilt(item, strings) for item in value]
    return value


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, object keys too."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


class Placeholders:
    """One case's value → placeholder map: `[EMAIL_1]` for its first address, the same one wherever it is."""

    def __init__(self) -> None:
        self.by_value: dict[tuple[str, str], str] = {}
        self.counts: dict[str, int] = {}

    def of(self, kind: str, value: str) -> str:
        key = (kind, value)
        if key not in self.by_value:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.by_value[key] = f"[{kind.upper()}_{self.counts[kind]}]"
        return self.by_value[key]
