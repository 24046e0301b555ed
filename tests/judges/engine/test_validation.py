import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from judges.engine import SCORE_FIELDS, InvalidOutput, Judgment, normalise_verdict, validate_answer
from judges.engine.validation import load_json_object


@pytest.mark.parametrize("raw", ["pass", "Pass", "pass.", " PASS", "Pass.", '"pass"', "pass!\n"])
def test_verdicts_are_normalised(raw):
    assert normalise_verdict(raw) == "pass"


@pytest.mark.parametrize("raw", ["FAIL", "fail.", " Fail "])
def test_fail_is_normalised_too(raw):
    assert normalise_verdict(raw) == "fail"


@pytest.mark.parametrize("raw", ["passed", "pass/fail", "maybe", "", "yes", True, 1, None])
def test_anything_else_is_invalid(raw):
    with pytest.raises(InvalidOutput):
        normalise_verdict(raw)


def scores(**changes):
    answer = dict.fromkeys(SCORE_FIELDS, 5)
    answer["reason"] = "fine"
    answer.update(changes)
    return answer


def test_scores_pass_at_the_pass_score_and_fail_below():
    assert validate_answer(scores(correctness=4), output_kind="scores", pass_score=4).outcome == "pass"
    assert validate_answer(scores(correctness=3), output_kind="scores", pass_score=4).outcome == "fail"
    assert validate_answer(scores(correctness=3), output_kind="scores", pass_score=3).outcome == "pass"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"correctness": 7}, "correctness: 7 is outside 1-5"),
        ({"correctness": 0}, "outside 1-5"),
        ({"correctness": 4.0}, "expected an integer"),
        ({"correctness": "4"}, "expected an integer"),
        ({"correctness": True}, "expected an integer"),
        ({"reason": ""}, "reason: empty"),
        ({"reason": 3}, "reason: expected a string"),
    ],
)
def test_invalid_scores_are_rejected_never_clamped(changes, message):
    with pytest.raises(InvalidOutput, match=message):
        validate_answer(scores(**changes), output_kind="scores", pass_score=4)


@pytest.mark.parametrize("missing", [*SCORE_FIELDS, "reason"])
def test_a_missing_field_is_invalid(missing):
    answer = scores()
    del answer[missing]
    with pytest.raises(InvalidOutput, match=f"{missing}: missing"):
        validate_answer(answer, output_kind="scores", pass_score=4)


@given(st.dictionaries(st.sampled_from(SCORE_FIELDS), st.integers(-100, 100), min_size=5), st.integers(1, 5))
def test_scores_are_accepted_exactly_when_all_are_within_1_to_5(values, pass_score):
    answer = {**values, "reason": "r"}
    if all(1 <= v <= 5 for v in values.values()):
        verdict = validate_answer(answer, output_kind="scores", pass_score=pass_score)
        assert verdict.scores == values
        assert (verdict.outcome == "pass") == all(v >= pass_score for v in values.values())
    else:
        with pytest.raises(InvalidOutput):
            validate_answer(answer, output_kind="scores", pass_score=pass_score)


def test_a_verdict_answer_needs_a_verdict_and_a_reason():
    v = validate_answer({"verdict": "Pass.", "reason": " ok "}, output_kind="verdict", pass_score=4)
    assert (v.outcome, v.reason, v.scores) == ("pass", "ok", None)
    with pytest.raises(InvalidOutput, match="verdict: missing"):
        validate_answer({"reason": "ok"}, output_kind="verdict", pass_score=4)
    with pytest.raises(InvalidOutput, match="reason: missing"):
        validate_answer({"verdict": "pass"}, output_kind="verdict", pass_score=4)


def test_json_is_read_from_plain_or_fenced_text_only():
    assert load_json_object('{"verdict": "pass"}') == {"verdict": "pass"}
    assert load_json_object('```json\n{"verdict": "pass"}\n```') == {"verdict": "pass"}
    for text in ('{"verdict": "pa', "[1, 2]", "The verdict is pass.", ""):
        with pytest.raises(InvalidOutput):
            load_json_object(text)


def test_a_judgment_round_trips_through_json():
    j = Judgment("c1", 2, "fail", scores={"relevance": 2}, checks=[{"name": "x", "passed": False, "detail": "d"}])
    again = Judgment.from_dict(json.loads(json.dumps(j.to_dict())))
    assert again == j
    assert Judgment.from_dict({**j.to_dict(), "future_field": 1}) == j


@pytest.mark.parametrize(("value", "valid"), [(1, True), (5, True), (0, False), (6, False)])
def test_the_score_range_is_1_to_5_at_both_ends(value, valid):
    answer = scores(relevance=value)
    if valid:
        verdict = validate_answer(answer, output_kind="scores", pass_score=1)
        assert (verdict.outcome, verdict.reason, verdict.scores["relevance"]) == ("pass", "fine", value)
    else:
        with pytest.raises(InvalidOutput, match=f"^relevance: {value} is outside 1-5$"):
            validate_answer(answer, output_kind="scores", pass_score=1)


@pytest.mark.parametrize(("answer", "message"), [
    ({"verdict": "pass"}, "reason: missing"),
    ({"verdict": "pass", "reason": 3}, "reason: expected a string"),
    ({"verdict": "pass", "reason": "  "}, "reason: empty"),
    ({"reason": "ok"}, "verdict: missing"),
    ({"verdict": 1, "reason": "ok"}, "verdict: expected a string, got int"),
    ({"verdict": "maybe", "reason": "ok"}, "verdict: expected pass or fail, got 'maybe'"),
])
def test_each_invalid_verdict_answer_says_exactly_what_is_wrong(answer, message):
    with pytest.raises(InvalidOutput) as invalid:
        validate_answer(answer, output_kind="verdict", pass_score=4)
    assert str(invalid.value) == message


@pytest.mark.parametrize(("text", "message"), [
    ("[1, 2]", "expected a JSON object, got list"),
    ("pass", "not JSON: Expecting value: line 1 column 1 (char 0)"),
])
def test_an_answer_that_is_not_a_json_object_says_so(text, message):
    with pytest.raises(InvalidOutput) as invalid:
        load_json_object(text)
    assert str(invalid.value) == message
