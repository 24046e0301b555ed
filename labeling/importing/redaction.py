"""Personal data and credentials out of a case before it is stored, hashed or judged. No Django: the CI
command redacts with it too (docs/security.md, "Redaction").

A dataset names the kinds it redacts (REDACT_KINDS). Each value found is replaced by a typed, numbered
placeholder (`[EMAIL_1]`, `[EMAIL_2]`), one map per case: the same address is the same placeholder in the
input, the trace and the expectations, so a tool argument that equalled its expectation still does.
Detection reuses maintained libraries where the shape has rules beyond a pattern: phone numbers through
`phonenumbers` (Google's libphonenumber metadata), IBANs through `schwifty` (country lengths, formats and
the mod-97 checksum), credentials through the `detect-secrets` rules that `no_secrets` uses; cards are
Luhn-checked here, addresses checked by `ipaddress`.
"""

import dataclasses
import ipaddress
import re
from collections.abc import Iterable, Iterator
from typing import Any

import phonenumbers
from schwifty import IBAN
from schwifty.exceptions import SchwiftyException

from labeling.importing.credentials import credential_spans
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

_EMAIL = re.compile(r"(?<![\w.%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w-])")
# Groups of digits joined by single spaces or dashes, never inside a word: where card numbers are.
_DIGIT_RUN = re.compile(r"(?<![\w-])\d+(?:[ -]\d+)*(?![\w-])")
_DIGITS = re.compile(r"\d+")
# A country code, check digits, then up to 30 letters or digits, optionally in groups of four.
_IBAN = re.compile(r"(?<![\w])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}")
_PHONE = re.compile(r"(?<![\w+])\+\d(?:[ .()-]{0,2}\d){6,18}")
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w.]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|(?:\d{1,3}\.){3}\d{1,3})?(?![\w:])")


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
        groups = [g.span() for g in _DIGITS.finditer(m.group())]
        for i, (start, _) in enumerate(groups):
            digits = ""
            best = None
            for g_start, g_end in groups[i:]:
                digits += m.group()[g_start:g_end]
                if len(digits) > 19:
                    break
                if len(digits) >= 13 and luhn_valid(digits):
                    best = g_end
            if best is not None:
                yield m.start() + start, m.start() + best


def _ibans(text: str) -> Iterator[tuple[int, int]]:
    for m in _IBAN.finditer(text):
        # The pattern may run on into the next word: try the longest valid IBAN from its start.
        candidate = m.group()
        for end in range(len(candidate), 14, -1):
            if candidate[end - 1] == " ":
                continue
            try:
                IBAN(candidate[:end])
            except SchwiftyException:
                continue
            yield m.start(), m.start() + end
            break


def _ips(text: str) -> Iterator[tuple[int, int]]:
    for pattern in (_IPV4, _IPV6):
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
    for m in _PHONE.finditer(text):
        candidate = m.group()
        for end in range(len(candidate), 7, -1):
            if not candidate[end - 1].isdigit() or (end < len(candidate) and candidate[end].isdigit()):
                continue
            try:
                number = phonenumbers.parse(candidate[:end], None)
            except phonenumbers.NumberParseException:
                continue
            if phonenumbers.is_valid_number(number):
                yield m.start(), m.start() + end
                break


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
        self.finders = [(kind, finders[kind]) for kind in finders if kind in set(kinds)]
        self.kinds = tuple(kind for kind, _ in self.finders)

    def __bool__(self) -> bool:
        return bool(self.finders)

    def text(self, text: str, placeholders: "Placeholders") -> str:
        spans: list[tuple[int, int, int, str]] = []
        for rank, (kind, find) in enumerate(self.finders):
            spans += [(start, -(end - start), rank, kind) for start, end in find(text)]
        if not spans:
            return text
        out, at = [], 0
        for start, negative_length, _, kind in sorted(spans):
            if start < at:
                continue  # overlaps a span already replaced
            end = start - negative_length
            out += [text[at:start], placeholders.of(kind, text[start:end])]
            at = end
        out.append(text[at:])
        return "".join(out)

    def value(self, value: Any, placeholders: "Placeholders") -> Any:
        """A JSON value with every string (object keys too) redacted."""
        if isinstance(value, str):
            return self.text(value, placeholders)
        if isinstance(value, dict):
            return {self.text(k, placeholders): self.value(v, placeholders) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v, placeholders) for v in value]
        return value

    def case(self, data: CaseData) -> CaseData:
        """The case with its content and expectations redacted through one map."""
        return CaseData(**self.fields({f.name: getattr(data, f.name) for f in dataclasses.fields(data)}))

    def fields(self, case: dict[str, Any]) -> dict[str, Any]:
        """A case as a dict (the CI command's), redacted through one map. external_id, category and kind are
        the dataset's own names for the case and stay. Fields are redacted in the case format's order,
        whatever the dict's, so the server and the CI command number the same case's values alike."""
        content = [value for name, value in case.items() if name not in KEPT_FIELDS]
        narrowed = self._narrowed("\n".join(_strings(content)))
        if not narrowed:
            return case
        p = Placeholders()
        order = {name: i for i, name in enumerate(CASE_FIELDS)}
        redacted = {}
        for name in sorted(case, key=lambda name: order.get(name, len(order))):
            redacted[name] = case[name] if name in KEPT_FIELDS else narrowed.value(case[name], p)
        return {name: redacted[name] for name in case}

    def _narrowed(self, texts: str) -> "Redactor":
        """This redactor with only the kinds found in `texts` (a case's strings, joined): a case carries few
        kinds, and one pass over the joined text costs far less than a pass over each string. A value found
        in one string is found in the joined text too (a line break ends a value as a string's end does)."""
        narrowed = Redactor(())
        narrowed.finders = [(kind, find) for kind, find in self.finders if next(iter(find(texts)), None)]
        return narrowed


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

    def hide(self, text: str) -> str:
        """`text` (an error message, say) with every value this map has seen replaced by its placeholder."""
        for (_, value), placeholder in sorted(self.by_value.items(), key=lambda item: -len(item[0][1])):
            text = text.replace(value, placeholder)
        return text
