"""Promotion rules: every rule alone failing, boundaries, undefined figures, and real figures."""

import dataclasses

import pandas as pd
import pytest

from judges.calibration.metrics import COLUMNS, calibration_figures
from judges.calibration.rules import (
    RuleResult,
    Thresholds,
    config_models,
    evaluate_rules,
    promotable,
    relaxed_thresholds,
)

RULE_KEYS = [
    "newest_config", "not_stale", "min_cases", "min_repeats", "agreement_floor", "agreement_ceiling",
    "min_true_pass_rate", "min_true_fail_rate", "max_flip_rate", "min_coverage", "pinned_models",
    "judge_above_reviewers",
]

# On 24 cases with two labels the judge agrees with each label a little more than the reviewers agree with
# each other, not by a margin the test tells from chance (metrics.judge_above_reviewers).
NOT_ABOVE = {"cases": 24, "judge": 0.85, "reviewers": 0.83, "difference": 0.02, "z": 0.5, "above": False,
             "note": None}
# Meets every default rule (the example figures of docs/gate.md).
GOOD = {"n": 60, "agreement": 0.87, "true_pass_rate": 0.95, "true_fail_rate": 0.86, "flip_rate": 0.03,
        "coverage": 1.0, "judge_above_reviewers": NOT_ABOVE}


def check(figures=None, *, repeats=3, thresholds=None, is_newest_config=True, stale_reasons=(),
          is_external=False, deterministic=False, models=()) -> dict[str, RuleResult]:
    results = evaluate_rules(
        figures=GOOD | (figures or {}), repeats=repeats, thresholds=thresholds or Thresholds(),
        is_newest_config=is_newest_config, stale_reasons=list(stale_reasons), is_external=is_external,
        deterministic=deterministic, models=models,
    )
    # every rule always reported, in the order of docs/promotion.md (the probe rule last, when it has a threshold)
    assert [r.key for r in results][: len(RULE_KEYS)] == RULE_KEYS
    return {r.key: r for r in results}


def failing(results: dict[str, RuleResult]) -> set[str]:
    return {key for key, result in results.items() if not result.met}


def test_it_has_designs_defaults():
    t = Thresholds()
    assert (t.min_cases, t.min_repeats) == (30, 2)
    assert (t.agreement_floor, t.agreement_ceiling) == (0.80, 1.00)
    assert (t.min_true_pass_rate, t.min_true_fail_rate) == (0.70, 0.70)
    assert (t.max_flip_rate, t.min_coverage, t.max_probe_moved) == (0.05, 0.95, None)
    assert t.refuse_judge_above_reviewers is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.min_cases = 10  # type: ignore[misc]


def test_it_promotes_when_every_rule_is_met():
    results = check()
    assert failing(results) == set()
    assert promotable(list(results.values()))
    assert results["agreement_floor"].value == 0.87
    assert results["min_cases"].value == 60
    assert results["min_repeats"].value == 3


@pytest.mark.parametrize("change,kwargs,key", [
    ({"n": 29}, {}, "min_cases"),
    ({}, {"repeats": 1}, "min_repeats"),
    ({"agreement": 0.79}, {}, "agreement_floor"),
    ({"agreement": 1.0}, {}, "agreement_ceiling"),
    ({"true_pass_rate": 0.69}, {}, "min_true_pass_rate"),
    ({"true_fail_rate": 0.69}, {}, "min_true_fail_rate"),
    ({"flip_rate": 0.06}, {}, "max_flip_rate"),
    ({"coverage": 0.94}, {}, "min_coverage"),
    ({}, {"is_newest_config": False}, "newest_config"),
    ({}, {"is_external": True}, "newest_config"),
    ({}, {"stale_reasons": ["case refund-7 changed after the run"]}, "not_stale"),
])
def test_it_refuses_on_each_rule_alone(change, kwargs, key):
    results = check(change, **kwargs)
    assert failing(results) == {key}
    assert not promotable(list(results.values()))


def test_it_reports_the_stale_reasons_as_the_value():
    reasons = ["case refund-7 changed after the run", "a newer config (v4) exists"]
    assert check(stale_reasons=reasons)["not_stale"].value == reasons
    assert check()["not_stale"].value == []


def test_it_never_promotes_an_external_config_and_says_so():
    result = check(is_external=True, is_newest_config=True)["newest_config"]
    assert not result.met
    assert "external" in result.threshold_text and "never" in result.threshold_text


@pytest.mark.parametrize("figure,keys", [
    ("n", {"min_cases"}),
    ("agreement", {"agreement_floor", "agreement_ceiling"}),
    ("true_pass_rate", {"min_true_pass_rate"}),
    ("true_fail_rate", {"min_true_fail_rate"}),
    ("flip_rate", {"max_flip_rate"}),
    ("coverage", {"min_coverage"}),
])
def test_it_fails_a_rule_whose_figure_is_undefined(figure, keys):
    assert failing(check({figure: None})) == keys
    missing = {k: v for k, v in GOOD.items() if k != figure}
    results = evaluate_rules(figures=missing, repeats=3, thresholds=Thresholds(), is_newest_config=True,
                             stale_reasons=[])
    assert {r.key for r in results if not r.met} == keys


@pytest.mark.parametrize("change,kwargs,key,met", [
    ({"agreement": 0.80}, {}, "agreement_floor", True),
    ({"agreement": 24 / 30}, {}, "agreement_floor", True),  # the same 0.80, computed
    ({"agreement": 0.7999}, {}, "agreement_floor", False),
    ({"agreement": 1.00}, {}, "agreement_ceiling", False),
    ({"agreement": 59 / 60}, {}, "agreement_ceiling", True),
    ({"flip_rate": 0.05}, {}, "max_flip_rate", True),
    ({"flip_rate": 1 / 20}, {}, "max_flip_rate", True),
    ({"flip_rate": 0.0501}, {}, "max_flip_rate", False),
    ({"coverage": 0.95}, {}, "min_coverage", True),
    ({"coverage": 19 / 20}, {}, "min_coverage", True),
    ({"true_pass_rate": 0.70}, {}, "min_true_pass_rate", True),
    ({"true_pass_rate": 1 - 0.3}, {}, "min_true_pass_rate", True),
    ({"true_fail_rate": 1 - 3 / 10}, {}, "min_true_fail_rate", True),
    ({"n": 30}, {}, "min_cases", True),
    ({}, {"repeats": 2}, "min_repeats", True),
])
def test_it_handles_the_boundaries(change, kwargs, key, met):
    assert check(change, **kwargs)[key].met is met


# Figures that miss a threshold by float noise only (the sums are not the exact doubles 0.8, 0.05, …):
# the rule treats them as on the threshold. A real difference of 1e-6 is never absorbed.
@pytest.mark.parametrize("change,key,met", [
    ({"agreement": 0.1 + 0.7}, "agreement_floor", True),  # 0.7999999999999999
    ({"agreement": 0.8 - 1e-6}, "agreement_floor", False),
    ({"agreement": 0.3 + 0.6 + 0.1}, "agreement_ceiling", False),  # 0.9999999999999999 is 100 %
    ({"agreement": 1 - 1e-6}, "agreement_ceiling", True),
    ({"true_pass_rate": 0.7 - 1e-12}, "min_true_pass_rate", True),
    ({"true_fail_rate": 0.7 - 1e-12}, "min_true_fail_rate", True),
    ({"true_fail_rate": 0.7 - 1e-6}, "min_true_fail_rate", False),
    ({"flip_rate": 1 - 0.95}, "max_flip_rate", True),  # 0.050000000000000044
    ({"flip_rate": 0.05 + 1e-6}, "max_flip_rate", False),
    ({"coverage": 0.95 - 1e-12}, "min_coverage", True),
    ({"coverage": 0.95 - 1e-6}, "min_coverage", False),
])
def test_float_noise_never_decides_a_rule(change, key, met):
    [value] = change.values()
    assert value not in (0.8, 1.0, 0.7, 0.05, 0.95)  # the tolerance is really exercised
    assert check(change)[key].met is met


def test_a_threshold_stored_with_float_noise_is_the_same_threshold():
    noisy = Thresholds(agreement_floor=0.1 + 0.7 + 1e-15, max_flip_rate=0.15 - 0.1 - 1e-15)
    results = check({"agreement": 0.8, "flip_rate": 0.05}, thresholds=noisy)
    assert results["agreement_floor"].met and results["max_flip_rate"].met


@pytest.mark.parametrize("moved,met", [(0.0, True), (1e-12, True), (0.01, False), (None, False)])
def test_a_probe_threshold_of_zero_still_applies(moved, met):
    results = check({"probe_moved": moved}, thresholds=Thresholds(max_probe_moved=0.0))
    assert results["max_probe_moved"].met is met
    assert results["max_probe_moved"].threshold_text == "≤ 0.00"


def test_a_kinds_threshold_of_zero_is_always_met():
    results = check(thresholds=Thresholds(min_cases_per_kind=0))
    assert results["min_cases_per_kind"].met


LABELS = ["newest config", "not stale", "cases with a human verdict", "repeats K", "agreement", "agreement",
          "true pass rate", "true fail rate", "flip rate", "coverage", "models pinned",
          "judge's agreement with each label"]


@pytest.mark.parametrize("kwargs", [{}, {"deterministic": True}, {"is_external": True},
                                    {"is_newest_config": False}])
def test_each_rule_is_shown_with_its_label_and_the_runs_figure(kwargs):
    results = check(**kwargs)
    assert [r.label for r in results.values()] == LABELS
    # A rule that does not apply still shows the run's figure beside its note.
    assert [r.value for r in results.values()][2:] == [60, 3, 0.87, 0.87, 0.95, 0.86, 0.03, 1.0, [], NOT_ABOVE]


def test_without_human_evidence_the_rules_say_so_and_keep_their_figures():
    results = check(thresholds=Thresholds(require_human_evidence=False), deterministic=True,
                    figures={"coverage_all": 0.99})
    assert results["min_cases"].value == 60 and not results["min_cases"].applies
    assert results["min_cases"].label == "cases with a human verdict"
    assert results["min_coverage"].label == "coverage (all judgments)"
    assert results["min_coverage"].value == 0.99


def test_an_external_config_says_why_it_is_never_promotable():
    result = check(is_external=True)["newest_config"]
    assert (result.met, result.threshold_text) == (False, "an external config (imported verdicts) is never promotable")
    assert check()["newest_config"].threshold_text == "the run's config is the rubric's newest kept version"


def test_it_shows_each_threshold_in_its_text():
    results = check()
    assert results["min_cases"].threshold_text == "≥ 30"
    assert results["min_repeats"].threshold_text == "≥ 2"
    assert results["agreement_floor"].threshold_text == "≥ 0.80"
    assert results["agreement_ceiling"].threshold_text.startswith("< 1.00 (ceiling: 100 % means overfit")
    assert results["min_true_pass_rate"].threshold_text == "≥ 0.70"
    assert results["max_flip_rate"].threshold_text == "≤ 0.05"
    assert results["min_coverage"].threshold_text == "≥ 0.95"


def test_it_uses_a_rubrics_own_thresholds():
    strict = Thresholds(min_cases=100, agreement_floor=0.875, max_flip_rate=0.0)
    results = check(thresholds=strict)
    assert failing(results) == {"min_cases", "agreement_floor", "max_flip_rate"}
    assert results["agreement_floor"].threshold_text == "≥ 0.875"
    assert results["min_cases"].threshold_text == "≥ 100"


def test_it_adds_the_probe_rule_only_when_it_has_a_threshold():
    assert "max_probe_moved" not in check()
    results = check(thresholds=Thresholds(max_probe_moved=0.1))
    assert failing(results) == {"max_probe_moved"}  # no probe figure yet: undefined fails
    assert check({"probe_moved": 0.1}, thresholds=Thresholds(max_probe_moved=0.1))["max_probe_moved"].met


def run_frame(spec) -> pd.DataFrame:
    """spec: (count, human, outcomes by repeat) → that many cases, one row per judgment."""
    rows, case_id = [], 0
    for count, human, outcomes in spec:
        for _ in range(count):
            case_id += 1
            for repeat, outcome in enumerate(outcomes, start=1):
                rows.append({"case_id": case_id, "external_id": f"c{case_id:03d}", "category": "policy",
                             "split": "dev", "repeat": repeat, "outcome": outcome, "reason": "",
                             "error": "", "human": human})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def test_it_refuses_a_judge_that_passes_everything():
    # 20 human pass + 10 human fail, the judge says pass twice on every case:
    # agreement 40/60 = 0.67, true fail rate 0/20 = 0
    figures = calibration_figures(run_frame([(20, "pass", ["pass", "pass"]), (10, "fail", ["pass", "pass"])]))
    results = check(figures, repeats=2)
    assert failing(results) == {"agreement_floor", "min_true_fail_rate"}
    assert results["min_true_fail_rate"].value == 0.0


def test_it_promotes_on_real_figures_that_hold():
    # 30 cases, K = 2: 18 pass/pass, 8 fail/fail, 2 pass cases judged fail twice, 2 fail cases flipped
    # agreement = (36 + 16 + 0 + 2) / 60 = 0.90; true pass 36/40 = 0.90; true fail 18/20 = 0.90;
    # flip rate = 2/30 = 0.067 > 0.05 → refused on flips alone
    spec = [(18, "pass", ["pass", "pass"]), (8, "fail", ["fail", "fail"]), (2, "pass", ["fail", "fail"]),
            (2, "fail", ["pass", "fail"])]
    figures = calibration_figures(run_frame(spec))
    assert figures["agreement"] == 0.9 and figures["flip_rate"] == 2 / 30
    assert failing(check(figures, repeats=2)) == {"max_flip_rate"}
    # one flipped case judged fail twice instead: flips 1/30 = 0.033 → every rule holds
    spec[-1] = (1, "fail", ["pass", "fail"])
    spec.append((1, "fail", ["fail", "fail"]))
    figures = calibration_figures(run_frame(spec))
    assert promotable(evaluate_rules(figures=figures, repeats=2, thresholds=Thresholds(),
                                     is_newest_config=True, stale_reasons=[]))


# ---- deterministic evidence (contract checks only) ------------------------------------------------------

# Which rules hold a judge to account, by its kind and whether human evidence is required (docs/promotion.md).
RULE_TABLE = {
    # rule:               (behavioral, deterministic, deterministic without human evidence)
    "newest_config":      (True, True, True),
    "not_stale":          (True, True, True),
    "min_cases":          (True, True, False),
    "min_repeats":        (True, False, False),
    "agreement_floor":    (True, True, False),
    "agreement_ceiling":  (True, False, False),
    "min_true_pass_rate": (True, True, False),
    "min_true_fail_rate": (True, True, False),
    "max_flip_rate":      (True, False, False),
    "min_coverage":       (True, True, True),
    "pinned_models":      (True, True, True),
    "judge_above_reviewers": (True, True, False),
}
COLUMN = {"behavioral": 0, "deterministic": 1, "deterministic without human evidence": 2}


@pytest.mark.parametrize("kind", list(COLUMN))
def test_the_rule_table_for_deterministic_and_behavioral_judges(kind):
    deterministic = kind != "behavioral"
    thresholds = Thresholds(require_human_evidence=kind != "deterministic without human evidence")
    results = evaluate_rules(figures=GOOD | {"coverage_all": 1.0}, repeats=3, thresholds=thresholds,
                             is_newest_config=True, stale_reasons=[], deterministic=deterministic)
    assert [r.key for r in results] == RULE_KEYS  # every rule still reported, in the same order
    assert {r.key: r.applies for r in results} == {key: row[COLUMN[kind]] for key, row in RULE_TABLE.items()}
    for result in results:
        if not result.applies:
            assert result.met and result.threshold_text.startswith("does not apply")


def test_a_judge_above_the_reviewers_is_refused_unless_a_lead_turned_the_rule_off():
    above = NOT_ABOVE | {"judge": 0.95, "difference": 0.12, "z": 2.1, "above": True}
    assert failing(check({"judge_above_reviewers": above})) == {"judge_above_reviewers"}
    off = check({"judge_above_reviewers": above}, thresholds=Thresholds(refuse_judge_above_reviewers=False))
    result = off["judge_above_reviewers"]
    assert result.met and not result.applies and result.value == above
    assert result.threshold_text == "does not apply: a lead turned this rule off for the rubric"
    assert relaxed_thresholds(Thresholds(refuse_judge_above_reviewers=False)) == [
        ("refuse_judge_above_reviewers", False, True)]


@pytest.mark.parametrize("test,why", [
    (NOT_ABOVE | {"cases": 12, "z": None, "note": "only 12 cases with two or more labels (the test needs 20)"},
     "does not apply: only 12 cases with two or more labels (the test needs 20)"),
    (None, "does not apply: no reviewers' labels were read"),
])
def test_the_reviewers_rule_does_not_apply_without_enough_cases(test, why):
    result = check({"judge_above_reviewers": test})["judge_above_reviewers"]
    assert (result.met, result.applies, result.threshold_text) == (True, False, why)


def test_a_deterministic_judge_agreeing_100_percent_on_one_run_is_promotable():
    figures = GOOD | {"agreement": 1.0, "true_pass_rate": 1.0, "true_fail_rate": 1.0, "flip_rate": None}
    deterministic = check(figures, repeats=1, deterministic=True)
    assert failing(deterministic) == set()
    assert failing(check(figures, repeats=1)) == {"min_repeats", "agreement_ceiling", "max_flip_rate"}


def test_a_deterministic_judge_is_still_held_to_the_human_rules_by_default():
    results = check({"n": 12, "agreement": 0.7, "true_fail_rate": 0.5}, repeats=1, deterministic=True)
    assert failing(results) == {"min_cases", "agreement_floor", "min_true_fail_rate"}


def test_without_human_evidence_coverage_counts_every_judgment():
    no_labels = {"n": 0, "agreement": None, "true_pass_rate": None, "true_fail_rate": None, "flip_rate": None,
                 "coverage": None}
    relaxed = Thresholds(require_human_evidence=False)
    results = check(no_labels | {"coverage_all": 0.98}, repeats=1, thresholds=relaxed, deterministic=True)
    assert failing(results) == set()
    assert results["min_coverage"].value == 0.98 and results["min_coverage"].label == "coverage (all judgments)"
    short = check(no_labels | {"coverage_all": 0.9}, repeats=1, thresholds=relaxed, deterministic=True)
    assert failing(short) == {"min_coverage"}


def test_a_judge_with_a_model_always_needs_human_evidence():
    no_labels = {"n": 0, "agreement": None, "true_pass_rate": None, "true_fail_rate": None, "coverage": None,
                 "coverage_all": 1.0}
    results = check(no_labels, thresholds=Thresholds(require_human_evidence=False))
    assert failing(results) == {"min_cases", "agreement_floor", "agreement_ceiling", "min_true_pass_rate",
                                "min_true_fail_rate", "min_coverage"}


def test_the_kinds_rule_needs_every_kind():
    assert "min_cases_per_kind" not in check()  # off by default
    every = {"good": 5, "bad": 6, "incomplete": 5, "injection": 9, "paraphrase": 5}
    per_kind = Thresholds(min_cases_per_kind=5)
    result = check({"cases_by_kind": every}, thresholds=per_kind)["min_cases_per_kind"]
    assert result.met and result.value == every
    short = check({"cases_by_kind": every | {"paraphrase": 4}}, thresholds=per_kind)
    assert failing(short) == {"min_cases_per_kind"}
    missing = check({"cases_by_kind": {"good": 50}}, thresholds=per_kind)["min_cases_per_kind"]
    assert not missing.met and missing.value["injection"] == 0
    # Without human evidence, the judged cases count (as coverage does).
    relaxed = Thresholds(min_cases_per_kind=5, require_human_evidence=False)
    assert check({"cases_by_kind": {}, "cases_by_kind_all": every, "coverage_all": 1.0}, thresholds=relaxed,
                 deterministic=True)["min_cases_per_kind"].met


def test_the_optional_rules_are_shown_with_their_labels_and_thresholds():
    results = check({"probe_moved": 0.02, "cases_by_kind": {"good": 3}},
                    thresholds=Thresholds(max_probe_moved=0.05, min_cases_per_kind=1))
    probe, kinds = results["max_probe_moved"], results["min_cases_per_kind"]
    assert (probe.label, probe.value, probe.threshold_text, probe.met) == ("probe verdicts moved", 0.02, "≤ 0.05", True)
    assert kinds.label == "cases of each calibration kind"
    assert kinds.threshold_text == "≥ 1 of each kind (good, bad, incomplete, injection, paraphrase)"
    # A kind with no case at all is short of even one.
    assert (kinds.met, kinds.value) == (False, {"good": 3, "bad": 0, "incomplete": 0, "injection": 0, "paraphrase": 0})
    relaxed = check({"cases_by_kind_all": {"good": 1}, "coverage_all": 1.0}, deterministic=True,
                    thresholds=Thresholds(min_cases_per_kind=1, require_human_evidence=False))["min_cases_per_kind"]
    assert relaxed.label == "cases of each calibration kind (all judged cases)"


def test_the_rules_say_what_each_threshold_means():
    results = check({"n": 12}, stale_reasons=["case c1 changed"])
    assert results["not_stale"].threshold_text == (
        "no case changed, the criteria unchanged and no newer policy version since the run finished"
    )
    assert results["not_stale"].value == ["case c1 changed"]
    assert results["min_cases"].value == 12
    assert results["min_true_fail_rate"].threshold_text == "≥ 0.70"
    assert results["min_true_pass_rate"].value == 0.95


def test_it_names_the_thresholds_looser_than_the_defaults():
    assert relaxed_thresholds(Thresholds()) == []
    stricter = Thresholds(min_cases=50, agreement_floor=0.9, max_flip_rate=0.01, min_cases_per_kind=5,
                          max_probe_moved=0.1)
    assert relaxed_thresholds(stricter) == []
    looser = Thresholds(min_cases=10, min_repeats=1, agreement_floor=0.7, max_flip_rate=0.1, min_coverage=0.9,
                        require_human_evidence=False)
    assert relaxed_thresholds(looser) == [
        ("min_cases", 10, 30), ("min_repeats", 1, 2), ("agreement_floor", 0.7, 0.8), ("max_flip_rate", 0.1, 0.05),
        ("min_coverage", 0.9, 0.95), ("require_human_evidence", False, True),
    ]


PINNED = ("gpt-4o-mini-2024-07-18", "claude-haiku-4-5-20251001")


@pytest.mark.parametrize(("alias", "role"), [
    ("gpt-4o-mini", "primary"), ("claude-haiku-4-5", "secondary"), ("text-embedding-3-small", "embeddings"),
    ("gpt-4o-latest", "primary"),
])
def test_every_model_of_the_evidence_config_must_be_a_pinned_snapshot(alias, role):
    assert failing(check(models=PINNED)) == set()
    models = {"primary": (alias, PINNED[1]), "secondary": (PINNED[0], alias), "embeddings": (*PINNED, alias)}[role]
    results = check(models=models)
    assert failing(results) == {"pinned_models"} and results["pinned_models"].value == [alias]
    assert results["pinned_models"].threshold_text == (
        "every model (primary, secondary, embeddings) is a dated snapshot, not an alias")


@pytest.mark.parametrize(("spec", "models"), [
    ({"model": "gpt-4o-mini-2024-07-18", "secondary": {"model": "claude-haiku-4-5-20251001"},
      "semantic": {"model": "text-embedding-3-small"}},
     ["gpt-4o-mini-2024-07-18", "claude-haiku-4-5-20251001", "text-embedding-3-small"]),
    ({"layers": ["semantic"], "model": None, "secondary": None, "semantic": {"model": "text-embedding-3-small"}},
     ["text-embedding-3-small"]),
    ({"layers": ["contract"]}, []),
])
def test_the_models_of_a_config_are_its_own_its_secondarys_and_its_embeddings(spec, models):
    assert config_models(spec) == models


def test_a_lead_may_turn_the_pinned_rule_off_and_it_shows_as_relaxed():
    off = Thresholds(require_pinned_models=False)
    results = evaluate_rules(figures=GOOD, repeats=3, thresholds=off, is_newest_config=True, stale_reasons=[],
                             models=["llama3:8b"])
    assert "pinned_models" not in {r.key for r in results} and all(r.met for r in results)
    assert ("require_pinned_models", False, True) in relaxed_thresholds(off)
