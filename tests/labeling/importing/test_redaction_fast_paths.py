"""The redaction's fast paths find exactly what the plain patterns find (tests/labeling/importing/
redaction_reference.py, a frozen copy of the finders without them): e-mail addresses tried only at each "@",
IPv4 addresses only where their dots are, cards through the table-driven Luhn check, and a case rebuilt only
where it changed."""

from hypothesis import given, settings
from hypothesis import strategies as st

from labeling.importing import redaction
from labeling.importing.reading import validate_case
from tests.labeling.importing import redaction_reference as reference
from tests.labeling.importing.test_redaction import VALUES

# Pieces that sit at the edges of what the finders accept, joined by what may stand around them.
PIECES = [v for values in VALUES.values() for v in values] + [
    "a@b.co", "x.y@z", "@example.com", "é@example.com", "jo@ex-ample.org.", "a@b@c.de", "+44", "1.2.3.4.5",
    "10.0.0.1", "999.1.1.1", "٣.٣.٣.٣", "12.34.56.789", "4111111111111111", "4111 1111 1111 1112", "-4111",
    "1234 5678 9012 3456 7", "٤١١١١١١١١١١١١١١١", "DE89370400440532013000", "2001:db8::1", "::", "key", "Key:",
    "api_key = ", "AKIA" + "IOSFODNN7EXAMPLE", "akia" + "iosfodnn7example", "sk-" + "a" * 24 + "1", "ghp_", "eyJ",
    "xoxb-", "Bearer ", "-----BEGIN RSA PRIVATE KEY-----", "123456789:" + "A" * 35, "K", "ſ",
    # Whole credentials of case-insensitive rules, in other cases than their patterns are written in.
    "Bearer abcdefghijklmnopqrstuvwxyz012345", "AWS_Secret_Access_Key = " + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "IBM_API_KEY=" + "a1" * 22,
]
SEPARATORS = st.sampled_from(["", " ", "\n", ".", "-", "_", "@", ":", "=", "'", '"', "1", "a", "A", "é", "\t"])
texts = st.lists(st.one_of(st.sampled_from(PIECES), SEPARATORS,
                           st.text(alphabet="ab1.-@: +_AK\n", max_size=6)), max_size=24).map("".join)


@settings(max_examples=300, deadline=None)
@given(texts)
def test_the_fast_finders_find_what_the_patterns_alone_find(text):
    for name in ("_emails", "_ips", "_cards", "_ibans", "_phones"):
        assert list(getattr(redaction, name)(text)) == list(getattr(reference, name)(text)), name


@given(st.text(alphabet="0123456789٣", min_size=1, max_size=19))
def test_the_table_driven_luhn_check_agrees_with_the_loop(digits):
    assert redaction.luhn_valid(digits) == reference.luhn_valid(digits)


def test_a_case_is_rebuilt_only_where_something_was_found():
    data, _ = validate_case({
        "external_id": "c1", "input": "Write to jane@example.com", "output": "Done.",
        "trace": {"toolCalls": [{"name": "lookup", "argument": {"id": 7}}]},
        "expected_tool_argument": {"email": "jane@example.com"}, "metadata": {"ticket": 4},
    })
    redacted = redaction.Redactor(redaction.REDACT_KINDS).case(data)
    assert redacted == reference.Redactor(reference.REDACT_KINDS).case(data)
    assert redacted.input == "Write to [EMAIL_1]" and redacted.expected_tool_argument == {"email": "[EMAIL_1]"}
    assert redacted.trace is data.trace and redacted.metadata is data.metadata  # nothing found: not copied


def test_long_runs_of_candidates_are_found_as_the_patterns_alone_find_them():
    # A run of digit groups is read once, not once a match: the same finds.
    for text in ["4111 " * 40 + "-1", "x 4111 1111 1111 1111 5555 5555 5555 4444 378282246310005"]:
        assert list(redaction._cards(text)) == list(reference._cards(text)), text


def test_cards_are_looked_for_in_long_enough_stretches_and_in_text_of_other_scripts_whole():
    # In ASCII text only the stretches of 13 digits, spaces and dashes are searched, each seeing the
    # character after it: a card run on into a letter is not one. Other text is searched whole.
    cases = {"ref 4111 1111 1111 1111x": [], "ref 4111 1111 1111 1111_ and 4111-1111-1111-1111.": [(29, 48)],
             "٤١١١ ١١١١ ١١١١ ١١١١": [(0, 19)], "é 4111 1111 1111 1111": [(2, 21)], "12 3 4111111111111111": [(5, 21)]}
    for text, spans in cases.items():
        assert list(redaction._cards(text)) == list(reference._cards(text)) == spans, text


def test_strings_holding_line_breaks_and_finds_crossing_from_one_string_into_the_next_are_redacted_in_place():
    # The case's strings are searched joined by line breaks and, when those are the only line breaks and
    # no find takes one in, split back after redacting; else each find is put in the strings it falls in.
    kinds = redaction.REDACT_KINDS
    broken = {"input": "Line one\nwrite to jane@example.com", "output": "jane@example.com", "trace": {"n": 1}}
    crossing = {"input": "jane@example.com", "trace": {"context": "Send it with"},
                "golden_answer": "192.0.2.1 now"}
    assert redaction.Redactor(kinds).fields(broken) == reference.Redactor(kinds).fields(broken) == {
        **broken, "input": "Line one\nwrite to [EMAIL_1]", "output": "[EMAIL_1]"}
    assert redaction.Redactor(kinds).fields(crossing) == reference.Redactor(kinds).fields(crossing) == {
        "input": "[EMAIL_1]", "trace": {"context": "Send it with"}, "golden_answer": "[IP_1] now"}


