"""A DeepEval-style test of an agent, judged by evalhub's calibrated judge inside pytest (docs/gate.md,
"The pytest plugin"):

    pytest examples/test_agent_with_evalhub.py --evalhub-gate-config gates.json

`gates.json` is the gate config (`manage.py export_gates --output gates.json`, or the URL of `/api/gates`
with a gates:read token in $EVALHUB_TOKEN); each rubric's judge reads its endpoint and key from the
variables the config names, as evalhub-gate does. The rubric's stage decides what a failure does: at
observe it is only recorded, at warn it is a pytest warning, at gate the test fails with the judge's reason.
"""

import pytest

from judges.gate.pytest_plugin import assert_judged


def support_agent(question: str) -> dict:
    """Stands for your agent. Here a fixed table, so the example runs as it is: one answer gets the return
    window wrong on purpose, to show what a failure looks like."""
    answers = {
        "Can I return shoes I bought last week?": "Yes, within 30 days of delivery, for a full refund.",
        "How long do I have to send a jacket back?": "Returns are accepted for 14 days.",
        "Can I return a gift?": "Yes, gifts can be returned within 30 days with the gift receipt.",
    }
    return {"answer": answers[question], "tool_calls": [{"name": "lookup_policy", "argument": {"topic": "returns"},
                                                         "result": "30-day returns"}]}


CASES = [
    ("shoes", "Can I return shoes I bought last week?"),
    ("jacket", "How long do I have to send a jacket back?"),
    ("gift", "Can I return a gift?"),
]


@pytest.mark.parametrize(("external_id", "question"), CASES)
def test_return_policy(evalhub_judge, external_id, question):
    reply = support_agent(question)
    result = evalhub_judge(
        {"external_id": external_id, "input": question, "output": reply["answer"],
         "trace": {"toolCalls": reply["tool_calls"]}, "category": "policy"},
        rubric="return-policy",
    )
    # result.verdict, result.reason and result.repeats (each repeat's verdict, layer, checks and reason)
    # are there to read; assert_judged applies the rubric's stage.
    assert_judged(result)
