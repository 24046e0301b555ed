"""Promotion services: each rule alone refusing, one stage at a time, demotion, thresholds, the audit trail."""

from datetime import timedelta

import pytest
from django.utils import timezone

from judges.calibration.selectors import run_rules
from judges.models import RubricEvent, Run
from judges.promotion.selectors import evidence_for, evidence_rules, promotion_rows
from judges.promotion.services import (
    PromotionError,
    PromotionRefused,
    rubric_demote,
    rubric_promote,
    rubric_thresholds_change,
)
from labeling.models import Rubric
from tests.conftest import make_user, store_project
from tests.judges.promotion_factories import REASON, evidence_run
from tests.judges.report_factories import make_config

pytestmark = pytest.mark.django_db


def promote(rubric, run, lead, to_stage="observe"):
    return rubric_promote(rubric=rubric, to_stage=to_stage, run=run, reason=REASON, by=lead)


def test_it_promotes_one_stage_on_good_evidence_and_keeps_the_granted_figures(rubric, dataset, lead, reviewer):
    run = evidence_run(rubric, dataset, lead, reviewer)
    event = promote(rubric, run, lead)
    rubric.refresh_from_db()
    assert rubric.stage == "observe"
    assert (event.kind, event.from_stage, event.to_stage, event.run, event.by) == ("promote", "draft", "observe", run,
                                                                                    lead)
    assert event.reason == REASON
    assert event.figures["n"] == 40 and event.figures["repeats"] == 2 and event.figures["run"] == run.pk
    assert event.figures["agreement"] == pytest.approx(0.95)
    assert event.figures["true_pass_rate"] == pytest.approx(0.95)
    assert all(rule["met"] for rule in event.rules) and len(event.rules) == 12
    assert evidence_for(rubric=rubric) == event


# Each case breaks exactly one rule: (factory arguments, the one failing rule).
ONE_RULE_BROKEN = [
    ({"n": 20, "wrong": 1}, "min_cases"),
    ({"repeats": 1}, "min_repeats"),
    ({"wrong": 10}, "agreement_floor"),
    ({"wrong": 0}, "agreement_ceiling"),
    ({"wrong": 7, "wrong_on": "pass"}, "min_true_pass_rate"),
    ({"wrong": 7, "wrong_on": "fail"}, "min_true_fail_rate"),
    ({"flips": 3}, "max_flip_rate"),
    ({"not_evaluated": 5}, "min_coverage"),
    ({"status": Run.Status.RUNNING}, "not_stale"),
]


@pytest.mark.parametrize(("kwargs", "rule"), ONE_RULE_BROKEN, ids=[r for _, r in ONE_RULE_BROKEN])
def test_it_refuses_when_one_rule_alone_is_broken(rubric, dataset, lead, reviewer, kwargs, rule):
    run = evidence_run(rubric, dataset, lead, reviewer, **kwargs)
    with pytest.raises(PromotionRefused) as refused:
        promote(rubric, run, lead)
    assert [r.key for r in refused.value.failing] == [rule]
    assert len(refused.value.results) == 12  # every rule is reported, met or not
    rubric.refresh_from_db()
    assert rubric.stage == "draft"
    assert not RubricEvent.objects.exists()  # a refusal writes nothing


def test_it_refuses_a_run_whose_cases_changed_since(rubric, dataset, lead, reviewer):
    run = evidence_run(rubric, dataset, lead, reviewer)
    case = dataset.cases.first()
    case.content_changed_at = timezone.now() + timedelta(seconds=1)
    case.save(update_fields=["content_changed_at"])
    with pytest.raises(PromotionRefused) as refused:
        promote(rubric, run, lead)
    [failing] = refused.value.failing
    assert failing.key == "not_stale" and failing.value == ["1 case changed since this run finished"]


def test_it_refuses_a_run_of_an_older_config(rubric, dataset, lead, reviewer):
    run = evidence_run(rubric, dataset, lead, reviewer)
    make_config(rubric, lead, note="v2")
    with pytest.raises(PromotionRefused) as refused:
        promote(rubric, run, lead)
    # v2 is a candidate: the older run is not stale, but no longer the config a promotion may use.
    assert [(r.key, r.value) for r in refused.value.failing] == [("newest_config", 2)]


def test_it_never_takes_an_external_config_run_as_evidence(rubric, dataset, lead, reviewer):
    make_config(rubric, lead)
    external = make_config(rubric, lead, external=True)
    run = evidence_run(rubric, dataset, lead, reviewer, config=external)
    with pytest.raises(PromotionRefused) as refused:
        promote(rubric, run, lead)
    assert [r.key for r in refused.value.failing] == ["newest_config"]
    assert "never promotable" in refused.value.failing[0].threshold_text


def test_it_goes_one_stage_at_a_time(rubric, dataset, lead, reviewer):
    run = evidence_run(rubric, dataset, lead, reviewer)
    with pytest.raises(PromotionError, match="one stage at a time"):
        promote(rubric, run, lead, to_stage="warn")
    promote(rubric, run, lead, "observe")
    promote(rubric, run, lead, "warn")
    promote(rubric, run, lead, "gate")
    with pytest.raises(PromotionError, match="at gate already"):
        promote(rubric, run, lead, "gate")
    assert list(RubricEvent.objects.order_by("id").values_list("from_stage", "to_stage")) == [
        ("draft", "observe"), ("observe", "warn"), ("warn", "gate"),
    ]


def test_it_refuses_a_run_of_another_rubric(rubric, dataset, lead, reviewer):
    other = Rubric.objects.create(project=store_project(), slug="tone", name="Is the tone right?", criteria="Polite.")
    run = evidence_run(other, dataset, lead, reviewer)
    with pytest.raises(PromotionError, match="judged the rubric tone"):
        promote(rubric, run, lead)


def test_it_needs_a_reason(rubric, dataset, lead, reviewer):
    run = evidence_run(rubric, dataset, lead, reviewer)
    with pytest.raises(PromotionError, match="reason"):
        rubric_promote(rubric=rubric, to_stage="observe", run=run, reason="   ", by=lead)


def test_it_demotes_to_any_earlier_stage_and_draft_clears_the_evidence(rubric, dataset, lead, reviewer):
    run = evidence_run(rubric, dataset, lead, reviewer)
    for stage in ("observe", "warn", "gate"):
        granted = promote(rubric, run, lead, stage)
    event = rubric_demote(rubric=rubric, to_stage="observe", reason="Too many false fails in CI.", by=lead)
    assert (event.kind, event.from_stage, event.to_stage, event.run) == ("demote", "gate", "observe", None)
    assert evidence_for(rubric=rubric) == granted  # observe still runs the calibrated judge
    rubric_demote(rubric=rubric, to_stage="draft", reason="Rewriting the criteria.", by=lead)
    rubric.refresh_from_db()
    assert rubric.stage == "draft"
    assert evidence_for(rubric=rubric) is None


@pytest.mark.parametrize("to_stage", ["observe", "gate", "draft"])
def test_it_refuses_a_demotion_that_is_not_downwards(rubric, dataset, lead, reviewer, to_stage):
    promote(rubric, evidence_run(rubric, dataset, lead, reviewer), lead)
    if to_stage == "draft":
        rubric_demote(rubric=rubric, to_stage="draft", reason="Back to the drawing board.", by=lead)
    with pytest.raises(PromotionError, match="earlier stage"):
        rubric_demote(rubric=rubric, to_stage=to_stage, reason="x", by=lead)


def test_it_records_threshold_and_fail_closed_changes_with_old_and_new(rubric, lead):
    events = rubric_thresholds_change(
        rubric=rubric, reason="Stricter for the checkout flow.", by=lead, fail_closed=True, min_cases=50,
        agreement_floor=0.85, max_flip_rate=0.05,  # unchanged: not recorded
    )
    assert [e.kind for e in events] == ["thresholds", "fail_closed"]
    assert events[0].changes == {"min_cases": [30, 50], "agreement_floor": [0.8, 0.85]}
    assert events[1].changes == {"fail_closed": [False, True]}
    rubric.refresh_from_db()
    assert (rubric.min_cases, rubric.agreement_floor, rubric.fail_closed) == (50, 0.85, True)
    assert RubricEvent.objects.count() == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_cases": 30}, "Nothing changed"),
        ({"agreement_floor": 0.9, "agreement_ceiling": 0.9}, "ceiling must be above the floor"),
        ({"agreement_floor": 1.5}, "from 0 to 1"),
        ({"min_repeats": 0}, "at least 1"),
        ({"min_repeats": 21}, "at most 20"),
        ({"surprise": 1}, "Unknown threshold"),
    ],
)
def test_it_refuses_a_change_that_makes_no_sense(rubric, lead, kwargs, message):
    with pytest.raises(PromotionError, match=message):
        rubric_thresholds_change(rubric=rubric, reason="x", by=lead, **kwargs)
    assert not RubricEvent.objects.exists()


def test_it_checks_against_the_rubrics_own_thresholds(rubric, dataset, lead, reviewer):
    run = evidence_run(rubric, dataset, lead, reviewer)
    rubric_thresholds_change(rubric=rubric, reason="Need more cases.", by=lead, min_cases=41)
    with pytest.raises(PromotionRefused) as refused:
        promote(rubric, run, lead)
    assert [r.key for r in refused.value.failing] == ["min_cases"]


def test_the_audit_log_cannot_be_changed_or_deleted(rubric, dataset, lead, reviewer):
    event = promote(rubric, evidence_run(rubric, dataset, lead, reviewer), lead)
    event.reason = "rewritten history"
    with pytest.raises(PermissionError):
        event.save()
    with pytest.raises(PermissionError):
        event.delete()
    with pytest.raises(PermissionError):
        RubricEvent.objects.filter(pk=event.pk).update(reason="rewritten")
    with pytest.raises(PermissionError):
        RubricEvent.objects.all().delete()
    assert RubricEvent.objects.get().reason == REASON


# ---- recalibration needed ------------------------------------------------------------------------------


def test_it_marks_recalibration_needed_when_the_evidence_goes_stale(rubric, dataset, lead, reviewer):
    promote(rubric, evidence_run(rubric, dataset, lead, reviewer), lead)
    [row] = promotion_rows(rubrics=[rubric])
    assert row.recalibration == []
    make_config(rubric, lead, note="a candidate")
    [row] = promotion_rows(rubrics=[rubric])
    assert (row.recalibration, row.candidate) == ([], 2)  # a newer version leaves the evidence standing
    case = dataset.cases.first()
    case.content_changed_at = timezone.now() + timedelta(seconds=1)
    case.save(update_fields=["content_changed_at"])
    rubric.criteria = "The answer also names the refund's deadline."
    rubric.save(update_fields=["criteria"])
    [row] = promotion_rows(rubrics=[rubric])
    assert row.recalibration == [
        "1 case changed since this run finished", "the rubric's criteria were edited after this run's config was saved",
    ]


def test_it_marks_recalibration_needed_when_relabelling_breaks_a_rule(rubric, dataset, lead, reviewer):
    promote(rubric, evidence_run(rubric, dataset, lead, reviewer), lead)
    # Humans change their minds on 10 passed cases (one of them the judge had wrong): agreement drops from
    # 38/40 to 30/40, below the floor. Labels do not make a run stale; its figures follow them.
    flipped = reviewer.labels.filter(verdict="pass").order_by("case_id")[:10]
    for lbl in flipped:
        lbl.verdict = "fail"
        lbl.save(update_fields=["verdict"])
    [row] = promotion_rows(rubrics=[rubric])
    assert row.recalibration == [
        "agreement (floor) is now 75.0 %, needs ≥ 80.0 %", "true fail rate is now 66.7 %, needs ≥ 70.0 %"
    ]


def test_the_bulk_rules_agree_with_the_calibration_rules(rubric, dataset, other_dataset, lead, reviewer):
    # Three runs of two rubrics over two datasets, each breaking something different.
    other = Rubric.objects.create(project=store_project(), slug="tone", name="Is the tone right?", criteria="Polite.")
    second = make_user("sam")
    other_dataset.reviewers.add(second)
    runs = [
        evidence_run(rubric, dataset, lead, reviewer, wrong=10),
        evidence_run(other, other_dataset, lead, second, flips=3, prefix="o"),
        evidence_run(other, dataset, lead, reviewer, repeats=1, prefix="p"),
    ]
    runs = list(Run.objects.select_related("config__rubric").filter(pk__in=[r.pk for r in runs]))
    bulk = evidence_rules(runs=runs)
    for run in runs:
        assert bulk[run.pk] == run_rules(run=run), run.pk
