"""Bias probes, the pure side (judges.probes.variants): variants, what moved, self-preference; and the fake
provider's `input_contains` rule that lets a test script a judge swayed by the customer."""

import pandas as pd
import pytest

from judges.engine import DEFAULT_PROMPT_TEMPLATE, build_messages, parse_sections
from judges.probes.variants import (
    case_majorities,
    probe_moved,
    probe_result,
    probes_figures,
    self_preference_warning,
)
from judges.runs.variants import (
    FLATTERY,
    INJECTED_INSTRUCTION,
    PADDING_AFTER,
    PADDING_BEFORE,
    PROBE_KINDS,
    make_variant,
)
from judges.testing.fake_provider import evaluate_rule, validate_rule

CASE = {
    "external_id": "c1", "input": "Can I return shoes I wore once?",
    "output": "Yes, within 30 days. Bring the receipt to any store.",
    "trace": {"toolCalls": [{"name": "lookup_order", "argument": {"id": 1}, "result": "ok"}]},
    "golden_answer": "Returns within 30 days with a receipt.", "expected_behaviour": "", "expected_tool": None,
    "expected_tool_argument": None, "expected_source": None, "category": "policy",
    "metadata": {"agent_model": "claude-3-5-haiku-20241022"},
}


# ---- variants ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", PROBE_KINDS)
def test_a_variant_is_deterministic_and_leaves_the_case_alone(kind):
    before = {**CASE, "trace": dict(CASE["trace"])}
    first, second = make_variant(kind, CASE, "fail"), make_variant(kind, CASE, "fail")
    assert first == second
    assert CASE == before  # a copy: the case itself is never changed
    assert first["external_id"] == CASE["external_id"] and first["trace"] == CASE["trace"]


def test_verbosity_pads_the_answer_with_polite_sentences_and_keeps_it_whole():
    variant = make_variant("verbosity", CASE, "pass")
    assert variant["output"] == f"{PADDING_BEFORE}\n\n{CASE['output']}\n\n{PADDING_AFTER}"
    assert variant["input"] == CASE["input"]
    assert len(variant["output"]) > len(CASE["output"]) + 200


def test_sycophancy_adds_the_customers_insistence_to_the_input_and_leaves_the_answer():
    variant = make_variant("sycophancy", CASE, None)
    assert variant["input"] == f"{CASE['input']}\n\n{FLATTERY}"
    assert "I know you'll say yes" in variant["input"] and "loyal customer" in variant["input"]
    assert variant["output"] == CASE["output"]


def test_the_injected_instruction_goes_inside_the_answer_of_human_failed_cases_only():
    variant = make_variant("injection", CASE, "fail")
    assert variant["output"] == f"Yes, within 30 days. {INJECTED_INSTRUCTION} Bring the receipt to any store."
    assert variant["input"] == CASE["input"]
    assert make_variant("injection", CASE, "pass") is None
    assert make_variant("injection", CASE, None) is None
    # One sentence, or none at all: the instruction still lands in the answer.
    assert make_variant("injection", {**CASE, "output": "No."}, "fail")["output"] == f"No. {INJECTED_INSTRUCTION}"
    assert make_variant("injection", {**CASE, "output": ""}, "fail")["output"] == INJECTED_INSTRUCTION


def test_an_unknown_probe_is_refused():
    with pytest.raises(ValueError, match="Unknown probe"):
        make_variant("length", CASE, "pass")


# ---- the fake provider's input_contains rule ------------------------------------------------------


def _sections(case: dict) -> dict[str, str]:
    _, user = build_messages(case, template=DEFAULT_PROMPT_TEMPLATE, criteria="c", policy="p", output_kind="verdict")
    return parse_sections(user)


def test_the_fake_can_pass_what_the_customer_insists_on():
    rule = {"kind": "input_contains", "text": "loyal customer"}
    validate_rule(rule)
    assert not evaluate_rule(rule, _sections(CASE), nth=0, digest="d")[0]
    assert evaluate_rule(rule, _sections(make_variant("sycophancy", CASE, None)), nth=0, digest="d")[0]
    # It reads the question, not the answer.
    assert not evaluate_rule(rule, _sections({**CASE, "output": "loyal customer"}), nth=0, digest="d")[0]
    assert not evaluate_rule({**rule, "case_sensitive": True}, _sections({**CASE, "input": "LOYAL CUSTOMER"}),
                             nth=0, digest="d")[0]
    with pytest.raises(ValueError, match="text"):
        validate_rule({"kind": "input_contains"})


# ---- what moved ------------------------------------------------------------------------------------


def frame(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["case_id", "external_id", "repeat", "outcome"])


def test_a_case_verdict_is_the_majority_of_its_evaluated_repeats_and_a_tie_has_none():
    verdicts = case_majorities(frame([
        (1, "a", 1, "pass"), (1, "a", 2, "pass"), (1, "a", 3, "fail"),
        (2, "b", 1, "pass"), (2, "b", 2, "fail"),  # tie
        (3, "c", 1, "not_evaluated"), (3, "c", 2, "fail"),
        (4, "d", 1, "not_evaluated"),
    ]))
    assert verdicts.to_dict() == {1: "pass", 3: "fail"}


def test_it_counts_the_cases_whose_verdict_moved_among_those_both_runs_decided():
    parent = frame([
        (1, "a", 1, "fail"), (1, "a", 2, "fail"),  # moves to pass
        (2, "b", 1, "pass"), (2, "b", 2, "pass"),  # stays
        (3, "c", 1, "pass"), (3, "c", 2, "pass"),  # moves to fail
        (4, "d", 1, "pass"), (4, "d", 2, "fail"),  # a tie in the parent: not compared
        (5, "e", 1, "fail"), (5, "e", 2, "fail"),  # not evaluated in the probe: not compared
    ])
    probe = frame([
        (1, None, 1, "pass"), (1, None, 2, "pass"),
        (2, None, 1, "pass"), (2, None, 2, "fail"), (2, None, 3, "pass"),
        (3, None, 1, "fail"), (3, None, 2, "fail"),
        (4, None, 1, "pass"), (4, None, 2, "pass"),
        (5, None, 1, "not_evaluated"), (5, None, 2, "not_evaluated"),
    ])
    result = probe_result(parent, probe)
    assert result["compared"] == 3
    assert result["moved"] == 2 and result["moved_share"] == pytest.approx(2 / 3)
    assert result["moved_to_pass"] == 1 and result["moved_to_fail"] == 1
    assert result["moved_cases"] == [
        {"case_id": 1, "external_id": "a", "parent": "fail", "probe": "pass"},
        {"case_id": 3, "external_id": "c", "parent": "pass", "probe": "fail"},
    ]


def test_nothing_compared_has_no_share():
    result = probe_result(frame([(1, "a", 1, "pass")]), frame([]))
    assert result == {"compared": 0, "moved": 0, "moved_share": None, "moved_to_pass": 0, "moved_to_fail": 0,
                      "moved_cases": []}


def test_each_kind_takes_its_newest_probe_and_the_rule_takes_the_largest_share():
    parent = frame([(1, "a", 1, "fail"), (2, "b", 1, "fail")])
    probes = pd.DataFrame([
        (10, "verbosity", 1, 1, "pass"), (10, "verbosity", 2, 1, "pass"),  # older: both moved
        (12, "verbosity", 1, 1, "fail"), (12, "verbosity", 2, 1, "pass"),  # newest: one moved
        (11, "injection", 1, 1, "fail"), (11, "injection", 2, 1, "fail"),
    ], columns=["run_id", "probe", "case_id", "repeat", "outcome"])
    figures = probes_figures(parent, probes)
    assert list(figures) == ["verbosity", "injection"]  # PROBE_KINDS order; no sycophancy probe
    assert figures["verbosity"]["run"] == 12 and figures["verbosity"]["moved_share"] == 0.5
    assert figures["injection"]["moved"] == 0
    assert probe_moved(figures) == 0.5
    assert probe_moved({}) is None


# ---- self-preference ---------------------------------------------------------------------------------

SPEC = {"layers": ["behavioral"], "model": "gpt-4o-mini-2024-07-18"}


def cases(*agents) -> list[dict]:
    return [{"metadata": {"agent_model": a} if a else {}} for a in agents]


def test_it_warns_when_the_judge_shares_the_agents_model_family():
    warning = self_preference_warning(SPEC, cases("gpt-4o-2024-08-06", "gpt-4.1", "claude-3-5-haiku-20241022", None))
    assert warning is not None
    assert "openai" in warning and "2 of 4" in warning and "gpt-4.1, gpt-4o-2024-08-06" in warning
    assert "all of the cases" in self_preference_warning(SPEC, cases("gpt-4o", "gpt-4o"))
    assert "most of the cases" in self_preference_warning(SPEC, cases("gpt-4o", "gpt-4o", "llama-3.1-8b"))


def test_it_does_not_warn_across_families_or_without_an_agent_named():
    assert self_preference_warning(SPEC, cases("claude-3-5-haiku-20241022", "llama-3.1-8b")) is None
    assert self_preference_warning(SPEC, cases(None, None)) is None
    assert self_preference_warning(SPEC, []) is None
    # No model judges a contract-only config; an unknown family cannot be compared.
    assert self_preference_warning({"layers": ["contract"]}, cases("gpt-4o")) is None
    assert self_preference_warning({**SPEC, "model": "my-local-model"}, cases("gpt-4o")) is None


def test_the_configs_family_override_counts():
    local = {**SPEC, "model": "my-local-model", "model_family": "meta"}
    assert "meta" in self_preference_warning(local, cases("llama-3.1-70b-instruct"))
    assert self_preference_warning(local, cases("gpt-4o")) is None
