"""The redaction's prefilter (labeling/importing/prefilter.py: one RE2 pass says which kinds can be in a
case) never hides a find: whole cases redacted through it equal the plain
path's (tests/labeling/importing/redaction_reference.py: every finder and every rule on the whole text),
near-misses included, and its RE2 patterns see every character Python's patterns do."""

import random
import re
import sys

import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from labeling.importing import redaction
from labeling.importing.prefilter import PatternSet
from tests.labeling.importing import redaction_reference as reference
from tests.labeling.importing.test_redaction import NEAR_MISSES, VALUES
from tests.labeling.importing.test_redaction_fast_paths import PIECES

# What sits beside real values in support traffic and must stay: numbers that fail their checks, ids,
# digests, prices, dates, versions, and runs of digits just short of (or just past) a card's.
NEAR = [
    "4111111111111112", "4111 1111 1111 1112", "5555-5555-5555-4445", "order 1234567890123", "123456789012",
    "DE89370400440532013001", "GB82 WEST 1234 5698 7654 33", "XX00 0000 0000 0000 00",
    "550e8400-e29b-41d4-a716-446655440000", "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3",
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "$1,299.99", "€ 12.50", "2024-03-05",
    "12:30:45", "10.0.19045", "1.2.3", "256.1.1.1", "+44 20", "+1 (415) 555-01", "tel 0207946095",
    "٤١١١١١١١١١١١١١١١", "٤١١١ ١١١١ ١١١١ ١١١١", "١٩٢.٠.٢.٤٤", "+٤٤ ٢٠ ٧٩٤٦ ٠٩٥٨", "sk-short", "ghp_short",
    "eyJhbGciOiJIUzI1NiJ9", "xoxb-123", "AKIA123", "Bearer x", "aws_secret_access_key=short", "\ud800",
    "jane@example", "@", "a@b", "::", "fe80::1%eth0",
    "+683 4002", "+6834002", "+500 31111",  # the shortest valid numbers: seven and eight digits (Niue, Falklands)
    "NO9386011117947", "4222222222222",  # the shortest IBAN (Norway's, 15) and a 13-digit card
    "jane_@example.com", "x.@example.org", "2001:db8:0:0:1:0:0:1",  # an address ending in "_"; IPv6 without "::"
]
WORDS = ["order", "card", "IBAN", "call", "ref", "key", "token", "password:", "", " ", "\n", "-", ".", ",",
         "é", "İ", "ſ", "K", "\t", "\"", "'", "=", ":", "/", "\\"]
ALL_PIECES = [v for values in VALUES.values() for v in values] + NEAR_MISSES + NEAR + PIECES


def random_text(rng: random.Random) -> str:
    return "".join(rng.choice(ALL_PIECES) if rng.random() < 0.4 else rng.choice(WORDS)
                   for _ in range(rng.randint(0, 12)))


def random_case(rng: random.Random) -> dict:
    return {
        "external_id": f"c{rng.randint(1, 99)}", "input": random_text(rng), "output": random_text(rng),
        "trace": {"toolCalls": [{"name": random_text(rng), "argument": {random_text(rng): random_text(rng)},
                                 "result": [random_text(rng), rng.randint(0, 9), None]}],
                  "context": random_text(rng)},
        "golden_answer": random_text(rng), "expected_tool_argument": {"id": random_text(rng)},
        "metadata": {"note": random_text(rng), "ticket": rng.randint(0, 99)}, "category": random_text(rng),
    }


def test_a_generated_corpus_is_redacted_as_the_plain_path_redacts_it():
    rng = random.Random(34)
    kinds_choices = [redaction.REDACT_KINDS, ("email", "phone", "card", "iban", "ip"), ("card",), ("secret",),
                     ("iban", "ip")]
    for n in range(600):
        case = random_case(rng)
        kinds = kinds_choices[n % len(kinds_choices)]
        assert redaction.Redactor(kinds).fields(case) == reference.Redactor(kinds).fields(case), case


def test_each_piece_alone_has_the_spans_the_plain_path_finds():
    # Alone, a value at the edge of a kind's condition (a 13-digit card, a seven-digit phone number) is not
    # hidden by a longer one beside it.
    for piece in ALL_PIECES:
        for kinds in (redaction.REDACT_KINDS, *([kind] for kind in redaction.REDACT_KINDS)):
            assert redaction.Redactor(kinds).spans(piece) == reference.Redactor(kinds).spans(piece), (piece, kinds)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(ALL_PIECES), st.sampled_from(WORDS), st.text(max_size=4)),
                max_size=16).map("".join))
def test_any_text_has_the_spans_the_plain_path_finds(text):
    assert redaction.Redactor(redaction.REDACT_KINDS).spans(text) == \
        reference.Redactor(reference.REDACT_KINDS).spans(text)


EVERY_CHARACTER = "".join(map(chr, [*range(0xD800), *range(0xE000, sys.maxunicode + 1)]))


def test_re2s_digits_hold_every_digit_pythons_patterns_match():
    assert set(re.findall(r"\d", EVERY_CHARACTER)) <= set(re2.findall(r"\p{Nd}", EVERY_CHARACTER))


def test_a_scan_re2_could_not_finish_counts_every_pattern():
    patterns = PatternSet(["a", "b"])
    assert patterns.found("xa\ud800") == {0}

    class GaveUp:
        def Match(self, text):
            return None  # what RE2's Set answers when its automaton ran out of memory

    patterns._set = GaveUp()
    assert patterns.found("x") == {0, 1}
