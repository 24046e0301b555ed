"""The CI command reads the seeds' files (a golden set as --cases, the agent's reply flat) and refuses a humanVerdict:
a pipeline never writes the verdicts calibration is measured against. The reader alone: no server."""

import json
from pathlib import Path

import pytest

from judges.gate.messages import ConfigError
from judges.gate.outputs import read_cases_and_outputs, read_outputs

GOLDEN = {"id": "gs-1", "question": "Can I return shoes?", "goldenAnswer": "Within 30 days.",
          "expectedBehaviour": "Cite the window.", "expectedTool": "lookup_order", "expectedToolArgument": {"order": 1},
          "expectedSource": "policy-returns"}
REPLY = {"id": "gs-1", "answer": "Yes, within 30 days.", "retrievedSources": ["policy-returns"],
         "toolCalls": [{"name": "lookup_order", "argument": {"order": 1}, "result": "ok"}], "context": "30 days."}


def write(path: Path, *lines: dict) -> str:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def test_a_golden_set_is_a_cases_file_and_a_flat_reply_is_an_outputs_line(tmp_path):
    [case] = read_cases_and_outputs(write(tmp_path / "cases.jsonl", GOLDEN | {"output": None}),
                                    write(tmp_path / "outputs.jsonl", REPLY))
    assert case["output"] == "Yes, within 30 days." and case["expected_source"] == "policy-returns"
    # The reply's context is the agent's: kept apart from the case's (none here), shown to the judge as the agent's.
    assert case["trace"] == {"retrievedSources": ["policy-returns"], "toolCalls": REPLY["toolCalls"],
                             "agentContext": "30 days."}


def test_a_whole_case_line_may_carry_the_reply_flat(tmp_path):
    [case] = read_outputs(write(tmp_path / "outputs.jsonl", GOLDEN | REPLY))
    assert case["output"] == REPLY["answer"] and case["trace"]["context"] == "30 days."


def refusal(tmp_path: Path, line: dict, *, with_cases: bool) -> list[str]:
    """The details of the config error reading `line` as an outputs line, with or without a cases file."""
    outputs = write(tmp_path / "outputs.jsonl", line)
    with pytest.raises(ConfigError) as caught:
        if with_cases:
            read_cases_and_outputs(write(tmp_path / "cases.jsonl", GOLDEN), outputs)
        else:
            read_outputs(outputs)
    return caught.value.details


@pytest.mark.parametrize("with_cases", [True, False])
def test_a_human_verdict_is_refused(tmp_path, with_cases):
    line = (REPLY if with_cases else GOLDEN | REPLY) | {"humanVerdict": "pass"}
    [detail] = refusal(tmp_path, line, with_cases=with_cases)
    assert detail.startswith("line 1: humanVerdict: refused: a human verdict is imported only by a signed-in person")


@pytest.mark.parametrize("with_cases", [True, False])
def test_a_judged_line_needs_its_answer(tmp_path, with_cases):
    line = {"id": "gs-1", "answer": None} if with_cases else GOLDEN
    assert refusal(tmp_path, line, with_cases=with_cases) == [
        "line 1: output: is required: the agent's answer to judge (null means no answer yet)"
    ]


def test_a_cases_line_still_carries_no_answer(tmp_path):
    with pytest.raises(ConfigError) as caught:
        read_cases_and_outputs(write(tmp_path / "cases.jsonl", GOLDEN | {"answer": "x"}),
                               write(tmp_path / "outputs.jsonl", REPLY))
    assert "output: a cases line carries no output" in caught.value.details[0]
