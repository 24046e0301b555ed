"""The seeds' files unchanged (docs/cases.md): a golden set with no output, the agent's reply carried flat, rows with a
humanVerdict; and each refusal. The reader alone: no database, no Django."""

import json

import pytest

from labeling.importing.reading import human_verdict, normalize_case_fields, validate_case

# The playbook's golden-set shape: no output at all.
GOLDEN = {
    "id": "gs-001", "question": "Can I return shoes after 40 days?",
    "goldenAnswer": "No: returns are accepted within 30 days of delivery.",
    "expectedBehaviour": "Decline politely and cite the 30-day window.", "expectedTool": "lookup_order",
    "expectedToolArgument": {"order": 42}, "expectedSource": "policy-returns",
}


def accepted(obj: dict):
    data, problems = validate_case(json.loads(json.dumps(obj)))
    assert problems == [] and data is not None
    return data


def refused(obj: dict) -> list[tuple]:
    data, problems = validate_case(obj)
    assert data is None
    return problems


def test_the_golden_set_shape_reads_as_a_case_with_no_answer_yet():
    data = accepted(GOLDEN)
    assert (data.external_id, data.input, data.output) == ("gs-001", GOLDEN["question"], None)
    assert (data.golden_answer, data.expected_behaviour) == (GOLDEN["goldenAnswer"], GOLDEN["expectedBehaviour"])
    assert (data.expected_tool, data.expected_tool_argument, data.checks_tool_argument) == ("lookup_order",
                                                                                          {"order": 42}, True)
    assert data.expected_source == "policy-returns" and data.trace == {} and data.human_verdict is None


def test_no_answer_yet_is_not_an_empty_answer():
    assert accepted({**GOLDEN, "answer": None}).output is None
    empty = accepted({**GOLDEN, "answer": ""})
    assert empty.output == ""
    # What a reviewer would judge differs, so a label given on one does not count on the other.
    assert empty.content_hash != accepted(GOLDEN).content_hash


def test_the_agent_reply_carried_flat_reads_into_output_and_trace():
    reply = {
        "id": "t-1", "question": "Where is order 42?", "answer": "It ships tomorrow.",
        "retrievedSources": ["shipping-faq"], "toolCalls": [{"name": "lookup_order", "argument": {"order": 42},
                                                             "result": {"eta": "tomorrow"}}],
        "context": "Orders ship in 2 days.",
    }
    data = accepted(reply)
    assert data.output == "It ships tomorrow."
    assert data.trace == {"retrievedSources": ["shipping-faq"], "toolCalls": reply["toolCalls"],
                          "context": "Orders ship in 2 days."}
    # Flat keys join a trace the line also carries.
    both = accepted({**reply, "trace": {"latency_ms": 12}})
    assert both.trace["latency_ms"] == 12 and both.trace["context"] == "Orders ship in 2 days."


def test_flat_reply_fields_are_checked_like_the_trace():
    problems = refused({"id": "t", "question": "q", "answer": "a", "toolCalls": [{"argument": 1}]})
    assert ("trace.toolCalls[0].name", "is required: the tool's name, a string") in problems


@pytest.mark.parametrize("verdict", ["pass", "PASS", "Pass.", " fail! ", "FAIL", "'fail'", "pass\n"])
def test_a_human_verdict_is_pass_or_fail_in_any_case_or_punctuation(verdict):
    data = accepted({"input": "Can I return it?", "answer": "Yes, within 30 days.", "humanVerdict": verdict,
                     "id": "v-1"})
    assert data.human_verdict == verdict.strip(" !.'\n").lower()
    assert data.output == "Yes, within 30 days."


@pytest.mark.parametrize("verdict", ["maybe", "passed", "", "p", "pass fail", 1, True, ["pass"]])
def test_a_human_verdict_that_is_neither_pass_nor_fail_is_refused(verdict):
    problems = refused({"id": "v-1", "input": "q", "answer": "a", "humanVerdict": verdict})
    [(field, message)] = problems
    assert field == "humanVerdict" and message.startswith("must be pass or fail (any case or punctuation), not ")
    assert human_verdict(verdict) is None


def test_a_human_verdict_needs_an_answer_to_judge():
    assert refused({"id": "v", "input": "q", "humanVerdict": "pass"}) == [
        ("humanVerdict", "judges the agent's answer, and this case has none (output)")
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"id": "a", "external_id": "b", "input": "q"}, "external_id is given twice, as 'id' and as 'external_id'"),
        ({"id": "a", "question": "q", "input": "r"}, "input is given twice, as 'question' and as 'input'"),
        ({"id": "a", "input": "q", "answer": "x", "output": "y"}, "output is given twice, as 'answer' and as 'output'"),
        ({"id": "a", "input": "q", "expectedBehaviour": "x", "expectedBehavior": "y"},
         "expected_behaviour is given twice, as 'expectedBehaviour' and as 'expectedBehavior'"),
        ({"id": "a", "input": "q", "humanVerdict": "pass", "human_verdict": "fail", "answer": "x"},
         "human_verdict is given twice, as 'humanVerdict' and as 'human_verdict'"),
        ({"id": "a", "input": "q", "answer": "x", "context": "c", "trace": {"context": "d"}},
         "context is given twice, as 'context' and as 'trace.context'"),
        ({"id": "a", "input": "q", "answer": "x", "toolCalls": [], "trace": ["not", "an", "object"]},
         "trace must be an object to hold toolCalls as well"),
    ],
)
def test_a_line_naming_one_field_both_ways_is_an_error_on_that_line(line, message):
    assert refused(line) == [(None, message)]
    with pytest.raises(ValueError, match="given twice|must be an object"):
        normalize_case_fields(line)
