"""Credentials in text, found by the rules of a maintained secret scanner. No Django: `no_secrets` (the
engine, the CI command) and the `secret` redaction use it.

The scanner is Kingfisher (`kingfisher-secret-scanner`, Apache-2.0), used as a library: its bundled rule
catalog (several hundred kinds: Betterleaks' rules and Google's Veles detectors) compiled into one
Vectorscan database, run in this process; nothing is sent anywhere (its validation, which would call the
providers, is never used). docs/security.md, "Finding credentials", says why this one: the measured table
of benchmarks/bench_secrets.py.

Two things are evalhub's own, each measured there:
- The scanner's rules end a credential at a quote, a space or a semicolon, as in source code; an agent's
  prose ends it at a full stop, a comma or a bracket ("Your key is sk_live_….", "(ghp_…)"). So the text is
  also scanned as a "prose view" of the same length, with such punctuation blanked (_prose_view), and the
  spans of both scans count.
- A few shapes the catalog does not report on their own (ADDED_SHAPES), each anchored on a fixed prefix.
"""

import importlib.metadata
import re
from collections.abc import Callable
from functools import cache

import re2
from kingfisher_sdk import Rules, Scanner

SCANNER = "kingfisher-secret-scanner"

# (kind, RE2 pattern, texts of which every match holds one) of credentials the catalog does not report on
# their own. The texts are looked for first (a plain search): a pattern runs only on text that holds one.
ADDED_SHAPES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    # evalhub's own API tokens (evalhub.models.TOKEN_PREFIX and token_urlsafe(32)).
    ("evalhub.api-token", r"\bevh_[A-Za-z0-9_-]{43}", ("evh_",)),
    # The catalog reports an AWS access key id only beside its secret key; alone it still names an account
    # and a user, and agents paste it alone.
    ("evalhub.aws-access-key-id", r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b", ("AKIA", "ASIA", "ABIA", "ACCA")),
    # The catalog leaves test-mode Stripe keys out; they still act on an account's test data.
    ("evalhub.stripe-test-key", r"\b(?:sk|rk)_test_[A-Za-z0-9]{10,99}\b", ("_test_",)),
    # Microsoft Entra (Azure AD) client secrets: three characters, a digit, "Q~", then 31 to 34 more; the
    # catalog has no rule that finds them in prose. Where a pattern has a group, the group is the credential.
    ("evalhub.azure-ad-client-secret",
     r"(?:^|[\\'\"`\s>=:(,)])([A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34})(?:$|[\\'\"`\s<),.&;])",
     ("Q~",)),
    # A private key cut short (an answer quotes its first lines): the catalog reports only whole blocks.
    ("evalhub.private-key-block", r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?:\s*[A-Za-z0-9+/=]{16,})+"
                                  r"(?:\s*-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----)?", ("PRIVATE KEY",)),
    # An HTTP Authorization header's bearer token, whatever its vendor.
    ("evalhub.bearer-token", r"(?i)\bauthorization[\"']?\s*[:=]?\s*[\"']?bearer\s+([A-Za-z0-9._~+/-]{20,}=*)",
     ("uthorization", "UTHORIZATION")),
)

# Punctuation that ends a credential in prose: closing brackets, commas, "!", "&" of a URL's query and
# Markdown's "*" anywhere (one translation), and ".", ";", ":", "?" before a space, a quote or the end
# (a pattern). None of these characters is part of a credential the catalog knows where it is blanked.
_PROSE_CLOSERS = bytes.maketrans(b")]}>&|,!*", b" " * 9)
_PROSE_END = re.compile(rb"[.;:?](?=\s|$|[\"'_`~])")


# A lone surrogate (JSON may carry "\ud800"), which is no UTF-8: one character for another keeps the offsets.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _prose_view(data: bytes) -> bytes:
    """`data` (UTF-8) with the punctuation that ends a credential in prose blanked, byte for byte: a span
    found in it is a span of `data`. (Bytes: a translation by table, far cheaper than one of text.)"""
    return _PROSE_END.sub(b" ", data.translate(_PROSE_CLOSERS))


@cache
def _scanner() -> Scanner:
    # Compiling the catalog takes seconds; Kingfisher keeps the compiled database in the user's cache
    # folder, so later processes load it in about a second.
    return Scanner(Rules())


@cache
def _added() -> tuple[tuple[str, "re2._Regexp", tuple[str, ...]], ...]:
    return tuple((kind, re2.compile(pattern), hints) for kind, pattern, hints in ADDED_SHAPES)


def scanner_identity() -> str:
    """What decides which texts carry a credential: the scanner, its version, the size of its catalog and
    evalhub's additions. A change of any of them is a change of the contract layer's rules (cache.py)."""
    return f"{SCANNER} {scanner_version()}; {rule_count()} rules; prose view; added {len(ADDED_SHAPES)} (re2)"


@cache
def scanner_version() -> str:
    return importlib.metadata.version(SCANNER)


@cache
def rule_count() -> int:
    return len(_scanner().rules)


def _to_chars(data: bytes) -> Callable[[int], int]:
    """A UTF-8 byte offset in `data` → the character offset in the text it encodes."""
    if data.isascii():
        return lambda offset: offset
    return lambda offset: len(data[:offset].decode("utf-8", "surrogatepass"))


def _scanned(data: bytes) -> list[tuple[str, int, int]]:
    """(rule id, start, end) of each finding in `data`, in bytes."""
    found = []
    for finding in _scanner().scan(data):
        if finding.visible:  # an invisible one is a part a visible one depends on, not a credential
            location = finding.location
            found.append((finding.rule_id, location["start_offset"], location["end_offset"]))
    return found


def credential_spans(text: str) -> list[tuple[str, int, int]]:
    """(kind, start, end) of each credential in `text`, in order. Findings that overlap are one credential
    (the first one's kind), so every character any rule took is inside a span: a GitLab token's routable
    suffix is another rule's, a base64 blob's decoded JWT another's."""
    if not text:
        return []
    data = text.encode("utf-8", "surrogatepass")  # JSON may carry a lone surrogate ("\ud800")
    to_chars = _to_chars(data)
    # The text and its prose view are scanned as one, a line apart: one call, not two (a call costs more
    # than the bytes it reads). A finding in the view is moved back onto the text.
    view = _prose_view(data)
    size = len(data)
    scanned = _scanned(data if view == data else data + b"\n" + view)
    if any(start <= size < end for _, start, end in scanned):
        # A rule that spans lines (a private key's) ran from the text into its view: each is scanned apart.
        scanned = _scanned(data) + [(kind, start + size + 1, end + size + 1) for kind, start, end in _scanned(view)]
    found = []
    for kind, start, end in scanned:
        if start > size:
            start, end = start - size - 1, end - size - 1
        found.append((kind, to_chars(start), to_chars(end)))
    readable = text if text.isascii() else _SURROGATE.sub("\ufffd", text)  # RE2 reads UTF-8 only
    for kind, pattern, hints in _added():
        if any(hint in text for hint in hints):
            found += [(kind, *m.span(1 if pattern.groups else 0)) for m in pattern.finditer(readable)]
    merged: list[tuple[str, int, int]] = []
    for kind, start, end in sorted(found, key=lambda f: (f[1], -f[2])):
        if start >= end:
            continue
        if merged and start < merged[-1][2]:
            first_kind, first_start, first_end = merged[-1]
            merged[-1] = (first_kind, first_start, max(first_end, end))
        else:
            merged.append((kind, start, end))
    return merged


def credential_kinds(text: str) -> list[str]:
    """The kinds of credential `text` carries, each once, in the order first found. Never the values."""
    return list(dict.fromkeys(kind for kind, _, _ in credential_spans(text)))
