"""The CI command's stage rules and budget on hand-made judgments: no provider, no files, no database."""

import pytest

from judges.engine import KEY_REFUSED, JudgeConfig, Judgment
from judges.gate.config import GateRubric
from judges.gate.judging import CaseResult, RubricResult, budget, case_verdict, exit_code, refused_keys

JUDGE = JudgeConfig.from_dict({"rubric": "returns", "criteria": "30 days.", "layers": ["contract"],
                               "contract_checks": ["must_match"], "must_match": ["30 days"]})


def rubric_result(stage: str, verdicts: list[str], *, fail_closed: bool = False) -> RubricResult:
    rubric = GateRubric("returns", stage, fail_closed, JUDGE, {}, None)
    return RubricResult(rubric, [CaseResult(f"c{i}", v, "", []) for i, v in enumerate(verdicts)])


@pytest.mark.parametrize(("stage", "fail_closed", "verdicts", "outcome"), [
    ("observe", False, ["fail", "not_evaluated"], "recorded"),
    ("warn", False, ["pass", "fail", "not_evaluated"], "warning"),
    ("warn", True, ["pass", "not_evaluated"], "not_evaluated"),  # fail_closed counts only at gate
    ("warn", False, ["pass", "pass"], "pass"),
    ("gate", False, ["pass", "fail", "not_evaluated"], "fail"),
    ("gate", False, ["pass", "not_evaluated"], "not_evaluated"),
    ("gate", True, ["pass", "not_evaluated"], "fail"),
    ("gate", True, ["pass", "pass"], "pass"),
    ("gate", False, [], "pass"),
])
def test_a_rubrics_outcome_by_stage(stage, fail_closed, verdicts, outcome):
    result = rubric_result(stage, verdicts, fail_closed=fail_closed)
    assert result.outcome == outcome
    assert (result.passed, result.failed, result.not_evaluated) == tuple(verdicts.count(v) for v in
                                                                         ("pass", "fail", "not_evaluated"))


@pytest.mark.parametrize(("stage", "fail_closed", "verdict", "counted"), [
    ("observe", True, "fail", False),
    ("warn", False, "fail", True),
    ("warn", True, "not_evaluated", False),
    ("gate", False, "not_evaluated", False),
    ("gate", True, "not_evaluated", True),
    ("gate", True, "pass", False),
])
def test_which_cases_are_reported_as_failures(stage, fail_closed, verdict, counted):
    result = rubric_result(stage, [verdict], fail_closed=fail_closed)
    assert result.counts_as_failure(result.cases[0]) is counted


def test_the_exit_code_reads_gate_rubrics_only_and_prefers_a_failure():
    assert exit_code([rubric_result("warn", ["fail"]), rubric_result("observe", ["not_evaluated"])]) == 0
    assert exit_code([rubric_result("gate", ["not_evaluated"]), rubric_result("gate", ["fail"])]) == 1
    assert exit_code([rubric_result("gate", ["pass", "not_evaluated"])]) == 3
    assert exit_code([]) == 0


def j(outcome: str, **fields) -> Judgment:
    return Judgment("c1", 1, outcome, **fields)


def test_a_single_judgments_reason_is_its_own_and_repeats_say_their_count():
    assert case_verdict([j("fail", reason="too vague")], gate=True) == ("fail", "too vague")
    assert case_verdict([j("pass", reason="a"), j("pass", reason="b"), j("fail", reason="c")], gate=True) == (
        "pass", "2 of 3 repeats: a")
    assert case_verdict([j("not_evaluated", reason="", error="timeout")], gate=True) == ("not_evaluated", "timeout")
    assert case_verdict([j("pass", reason="a"), j("fail", reason="b")], gate=True) == (
        "not_evaluated", "a tie: 1 pass and 1 fail over the repeats")


def test_a_contested_judgment_is_not_evaluated_at_gate_only():
    contested = j("pass", reason="ok", contested=True, secondary_outcome="fail")
    verdict, reason = case_verdict([contested], gate=True)
    assert verdict == "not_evaluated"
    assert reason == "contested: the second opinion said fail (a human must look)"
    assert case_verdict([contested], gate=False) == ("pass", "ok")


def test_the_budget_adds_up_calls_tokens_cost_and_latency():
    judgments = [
        j("pass", provider_calls=2, input_tokens=100, output_tokens=10, cost_usd=0.25, latency_ms=300,
          calls_by_judge={"primary": 1, "second_opinion": 1}, cost_by_judge={"primary": 0.05, "second_opinion": 0.2}),
        j("pass", provider_calls=1, input_tokens=50, output_tokens=5, cost_usd=0.125, latency_ms=100,
          contested=True, judge="adjudicator", calls_by_judge={"adjudicator": 1}, cost_by_judge={"adjudicator": None}),
        j("pass", cached=True, latency_ms=1),  # a cache hit: no call, left out of the latency
        j("fail", provider_calls=1, latency_ms=200),
    ]
    assert budget(judgments) == {
        "calls": 4, "cache_hits": 1, "input_tokens": 150, "output_tokens": 15, "cost_usd": 0.375,
        "contested": 1, "adjudicated": 1, "latency_ms_p50": 200, "latency_ms_p95": 300,
        "calls_by_judge": {"primary": 1, "second_opinion": 1, "adjudicator": 1},
        "cost_by_judge": {"primary": 0.05, "second_opinion": 0.2, "adjudicator": None},  # None: unpriced
    }
    unpriced = budget([j("pass", provider_calls=1, cost_usd=None), j("pass", cost_usd=0.5)])
    assert unpriced["cost_usd"] is None
    assert budget([])["latency_ms_p50"] is None


@pytest.mark.parametrize(("latencies", "p50", "p95"), [
    ([7], 7, 7),
    ([1, 2], 1, 2),
    (list(range(1, 101)), 50, 95),  # nearest rank: the 50th and the 95th of 100
    (list(range(1, 21)), 10, 19),
])
def test_the_latency_percentiles_are_nearest_rank(latencies, p50, p95):
    result = budget([j("pass", provider_calls=1, latency_ms=ms) for ms in reversed(latencies)])
    assert (result["latency_ms_p50"], result["latency_ms_p95"]) == (p50, p95)


def test_the_majority_of_the_evaluated_repeats_decides_either_way():
    assert case_verdict([j("fail", reason="a"), j("pass", reason="b"), j("fail", reason="c")], gate=True) == (
        "fail", "2 of 3 repeats: a")
    # Nothing evaluated and nothing said: still a reason a person can read.
    assert case_verdict([j("not_evaluated")], gate=True) == ("not_evaluated", "not evaluated")
    assert case_verdict([], gate=True) == ("not_evaluated", "not evaluated")
    assert case_verdict([j("pass", reason="a"), j("pass", reason="b")], gate=True) == ("pass", "2 of 2 repeats: a")


def test_the_cost_is_rounded_to_a_millionth_of_a_dollar():
    assert budget([j("pass", cost_usd=0.12345678)])["cost_usd"] == 0.123457


def test_a_refused_key_is_named_per_rubric_with_its_first_reason():
    refused = rubric_result("gate", ["not_evaluated", "not_evaluated"])
    refused.cases[0].judgments = [j("pass")]
    refused.cases[1].judgments = [j("not_evaluated", error=KEY_REFUSED, reason="HTTP 401 for $KEY"),
                                  j("not_evaluated", error=KEY_REFUSED, reason="again")]
    fine = rubric_result("warn", ["not_evaluated"])
    fine.cases[0].judgments = [j("not_evaluated", error="timeout", reason="slow")]
    assert refused_keys([fine, refused]) == [("returns", "HTTP 401 for $KEY")]
    assert refused_keys([fine]) == []
