"""Redacting personal data from a case (plain Python): each kind wherever it is in the case, typed and
numbered placeholders from one map per case, near-misses left alone."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from schwifty import IBAN

from labeling.importing.reading import validate_case
from labeling.importing.redaction import REDACT_KINDS, Placeholders, Redactor, luhn_valid

# One value of each kind, and what its placeholder is called. Synthetic: documentation ranges and test
# numbers (the card networks' published test cards, the IBAN registry's examples, +44 20 7946 reserved
# for drama, RFC 5737/3849 addresses).
VALUES = {
    "email": ["jane.doe@example.com", "obrien+orders@mail.example.co.uk"],
    "phone": ["+44 20 7946 0958", "+1 415-555-0132", "+4930123456"],
    "card": ["4111 1111 1111 1111", "5555-5555-5555-4444", "378282246310005"],
    "iban": ["DE89 3704 0044 0532 0130 00", "GB82WEST12345698765432", "FR1420041010050500013M02606"],
    "ip": ["192.0.2.44", "2001:db8::8a2e:370:7334"],
    "secret": ["ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "AKIA" + "IOSFODNN7EXAMPLE"],
}
NEAR_MISSES = [
    "Order 4111111111111112 shipped",  # 16 digits, fails the Luhn check
    "IBAN DE89370400440532013001 was rejected",  # a wrong check digit
    "Call 020 7946 0958 or (415) 555-0132",  # national numbers: without their country, like order numbers
    "Version 1.2.3, at 12:30:45 on 2024-03-05, build 10.0.19045",
    "Total $1,299.99 for order #48213377, tracking 1Z999AA10123456784",
    "Refund 550e8400-e29b-41d4-a716-446655440000, commit a94a8fe5ccb19ba61c4c0873d391e987982fbbd3",
    "Write to support at our help page; @jane said 256.1.1.1 is not an address",
]


def redact(text: str, *kinds: str) -> str:
    return Redactor(kinds or REDACT_KINDS).text(text, Placeholders())


@pytest.mark.parametrize("kind, value", [(k, v) for k, values in VALUES.items() for v in values])
def test_each_kind_is_replaced_by_its_typed_placeholder(kind, value):
    assert redact(f"Hello, it is {value}, thanks.", kind) == f"Hello, it is [{kind.upper()}_1], thanks."


@pytest.mark.parametrize("kind, value", [(k, v) for k, values in VALUES.items() for v in values])
def test_a_kind_not_chosen_is_left(kind, value):
    others = [k for k in REDACT_KINDS if k != kind]
    assert value in redact(f"Hello, it is {value}, thanks.", *others)


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_are_left_alone(text):
    assert redact(text) == text


def test_a_value_right_after_another_is_found_too():
    # A candidate runs on into what follows; the search goes on after the value, not after the candidate.
    assert redact("DE89 3704 0044 0532 0130 00 0 DE89 3704 0044 0532 0130 00", "iban") == "[IBAN_1] 0 [IBAN_1]"
    assert redact("+44 20 7946 0958 4111 1111 1111 1111") == "[PHONE_1] [CARD_1]"


def test_placeholders_are_numbered_per_kind_and_stable_within_a_case():
    text = "a@example.com wrote to b@example.com; a@example.com again, from 192.0.2.1"
    assert redact(text) == "[EMAIL_1] wrote to [EMAIL_2]; [EMAIL_1] again, from [IP_1]"


def test_the_luhn_check_agrees_with_the_card_networks_test_numbers():
    for number in ("4111111111111111", "5555555555554444", "378282246310005", "6011111111111117", "4012888888881881"):
        assert luhn_valid(number)
        last = int(number[-1])
        for wrong in range(10):
            if wrong != last:
                assert not luhn_valid(number[:-1] + str(wrong))


def test_an_iban_is_redacted_exactly_when_schwifty_accepts_it():
    for value in ("DE89370400440532013000", "GB82WEST12345698765432", "NL91ABNA0417164300", "DE89370400440532013001",
                  "GB82WEST12345698765433", "XX89370400440532013000"):
        try:
            IBAN(value)
            valid = True
        except ValueError:
            valid = False
        assert (redact(f"pay to {value} now", "iban") == "pay to [IBAN_1] now") is valid, value


CASE = {
    "external_id": "ticket-1",
    "input": "I am jane@example.com, card 4111 1111 1111 1111. Refund me.",
    "output": "Refund sent to jane@example.com; we called +44 20 7946 0958.",
    "trace": {
        "context": "Customer jane@example.com, IBAN DE89 3704 0044 0532 0130 00, from 192.0.2.44",
        "toolCalls": [{"name": "refund", "argument": {"email": "jane@example.com", "card": "4111 1111 1111 1111"},
                       "result": {"notified": ["jane@example.com", "ops@example.com"]}}],
        "retrievedSources": ["policy-returns"],
    },
    "golden_answer": "Confirm the refund to jane@example.com.",
    "expected_behaviour": "Never repeat 4111 1111 1111 1111 in full.",
    "expected_tool": "refund",
    "expected_tool_argument": {"email": "jane@example.com", "card": "4111 1111 1111 1111"},
    "category": "refunds",
    "metadata": {"references": ["We refunded jane@example.com."], "customer": {"phone": "+44 20 7946 0958"}},
}


def test_a_case_is_redacted_everywhere_through_one_map():
    data, problems = validate_case(CASE)
    assert problems == []
    redacted = Redactor(REDACT_KINDS).case(data)
    assert redacted.input == "I am [EMAIL_1], card [CARD_1]. Refund me."
    assert redacted.output == "Refund sent to [EMAIL_1]; we called [PHONE_1]."
    assert redacted.trace["context"] == "Customer [EMAIL_1], IBAN [IBAN_1], from [IP_1]"
    call = redacted.trace["toolCalls"][0]
    assert call["argument"] == {"email": "[EMAIL_1]", "card": "[CARD_1]"}
    assert call["result"] == {"notified": ["[EMAIL_1]", "[EMAIL_2]"]}
    assert redacted.golden_answer == "Confirm the refund to [EMAIL_1]."
    assert redacted.expected_behaviour == "Never repeat [CARD_1] in full."
    # The argument still equals its expectation, so expected_tool_argument passes as it did.
    assert redacted.expected_tool_argument == call["argument"]
    assert redacted.metadata == {"references": ["We refunded [EMAIL_1]."], "customer": {"phone": "[PHONE_1]"}}
    assert (redacted.external_id, redacted.category, redacted.expected_tool) == ("ticket-1", "refunds", "refund")


def test_the_ci_commands_dicts_number_alike_whatever_their_key_order():
    data, _ = validate_case(CASE)
    reordered = dict(reversed(list(CASE.items())))
    assert Redactor(REDACT_KINDS).fields(reordered)["output"] == Redactor(REDACT_KINDS).case(data).output


def test_unknown_kinds_are_refused():
    with pytest.raises(ValueError, match="cannot redact 'name'"):
        Redactor(["email", "name"])


# --- planted personal data never survives ---------------------------------------------------------------

planted = st.sampled_from([v for values in VALUES.values() for v in values])
filler = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(filler, planted), min_size=1, max_size=5), filler)
def test_arbitrary_text_with_planted_personal_data_never_keeps_a_planted_value(pieces, tail):
    # Separated by a space from what surrounds it, as a value is written in a sentence.
    text = "".join(f"{before} {value} " for before, value in pieces) + tail
    redacted = redact(text)
    for _, value in pieces:
        assert value not in redacted
    assert redact(redacted) == redacted  # placeholders are never found again: redacting twice changes nothing


# What the redaction missed, or left part of, before (docs/security.md, "Redaction"): each must go whole.
MISSED_BEFORE = {
    "an address that ends a sentence": ("The request came from 203.0.113.45.", "The request came from [IP_1]."),
    "an IPv4-mapped IPv6 address": ("Mapped ::ffff:192.0.2.1 here.", "Mapped [IP_1] here."),
    "a card with non-breaking spaces": ("Card 4111\u00a01111\u00a01111\u00a01111 was charged.",
                                        "Card [CARD_1] was charged."),
    "a card with narrow non-breaking spaces": ("Card 5555\u202f5555\u202f5555\u202f4444.", "Card [CARD_1]."),
    "a card with dots": ("Card 4111.1111.1111.1111.", "Card [CARD_1]."),
    "a lower-case IBAN": ("iban de89 3704 0044 0532 0130 00 please", "iban [IBAN_1] please"),
    "a dashed IBAN": ("IBAN GB82-WEST-1234-5698-7654-32.", "IBAN [IBAN_1]."),
    "an internationalised e-mail domain": ("Write to jane@bücher.example or info@例え.テスト.",
                                           "Write to [EMAIL_1] or [EMAIL_2]."),
    "a 00-prefixed phone number": ("Call 0044 20 7946 0958 now.", "Call [PHONE_1] now."),
}


@pytest.mark.parametrize("name", list(MISSED_BEFORE))
def test_what_was_missed_before_is_redacted_whole(name):
    text, expected = MISSED_BEFORE[name]
    assert redact(text) == expected


@pytest.mark.parametrize("text", ["pi is 3.14159265358979 and the build 10.0.19045.3803",
                                  "Order 0012345678 shipped; version 1.2.3.4444444444444",
                                  "codes ab12 cdef ghij klmn op and de89 nope"])
def test_dots_lower_case_and_00_do_not_make_numbers_and_words_personal_data(text):
    assert redact(text) == text


# One value of each kind, and how support text carries it: ending a sentence, in quotes, JSON, a URL, Markdown.
EACH_KIND = {
    "email": ["jane.doe@example.com", "ops@bücher.example"],
    "phone": ["+44 20 7946 0958", "0044 20 7946 0958"],
    "card": ["4111 1111 1111 1111", "4111\u00a01111\u00a01111\u00a01111", "378282246310005"],
    "iban": ["DE89 3704 0044 0532 0130 00", "gb82west12345698765432"],
    "ip": ["203.0.113.45", "2001:db8::8a2e:370:7334", "::ffff:192.0.2.1"],
    "secret": ["ghp_" + "k7Qm2Xr9Tz4Lp8Wn3Vb6Hy1Jd5Fs0Gc2Ae4R", "evh_" + "Qm2Xr9Tz4Lp8Wn3Vb6Hy1Jd5Fs0Gc2Ae4Rk7Yt0Uw2x"],
}
WRAPPERS = ["{}", "{}.", "{},", "({})", '"{}"', "'{}'", '{{"v": "{}"}}', "**{}**", "`{}`", "<{}>", "[{}]",
            "https://example.com/a?x={}&y=2"]
SUPPORT_WORDS = ["Thanks", "for", "your", "order", "ORD-2024-118273", "shipped", "today.", "Refund", "of",
                 "$1,299.99", "was", "issued", "on", "5 March 2024", "at", "14:32.", "Ticket", "INC0012345", "-",
                 "see", "https://shop.example.com/orders?id=118273&utm_source=email", "commit", "9fceb02", "\n",
                 "550e8400-e29b-41d4-a716-446655440000", "SAVE20-SPRING24", "1Z999AA10123456784", "é", "—"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(list(EACH_KIND)), st.data())
def test_each_kind_at_any_place_in_support_text_is_removed_to_its_last_character(kind, data):
    value = data.draw(st.sampled_from(EACH_KIND[kind]))
    wrapped = data.draw(st.sampled_from(WRAPPERS)).format(value)
    words = data.draw(st.lists(st.sampled_from(SUPPORT_WORDS), max_size=12))
    at = data.draw(st.integers(0, len(words)))
    text = " ".join([*words[:at], wrapped, *words[at:]])
    redacted = redact(text)
    assert value not in redacted
    # Nothing long of a credential is left: no run of 8 of its characters.
    if kind == "secret":
        assert not any(value[i:i + 8] in redacted for i in range(len(value) - 7)), redacted
    assert f"[{kind.upper()}_1]" in redacted
    # What is around it stays as it was.
    before, after = wrapped.split(value)
    assert before + f"[{kind.upper()}_1]" + after in redacted, redacted
