"""judges.calibration.selectors: the run's frame from the database, its figures, stale reasons and promotion rules.

The pure figures have their own oracle tests (test_metrics.py); here the point is that the rows
reaching them are the right ones: human verdicts by adjudication and majority of counting labels,
the run's judgments only, the reviewers' agreement of the run's dataset.
"""

import json
from datetime import timedelta

import pandas as pd
import pytest
from django.utils import timezone
from statsmodels.stats.proportion import proportion_confint

from judges.calibration.metrics import CASE_COLUMNS, COLUMNS, FIRST_COLUMNS, case_counts
from judges.calibration.rules import Thresholds, promotable
from judges.calibration.selectors import (
    NOT_FINISHED,
    rubric_thresholds,
    run_figures,
    run_frames,
    run_rules,
    stale_reasons,
)
from judges.models import Judgment, Run
from labeling.models import Adjudication, Case
from tests.conftest import make_user
from tests.judges.report_factories import label, make_cases, make_config, make_run


@pytest.fixture
def world(dataset, other_dataset, rubric, reviewer, second_reviewer, lead):
    """Four cases with a human verdict, one without; the hand-computed figures are in the tests."""
    a1, a2, a3, a4, a5 = make_cases(dataset, [
        ("a1", "policy"), ("a2", "policy"), ("a3", "tools"), ("a4", "tools"), ("a5", "policy"),
    ])
    for case, first, second in ((a1, "pass", "pass"), (a2, "pass", "pass"), (a3, "fail", "pass")):
        label(case, rubric, reviewer, first)
        label(case, rubric, second_reviewer, second)
    Adjudication.objects.create(case=a3, rubric=rubric, verdict="fail", decided_by=lead)  # breaks the tie
    label(a4, rubric, reviewer, "fail")
    # Reviewers disagreeing on another dataset's case: not this run's reviewer agreement.
    (x1,) = make_cases(other_dataset, [("x1", "policy")])
    label(x1, rubric, reviewer, "pass")
    label(x1, rubric, second_reviewer, "fail")
    config = make_config(rubric, lead)
    run = make_run(config, dataset, lead, {
        a1: ["pass", "pass"],
        a2: ["pass", "fail"],  # a flip, and one false fail
        a3: ["pass", "pass"],  # two false passes
        a4: ["fail", "not_evaluated"],
        a5: ["fail", "fail"],  # no human verdict: counts nowhere
    }, cost_usd="0.012345", input_tokens=1200, output_tokens=80, cache_hits=3, provider_calls=7)
    return {"run": Run.objects.select_related("config__rubric").get(pk=run.pk), "cases": (a1, a2, a3, a4, a5),
            "config": config}


def test_it_counts_each_cases_judgments_beside_its_human_verdict(world):
    cases, _ = run_frames(run=world["run"])

    # repeat 1's verdict for the evidence's single-run counts, the kind for the promotion rules
    assert tuple(cases.columns) == (*CASE_COLUMNS, *FIRST_COLUMNS, "kind")
    by_id = cases.set_index("external_id")
    # a3's reviewers tie; the lead's adjudication decides. a5 has no label: no verdict.
    assert by_id["human"].to_dict() == {"a1": "pass", "a2": "pass", "a3": "fail", "a4": "fail", "a5": None}
    assert by_id.loc["a4", ["category", "judgments", "passes", "fails", "contested"]].tolist() == [
        "tools", 2, 0, 1, 0,
    ]
    assert by_id["judgments"].sum() == 10
    assert set(cases["split"]) <= {"dev", "holdout"}


def test_it_reads_the_not_evaluated_judgments_only(world):
    _, judgments = run_frames(run=world["run"])

    assert tuple(judgments.columns) == COLUMNS
    # Every figure is counted per case; only the not-evaluated judgments are listed one by one.
    assert judgments[["external_id", "repeat", "outcome", "error", "category", "human"]].values.tolist() == [
        ["a4", 2, "not_evaluated", "timeout", "tools", "fail"],
    ]


def test_the_databases_counts_are_the_metrics_own(world, lead, reviewer):
    """case_frame sums in SQL what metrics.case_counts sums in pandas, here from every judgment read
    one by one (a contested verdict and a contested not-evaluated judgment among them)."""
    run = world["run"]
    Judgment.objects.filter(run=run, case__external_id__in=["a2", "a4"], repeat=2).update(contested=True)
    cases, _ = run_frames(run=run)
    humans = cases.set_index("case_id")["human"].to_dict()
    every = pd.DataFrame([
        {"case_id": j.case_id, "external_id": j.case.external_id, "category": j.case.category,
         "split": j.case.split, "repeat": j.repeat, "outcome": j.outcome, "reason": j.reason, "error": j.error,
         "contested": j.contested, "human": humans[j.case_id]}
        for j in Judgment.objects.filter(run=run).select_related("case")
    ], columns=list(COLUMNS))

    expected = case_counts(every).sort_values("case_id").to_dict("records")
    assert cases[[*CASE_COLUMNS, *FIRST_COLUMNS]].sort_values("case_id").to_dict("records") == expected
    assert cases.set_index("external_id")["contested"].to_dict() == {"a1": 0, "a2": 1, "a3": 0, "a4": 0, "a5": 0}


def test_it_reads_the_frames_in_three_queries(world, django_assert_num_queries):
    # The judgments counted per case, the dataset's cases with their human verdicts, the not-evaluated ones.
    with django_assert_num_queries(3):
        run_frames(run=world["run"])


def test_it_ignores_labels_given_against_older_content(world, rubric):
    a1 = world["cases"][0]
    Case.objects.filter(pk=a1.pk).update(content_hash="0" * 64)  # re-imported: a1's labels stop counting
    cases, _ = run_frames(run=world["run"])
    assert cases.loc[cases["external_id"] == "a1", "human"].tolist() == [None]


def test_it_computes_the_figures_of_the_hand_worked_example(world):
    figures = run_figures(run=world["run"])

    # Cases with a human verdict: a1..a4. Evaluated judgments: 2 + 2 + 2 + 1 = 7, matching 2 + 1 + 0 + 1 = 4.
    assert figures["n"] == 4
    assert figures["judgments"] == 8
    assert figures["evaluated"] == 7
    assert figures["agreement"] == pytest.approx(4 / 7)
    # The interval counts cases: (matching, evaluated) a1 (2, 2), a2 (1, 2), a3 (0, 2), a4 (1, 1); with
    # M = 4, E = 7: Σ(7m − 4e)² = 36 + 1 + 64 + 9 = 110, n_eff = 4·3·49 / 110 = 5.35, capped at the 4 cases.
    low, high = proportion_confint(4 / 7 * 4, 4, alpha=0.05, method="wilson")
    assert figures["agreement_ci95"] == [pytest.approx(low), pytest.approx(high)]
    # Confusion: human pass & judge pass 3, human pass & judge fail 1, human fail & judge pass 2, both fail 1.
    # κ = (N·agree − Σrow·col) / (N² − Σrow·col) = (7·4 − (4·5 + 3·2)) / (49 − 26) = 2/23.
    assert figures["kappa"] == pytest.approx(2 / 23)
    assert figures["confusion"] == {
        "human_pass": {"judge_pass": 3, "judge_fail": 1}, "human_fail": {"judge_pass": 2, "judge_fail": 1},
    }
    assert (figures["false_pass"], figures["false_pass_rate"]) == (2, pytest.approx(2 / 3))
    assert (figures["false_fail"], figures["false_fail_rate"]) == (1, pytest.approx(1 / 4))
    assert figures["true_pass_rate"] == pytest.approx(3 / 4)
    assert figures["true_fail_rate"] == pytest.approx(1 / 3)
    # a1, a2, a3 have two evaluated repeats; only a2 flipped.
    assert (figures["flips"], figures["flip_rate"]) == (1, pytest.approx(1 / 3))
    assert figures["coverage"] == pytest.approx(7 / 8)
    assert figures["not_evaluated"] == [{"external_id": "a4", "repeat": 2, "reason": "timeout"}]
    assert figures["false_pass_cases"] == ["a3"]
    assert figures["false_fail_cases"] == ["a2"]
    assert figures["flipped_cases"] == ["a2"]
    assert figures["by_category"]["policy"]["n"] == 2
    assert figures["by_category"]["policy"]["agreement"] == pytest.approx(3 / 4)
    assert figures["by_category"]["tools"]["agreement"] == pytest.approx(1 / 3)
    assert sum(split["n"] for split in figures["by_split"].values()) == 4


def test_it_adds_the_run_keys_and_the_reviewers_agreement_of_the_runs_dataset(world):
    figures = run_figures(run=world["run"])

    assert figures["run"] == world["run"].pk
    assert figures["repeats"] == 2
    assert figures["config_version"] == world["config"].version
    assert figures["stale_reasons"] == []
    assert figures["cost_usd"] == pytest.approx(0.012345)
    assert figures["tokens"] == {"input": 1200, "output": 80}
    assert (figures["cache_hits"], figures["provider_calls"]) == (3, 7)
    # a1, a2 agree, a3 does not; x1 (the other dataset) is left out: 2 agreeing pairs of 3.
    assert figures["reviewer_agreement"]["percent"] == pytest.approx(2 / 3)
    assert figures["reviewer_agreement"]["pairs"] == 3


def test_it_is_json_serialisable_unchanged(world):
    figures = run_figures(run=world["run"])
    assert json.loads(json.dumps(figures, allow_nan=False)) == figures


@pytest.mark.parametrize("extra_cases", [0, 40])
def test_it_computes_the_figures_in_constant_queries(
    extra_cases, dataset, rubric, reviewer, lead, django_assert_num_queries
):
    cases = make_cases(dataset, [(f"c{i:03}", "policy") for i in range(2 + extra_cases)])
    for case in cases:
        label(case, rubric, reviewer, "pass")
    run = make_run(make_config(rubric, lead), dataset, lead, {case: ["pass", "fail"] for case in cases})
    run = Run.objects.select_related("config__rubric").get(pk=run.pk)
    # judgments counted per case, human verdicts, the not-evaluated judgments, reviewer labels, its bias
    # probes' judgments, changed cases (a newer config version is no staleness: not read here).
    with django_assert_num_queries(6):
        figures = run_figures(run=run)
    assert figures["n"] == len(cases)
    # With the figures in hand the rules cost one query: the rubric's newest config version.
    with django_assert_num_queries(1):
        run_rules(run=run, figures=figures)


def test_it_gives_empty_figures_for_a_run_without_judgments(dataset, rubric, lead):
    run = make_run(make_config(rubric, lead), dataset, lead, {})
    figures = run_figures(run=run)
    assert figures["n"] == 0
    assert figures["agreement"] is None
    assert figures["kappa"] is None and figures["kappa_note"]
    json.dumps(figures, allow_nan=False)


# ---- stale evidence -------------------------------------------------------------------------------


def test_it_is_not_stale_when_nothing_changed_and_only_labels_did(world, rubric, reviewer):
    run = world["run"]
    a4 = world["cases"][3]
    a4.labels.filter(reviewer=reviewer).update(verdict="pass", updated_at=timezone.now())
    assert stale_reasons(run=run) == []


def test_it_says_an_unfinished_run_has_not_finished(dataset, rubric, lead):
    for status in (Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.CANCELLED):
        run = make_run(make_config(rubric, lead), dataset, lead, {}, status=status)
        assert stale_reasons(run=run) == [NOT_FINISHED] == ["the run has not finished"]


def test_it_counts_cases_changed_after_the_run_finished(world):
    run = world["run"]
    later = run.finished_at + timedelta(seconds=1)
    a1, a2, a3 = world["cases"][:3]
    Case.objects.filter(pk=a1.pk).update(content_changed_at=later)
    assert stale_reasons(run=run) == ["1 case changed since this run finished"]
    Case.objects.filter(pk__in=[a2.pk, a3.pk]).update(content_changed_at=later)
    assert stale_reasons(run=run) == ["3 cases changed since this run finished"]


def test_it_does_not_count_cases_created_after_the_run(world, dataset):
    make_cases(dataset, [("new", "policy")])
    Case.objects.filter(external_id="new").update(created_at=timezone.now(), content_changed_at=timezone.now())
    assert stale_reasons(run=world["run"]) == []


def test_a_newer_config_version_is_a_candidate_never_a_stale_reason(world, rubric, lead):
    make_config(rubric, lead, external=True)  # v2, imported verdicts: never the newest
    make_config(rubric, lead, note="30 days")  # v3: a candidate
    assert stale_reasons(run=world["run"]) == []


def test_it_names_a_criteria_edit(world, rubric):
    rubric.criteria = "The answer also names the refund's deadline."
    rubric.save(update_fields=["criteria"])
    run = Run.objects.select_related("config__rubric").get(pk=world["run"].pk)
    assert stale_reasons(run=run) == ["the rubric's criteria were edited after this run's config was saved"]


# ---- promotion rules ------------------------------------------------------------------------------


def test_it_takes_the_thresholds_from_the_rubric(rubric):
    assert rubric_thresholds(rubric) == Thresholds()
    rubric.min_cases, rubric.agreement_floor, rubric.max_flip_rate = 3, 0.5, 0.4
    thresholds = rubric_thresholds(rubric)
    assert (thresholds.min_cases, thresholds.agreement_floor, thresholds.max_flip_rate) == (3, 0.5, 0.4)


def _by_key(results):
    return {result.key: result for result in results}


def test_it_reports_every_rule_with_the_runs_numbers(world):
    rules = _by_key(run_rules(run=world["run"]))

    assert list(rules) == [
        "newest_config", "not_stale", "min_cases", "min_repeats", "agreement_floor", "agreement_ceiling",
        "min_true_pass_rate", "min_true_fail_rate", "max_flip_rate", "min_coverage", "pinned_models",
        "judge_above_reviewers",
    ]
    assert rules["newest_config"].met and rules["not_stale"].met
    assert not rules["min_cases"].met and rules["min_cases"].value == 4
    assert rules["min_repeats"].met
    assert not rules["agreement_floor"].met and rules["agreement_floor"].value == pytest.approx(4 / 7)
    assert rules["agreement_ceiling"].met


def test_it_promotes_under_the_rubrics_own_thresholds(world, rubric):
    rubric.min_cases, rubric.agreement_floor, rubric.min_true_fail_rate = 4, 0.5, 0.3
    rubric.max_flip_rate, rubric.min_coverage = 0.5, 0.8
    rubric.save()
    run = Run.objects.select_related("config__rubric").get(pk=world["run"].pk)
    rules = run_rules(run=run)
    assert [r.key for r in rules if not r.met] == []
    assert promotable(rules)


def test_it_fails_the_newest_config_rule_but_not_staleness_after_a_new_version(world, rubric, lead):
    make_config(rubric, lead, note="30 days")
    rules = _by_key(run_rules(run=world["run"]))
    assert not rules["newest_config"].met and rules["newest_config"].value == 2  # the candidate
    assert rules["not_stale"].met


def test_it_never_promotes_an_external_config(dataset, rubric, lead):
    (case,) = make_cases(dataset, [("e1", "policy")])
    label(case, rubric, make_user("eve"), "pass")
    run = make_run(make_config(rubric, lead, external=True), dataset, lead, {case: ["pass", "pass"]})
    rules = _by_key(run_rules(run=run))
    assert not rules["newest_config"].met
    assert "external" in rules["newest_config"].threshold_text


def test_it_reuses_the_stale_reasons_of_the_figures(world):
    # The figures carry the stale reasons; run_rules must not contradict them.
    figures = run_figures(run=world["run"]) | {"stale_reasons": ["1 case changed since this run finished"]}
    rules = _by_key(run_rules(run=world["run"], figures=figures))
    assert rules["not_stale"].value == ["1 case changed since this run finished"]


def test_it_works_on_a_run_loaded_without_its_relations(world):
    run = Run.objects.get(pk=world["run"].pk)  # the command and the API load the rubric lazily
    assert run_figures(run=run) == run_figures(run=world["run"])
