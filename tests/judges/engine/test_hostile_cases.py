"""One hostile case never stops a batch: text nested or sized to break a parser is a failed check with
its reason, and a case whose judging raises is not evaluated ("internal error") while the rest go on."""

import pytest

from judges.engine import contract as contract_module
from judges.engine import judge_batch, judge_case
from judges.engine.contract import MAX_JSON_DEPTH, load_json_text

from .factories import contract_config, tool_case

DEEP_ARGUMENT = "[" * 200_000 + "]" * 200_000  # nested past what Python's own JSON parser can take
DEEP_ANSWER = DEEP_ARGUMENT


def test_a_tool_argument_nested_too_deeply_fails_its_check_with_the_reason():
    case = tool_case(trace={"toolCalls": [{"name": "lookup_order", "argument": DEEP_ARGUMENT}]})
    j = judge_case(case, contract_config("expected_tool_argument"), 1)
    assert (j.outcome, j.layer) == ("fail", "contract")
    assert "lookup_order called with" in j.reason and "expected" in j.reason


def test_an_answer_nested_too_deeply_fails_the_schema_check_with_the_reason():
    config = contract_config("json_schema", json_schema={"type": "array"})
    j = judge_case(tool_case(output=DEEP_ANSWER), config, 1)
    assert j.outcome == "fail"
    assert f"the answer is not JSON: nested too deeply to parse (more than {MAX_JSON_DEPTH} levels)" in j.reason


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), "nested too deeply"),
        ('"' + "x" * contract_module.MAX_JSON_CHARS + '"', "too large to parse"),
        ("{not json", "Expecting property name"),
    ],
)
def test_what_cannot_be_parsed_safely_is_refused_with_why(text, why):
    with pytest.raises(ValueError, match=why):
        load_json_text(text)


def test_json_at_the_depth_limit_is_read():
    text = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert load_json_text(text) is not None
    assert load_json_text('{"order_id": "ORD-1"}') == {"order_id": "ORD-1"}


def test_a_case_whose_judging_raises_is_not_evaluated_and_the_batch_goes_on(monkeypatch):
    def breaks_on_one(case, cfg):
        if case["external_id"] == "breaks":
            raise RecursionError("maximum recursion depth exceeded")
        return True, "present"

    monkeypatch.setitem(contract_module.CHECKS, "answer_present", breaks_on_one)
    items = [(tool_case(external_id=f"ok-{i}"), 1) for i in range(5)]
    items.insert(2, (tool_case(external_id="breaks"), 1))
    judgments = judge_batch(items, contract_config("answer_present"), concurrency=2)
    by_id = {j.external_id: j for j in judgments}
    assert len(judgments) == 6
    assert (by_id["breaks"].outcome, by_id["breaks"].error) == ("not_evaluated", "internal error")
    assert by_id["breaks"].reason.startswith("internal error while judging this case: RecursionError: maximum")
    assert all(by_id[f"ok-{i}"].outcome == "pass" for i in range(5))
