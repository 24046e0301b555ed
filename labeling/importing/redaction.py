"""Personal data and credentials out of a case before it is stored, hashed or judged. No Django: the CI
command redacts with it too (docs/security.md, "Redaction").

A dataset names the kinds it redacts (REDACT_KINDS). Each value found is replaced by a typed, numbered
placeholder (`[EMAIL_1]`, `[EMAIL_2]`), one map per case: the same address is the same placeholder in the
input, the trace and the expectations, so a tool argument that equalled its expectation still does.
Detection reuses maintained libraries where the shape has rules beyond a pattern: phone numbers through
`phonenumbers` (Google's libphonenumber metadata), IBANs through `schwifty` (country lengths, formats and
the mod-97 checksum), credentials through the scanner that `no_secrets` uses (credentials.py); cards are
Luhn-checked here, addresses checked by `ipaddress`.
"""

import dataclasses
import ipaddress
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache, lru_cache
from itertools import accumulate
from operator import attrgetter
from typing import Any

import phonenumbers
from schwifty import IBAN
from schwifty.exceptions import SchwiftyException

from labeling.importing.credentials import credential_spans
from labeling.importing.prefilter import PatternSet
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
# The domain may be internationalised (`jane@bücher.example`, `info@例え.テスト`): its labels are letters and
# digits of any script.
_EMAIL = re.compile(r"[A-Za-z0-9._%+-](?<![\w.%+-][A-Za-z0-9._%+-])[A-Za-z0-9._%+-]*@(?:[^\W_]|-)+(?:\.(?:[^\W_]|-)+)*"
                    r"\.(?:[^\W\d_]{2,}|xn--[a-z0-9-]+)(?![\w-])")
_LOCAL_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-"  # _EMAIL's first class
# Groups of digits joined by single spaces (a non-breaking one too), dashes or dots, never inside a word:
# where card numbers are.
_CARD_JOINS = " \u00a0\u202f.-"
_DIGIT_RUN = re.compile(r"\d(?<![\w-]\d)\d*(?:[ \u00a0\u202f.-]\d+)*(?![\w-])")
_DIGITS = re.compile(r"\d+")
# A country code, check digits, then up to 30 letters or digits, optionally in groups of four (joined by
# spaces or dashes), in either case.
_IBAN = re.compile(r"[A-Za-z](?<!\w[A-Za-z])[A-Za-z]\d{2}(?:[ -]?[A-Za-z0-9]){11,30}")
# International form: "+" or the "00" that dials out of most countries.
_PHONE = re.compile(r"(?:\+(?<![\w+]\+)|0(?<![\w+]0)0)\d(?:[ .()-]{0,2}\d){6,18}")
# An address may end a sentence ("… from 203.0.113.45."): a dot after it that no digit follows ends it.
_IPV4 = re.compile(r"\d(?<![\w.]\d)\d{0,2}(?:\.\d{1,3}){3}(?!\w|\.\d)")
_IPV4_DOTS = re.compile(r"\.\d{1,3}\.\d{1,3}\.\d")  # the dots of an IPv4 address, from its first
_IPV6_HINT = re.compile(r":[0-9A-Fa-f]{0,4}:")  # two colons with at most one group between: in every IPv6
# An IPv4-mapped address (`::ffff:192.0.2.1`) ends in a dotted quad: tried first, so the hex group "192"
# does not end it.
_IPV6 = re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{1,4})?(?![\w:]|\.\d)")

# What every find of a kind holds, in RE2's syntax (prefilter.py; `\p{Nd}` is any decimal digit, as
# Python's `\d`): a text without it is not searched for that kind. Each is a pattern above with its
# lookarounds left out and its repeats cut to the fewest that a find needs (a card's 13 digits).
_CANDIDATES = {
    "email": r"[A-Za-z0-9._%+-]@[\pL\pN-]",
    "phone": r"(?:\+|00)\p{Nd}(?:[ .()-]{0,2}\p{Nd}){6}",
    "card": r"\p{Nd}(?:[ \x{a0}\x{202f}.-]?\p{Nd}){12}",
    "iban": r"[A-Za-z]{2}\p{Nd}{2}(?:[ -]?[A-Za-z0-9]){11}",
    "ip": r"\p{Nd}\.\p{Nd}{1,3}\.\p{Nd}{1,3}\.\p{Nd}|:[0-9A-Fa-f]{0,4}:",  # IPv4's dots, _IPV6_HINT
}


@cache
def _prefilter() -> tuple[PatternSet, dict[str, int]]:
    """The kinds' patterns, found in one pass; with the id of each kind's. (`secret` has none: the
    scanner runs its whole catalog as one automaton itself.)"""
    return PatternSet(list(_CANDIDATES.values())), {kind: i for i, kind in enumerate(_CANDIDATES)}


_DOUBLED = (0, 2, 4, 6, 8, 1, 3, 5, 7, 9)  # a digit doubled, its two digits added


def luhn_valid(digits: str) -> bool:
    """The Luhn check: from the right, every second digit doubled (its digits added), the sum a multiple of 10."""
    return _luhn_sums(digits)[0] % 10 == 0


def _luhn_sums(digits: str) -> tuple[int, int]:
    """The Luhn sum of `digits` with its last digit kept (luhn_valid's), and with its last digit doubled:
    what `digits` adds to a longer number's sum, as an even or an odd number of digits follow it."""
    kept, doubled = list(map(int, digits[::-1][::2])), list(map(int, digits[::-1][1::2]))
    return sum(kept) + sum(_DOUBLED[n] for n in doubled), sum(_DOUBLED[n] for n in kept) + sum(doubled)


def _emails(text: str) -> Iterator[tuple[int, int]]:
    # _EMAIL tried at every character is slow (nearly every character may begin an address). Every address
    # holds an "@" and begins where the run of address characters before that "@" begins (the lookbehind
    # refuses any later start), so the pattern is tried there only: the same finds, left to right.
    at = 0
    while (sign := text.find("@", at)) >= 0:
        start = len(text[at:sign].rstrip(_LOCAL_CHARS)) + at  # back over the address characters before it
        m = _EMAIL.match(text, start) if start < sign else None
        if m is not None:
            yield m.span()
            at = m.end()
        else:
            at = sign + 1


def _cards(text: str) -> Iterator[tuple[int, int]]:
    # A run of digit groups may hold more than a card ("+44 20 7946 0958 4111 1111 1111 1111"): from each
    # group, the longest Luhn-valid stretch of 13 to 19 digits is a candidate, and where candidates overlap
    # the earliest wins (Redactor.text), so a phone number before a card leaves the card whole.
    for m in _digit_runs(text):
        run = m.group()
        if len(run) < 13:
            continue  # fewer than 13 digits
        groups = [(g.start(), g.end(), len(g.group()), *_group_sums(g.group())) for g in _DIGITS.finditer(run)]
        left = sum(length for _, _, length, _, _ in groups)  # the digits from group i on
        for i, (start, _, group_length, _, _) in enumerate(groups):
            if left < 13:
                break
            left -= group_length
            count = kept = doubled = 0  # the stretch's digits, its two Luhn sums (see _luhn_sums)
            best = None
            # Dots join digits in decimals and versions too: a stretch with a dot is a card only in groups of four.
            dotted = fours = False
            for j in range(i, len(groups)):  # not groups[i:]: a copy of the rest each time, square in a long run
                g_start, g_end, length, g_kept, g_doubled = groups[j]
                dotted = dotted or (j > i and run[g_start - 1] == ".")
                fours = (fours or j == i) and length == 4
                count += length
                if count > 19 or (dotted and not fours):
                    break
                # The digits before this group move on by `length` places from the right.
                kept, doubled = (g_kept + kept, g_doubled + doubled) if length % 2 == 0 else \
                    (g_kept + doubled, g_doubled + kept)
                if count >= 13 and kept % 10 == 0:
                    best = g_end
            if best is not None:
                yield m.start() + start, m.start() + best


def _group_sums(digits: str) -> tuple[int, int]:
    """_luhn_sums of a group of digits in a run. A group of more than 19 ends every stretch it is in before
    its sums are read (_cards): it is not summed."""
    return _short_group_sums(digits) if len(digits) <= 19 else (0, 0)


_short_group_sums = lru_cache(maxsize=4096)(_luhn_sums)  # a card's groups of four recur from case to case


# ASCII digits, spaces and dashes marked "0", every other byte "x": a run of digit groups long enough for a
# card is a run of at least 13 marks "0".
_RUN_MARKS = bytes(ord("0") if chr(b) in "0123456789 .-" else ord("x") for b in range(256))
_THIRTEEN = b"0" * 13


def _digit_runs(text: str) -> Iterator[re.Match[str]]:
    """The matches of _DIGIT_RUN in `text` that can hold a card's 13 digits, and maybe shorter ones.

    _DIGIT_RUN tried at every digit is slow (support text is full of short numbers). A match holds only
    digits, spaces and dashes, so one with 13 digits lies in a stretch of 13 or more of them: in ASCII text
    those stretches are found by plain byte searches, and the pattern runs over them only (seeing the
    character after each, which its end checks). Text with other characters (other digits among them)
    is searched whole."""
    if not text.isascii():
        yield from _DIGIT_RUN.finditer(text)
        return
    marks = text.encode("ascii").translate(_RUN_MARKS)
    at = 0
    while (start := marks.find(_THIRTEEN, at)) >= 0:
        end = marks.find(b"x", start)
        end = len(marks) if end < 0 else end
        yield from _DIGIT_RUN.finditer(text, start, end + 1)
        at = end


def _ibans(text: str) -> Iterator[tuple[int, int]]:
    # The pattern may run on into what follows (another IBAN, a word): the longest prefix schwifty accepts
    # is the IBAN, and the search goes on after it.
    yield from _longest_valid(_IBAN, text, _iban_valid, shortest=15)


@lru_cache(maxsize=4096)  # a customer's IBAN, phone number recurs across cases
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


def _ipv4_matches(text: str) -> Iterator[re.Match[str]]:
    """_IPV4.finditer(text), tried only where an address can begin. _IPV4 begins with a digit and is tried
    at every one (many in support text); an address begins a run of 1 to 3 digits that ends at a dot
    followed by three more groups (_IPV4_DOTS finds those dots at the speed of a plain search), and no
    later digit of that run may begin one (the lookbehind refuses it)."""
    at = 0
    while dot := _IPV4_DOTS.search(text, at):
        start = dot.start()
        while start > at and text[start - 1].isdecimal():
            start -= 1
        m = _IPV4.match(text, start) if 0 < dot.start() - start <= 3 else None
        if m is not None:
            yield m
            at = m.end()
        else:
            at = dot.start() + 1


def _ips(text: str) -> Iterator[tuple[int, int]]:
    matches = [_ipv4_matches(text)]
    if _IPV6_HINT.search(text):
        matches.append(_IPV6.finditer(text))
    for found in matches:
        for m in found:
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


@lru_cache(maxsize=4096)
def _phone_valid(candidate: str) -> bool:
    if not candidate[-1].isdigit():
        return False
    if candidate.startswith("00"):
        candidate = "+" + candidate[2:]
    try:
        return phonenumbers.is_valid_number(phonenumbers.parse(candidate, None))
    except phonenumbers.NumberParseException:
        return False


def _secrets(text: str) -> Iterator[tuple[int, int]]:
    for _, start, end in credential_spans(text):
        yield start, end


class Redactor:
    """Finds the chosen kinds in text and replaces each value by its placeholder."""

    def __init__(self, kinds: Iterable[str]) -> None:
        unknown = [k for k in kinds if k not in REDACT_KINDS]
        if unknown:
            raise ValueError(f"cannot redact {', '.join(map(repr, unknown))}: the kinds are {', '.join(REDACT_KINDS)}")
        finders: dict[str, Callable[..., Iterator[tuple[int, int]]]] = {
            "secret": _secrets, "email": _emails, "iban": _ibans, "card": _cards, "ip": _ips, "phone": _phones}
        # Secrets first: where two kinds overlap, the earlier kind here wins (a key is not a phone number).
        chosen = set(kinds)
        self.finders: list[tuple[str, Callable[..., Iterator[tuple[int, int]]]]] = [
            (kind, finders[kind]) for kind in finders if kind in chosen]
        self.prefilter, self.candidate_ids = _prefilter()

    def __bool__(self) -> bool:
        return bool(self.finders)

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, kind) of what to replace in `text`, in order, never overlapping: where two finds
        overlap, the one that starts first wins (then the longer, then the kind listed first).

        One pass of the prefilter first says which kinds can be in the text: only those are searched
        for (and credentials, by the scanner's own one pass)."""
        present = self.prefilter.found(text)
        found: list[tuple[int, int, int, str]] = []
        for rank, (kind, find) in enumerate(self.finders):
            if kind == "secret" or self.candidate_ids[kind] in present:
                finds = find(text)
            else:
                continue
            found += [(start, -(end - start), rank, kind) for start, end in finds]
        spans, at = [], 0
        for start, negative_length, _, kind in sorted(found):
            if start >= at:
                spans.append((start, start - negative_length, kind))
                at = start - negative_length
        return spans

    def text(self, text: str, placeholders: "Placeholders") -> str:
        spans = self.spans(text)
        if spans:
            placeholders.reserve(text)
        return _replaced(text, spans, placeholders)

    def text_alone(self, text: str) -> str:
        """`text` redacted with a map of its own (an error message, which quotes one row)."""
        return self.text(text, Placeholders())

    def about_case(self, text: str, case_texts: Iterable[str]) -> str:
        """Text written about a case (a judge's reason, a reviewer's note) redacted: its values are numbered
        after the placeholders the case's own (redacted) `case_texts` hold, so none names two values. (The
        case's map itself is never kept: it holds the originals. A value of the case named again here gets a
        new number.)"""
        if not self.finders or not text:
            return text
        placeholders = Placeholders()
        for case_text in case_texts:
            placeholders.reserve(case_text or "")
        return self.text(text, placeholders)

    def case(self, data: CaseData) -> CaseData:
        """The case with its content and expectations redacted through one map."""
        changed = self._changed(_CASE_DATA_NAMES, _case_data_values(data), Placeholders())
        return _with(data, changed) if changed else data

    def fields(self, case: dict[str, Any], placeholders: "Placeholders | None" = None) -> dict[str, Any]:
        """A case as a dict (the CI command's), redacted through one map (`placeholders`, else a new one).
        external_id, category and kind are the dataset's own names for the case and stay. Fields are redacted
        in the case format's order, whatever the dict's, so the server and the CI command number the same
        case's values alike."""
        names = _redacted_names(tuple(case))
        changed = self._changed(names, [case[name] for name in names],
                                Placeholders() if placeholders is None else placeholders)
        return {**case, **changed} if changed else case

    def _changed(self, names: tuple[str, ...], values: Sequence[Any], placeholders: "Placeholders") -> dict[str, Any]:
        """Of the fields `names` (their `values`, in the case format's order), those that redaction changes,
        redacted; only those are rebuilt.

        The case's strings are searched as one text, joined by line breaks (a line break ends a value as a
        string's end does): one pass a kind instead of one a string. A find that crosses from one string
        into the next (none of the kinds spans a line break on its own) is replaced in both."""
        if not self.finders:
            return {}
        strings: list[str] = []
        ends = []  # for each name, how many strings there are up to the end of its value's
        for value in values:
            if isinstance(value, str):
                strings.append(value)
            else:
                _collect(value, strings)
            ends.append(len(strings))
        joined = "\n".join(strings)
        spans = self.spans(joined)
        if not spans:
            return {}
        placeholders.reserve(joined)
        # Where the only line breaks are the joins and no find takes one in, the joined text redacted is the
        # strings redacted, one a line; else each find is placed in the strings it falls in.
        if joined.count("\n") == len(strings) - 1 and not any("\n" in joined[start:end] for start, end, _ in spans):
            lines = _replaced(joined, spans, placeholders).split("\n")
        else:
            lines = _redacted_apart(strings, joined, spans, placeholders)
        changed, first = {}, 0
        for name, value, end in zip(names, values, ends):
            if lines[first:end] != strings[first:end]:
                changed[name] = lines[first] if isinstance(value, str) else _rebuilt(value, iter(lines[first:end]))
            first = end
        return changed


def _with(data: CaseData, changed: dict[str, Any]) -> CaseData:
    """`data` with the `changed` fields: a shallow copy, where dataclasses.replace would run __init__ again
    (four times the cost, paid for each redacted case of an import)."""
    new = object.__new__(CaseData)
    new.__dict__.update(data.__dict__, **changed)
    return new


def _redacted_apart(strings: list[str], joined: str, spans: list[tuple[int, int, str]],
                    placeholders: "Placeholders") -> list[str]:
    """`strings` redacted, given the spans found in them joined by line breaks (`joined`): each find goes to
    the string it starts in (one that starts on the line break after a string, to the next), and on into
    the next strings while it goes on past their end, the same placeholder in each."""
    offsets = list(accumulate([len(text) + 1 for text in strings], initial=0))
    inside: dict[int, list[tuple[int, int, str, str]]] = {}
    for start, end, kind in spans:
        value = joined[start:end]
        i = bisect_right(offsets, start) - 1
        if start >= offsets[i + 1] - 1:
            i += 1
        while True:
            offset, string_end = offsets[i], offsets[i + 1] - 1
            inside.setdefault(i, []).append((max(start, offset) - offset, min(end, string_end) - offset,
                                             kind, value))
            if end <= string_end:
                break
            i += 1
    redacted = list(strings)
    for i, found in inside.items():  # the strings in order, so the values are numbered in the case's order
        out, at = [], 0
        for start, end, kind, value in found:
            out += [strings[i][at:start], placeholders.of(kind, value)]
            at = end
        redacted[i] = "".join(out) + strings[i][at:]
    return redacted


@cache
def _redacted_names(names: tuple[str, ...]) -> tuple[str, ...]:
    """The names of a case's fields that are redacted, in the case format's order (KEPT_FIELDS stay)."""
    order = {name: i for i, name in enumerate(CASE_FIELDS)}
    return tuple(sorted((name for name in names if name not in KEPT_FIELDS), key=lambda n: order.get(n, len(order))))


# CaseData's fields that are redacted, and a getter of their values (one call, not one a field).
_CASE_DATA_NAMES = _redacted_names(tuple(f.name for f in dataclasses.fields(CaseData)))
_case_data_values = attrgetter(*_CASE_DATA_NAMES)


def _replaced(text: str, spans: Iterable[tuple[int, int, str]], placeholders: "Placeholders") -> str:
    """`text` with each (start, end, kind) span replaced by its value's placeholder."""
    out, at = [], 0
    of = placeholders.of
    for start, end, kind in spans:
        out.append(text[at:start])
        out.append(of(kind, text[start:end]))
        at = end
    out.append(text[at:])
    return "".join(out)


def _rebuilt(value: dict | list, strings: Iterator[str]) -> dict | list:
    """`value` with its strings taken, in _collect's order, from `strings`."""
    # A dict comprehension reads a key before its value, as _collect lists them.
    if isinstance(value, dict):
        return {next(strings): (next(strings) if isinstance(item, str) else
                                _rebuilt(item, strings) if isinstance(item, (dict, list)) else item)
                for item in value.values()}
    return [next(strings) if isinstance(item, str) else _rebuilt(item, strings) if isinstance(item, (dict, list))
            else item for item in value]


def _collect(value: Any, strings: list[str]) -> None:
    """Every string in a JSON value, object keys too, each key before its value's, appended to `strings`."""
    if isinstance(value, str):
        strings.append(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            strings.append(key)
            if isinstance(item, str):
                strings.append(item)
            elif isinstance(item, (dict, list)):
                _collect(item, strings)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, str):
                strings.append(item)
            elif isinstance(item, (dict, list)):
                _collect(item, strings)


# A placeholder already in a text: it was redacted before (the CI command's `--post-cases`, an earlier import).
_PLACEHOLDER = re.compile(r"\[(EMAIL|PHONE|CARD|IBAN|IP|SECRET)_([0-9]{1,9})\]")


class Placeholders:
    """One case's value → placeholder map: `[EMAIL_1]` for its first address, the same one wherever it is."""

    def __init__(self) -> None:
        self.by_value: dict[tuple[str, str], str] = {}
        self.counts: dict[str, int] = {}

    def reserve(self, text: str) -> None:
        """Number new values after the placeholders `text` already holds: where a case was redacted first
        (the CI command, before it posts it), its numbers stay; a value found now never takes one of them."""
        if "[" in text:
            for m in _PLACEHOLDER.finditer(text):
                kind = m.group(1).lower()
                self.counts[kind] = max(self.counts.get(kind, 0), int(m.group(2)))

    def of(self, kind: str, value: str) -> str:
        key = (kind, value)
        if key not in self.by_value:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.by_value[key] = f"[{kind.upper()}_{self.counts[kind]}]"
        return self.by_value[key]
