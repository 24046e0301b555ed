"""Deterministic evidence (a config of contract checks only): promoted by the rules of docs/promotion.md.

No K ≥ 2, no flip rule, no ceiling; the human-agreement rules unless the lead turns off
`require_human_evidence` (audited), and then coverage counts every judgment and the audit says the
promotion had no human evidence. Also the optional rule on calibration kinds, and relaxed thresholds.
"""

import pytest
from django.urls import reverse

from judges.calibration.selectors import run_rules, shown_rules
from judges.models import RubricEvent, Run
from judges.promotion.gate_config import gate_config
from judges.promotion.services import PromotionRefused, rubric_promote, rubric_thresholds_change
from labeling.models import Case
from tests.conftest import TEST_PROJECT, store_project
from tests.judges.promotion_factories import REASON, evidence_run
from tests.judges.report_factories import make_cases, make_config, make_run

pytestmark = pytest.mark.django_db

HUMAN_RULES = {"min_cases", "agreement_floor", "min_true_pass_rate", "min_true_fail_rate"}


def promote(rubric, run, lead, to_stage="observe"):
    return rubric_promote(rubric=rubric, to_stage=to_stage, run=run, reason=REASON, by=lead)


def unlabelled_run(rubric, dataset, lead, *, n=40, not_evaluated=0, config=None) -> Run:
    """A no-secrets check over n cases nobody labelled, one judgment each (K = 1): the last
    `not_evaluated` could not be judged, every fifth case fails."""
    cases = make_cases(dataset, [(f"s-{i:03}", "safety") for i in range(n)])
    outcomes = {
        case: ["not_evaluated" if i >= n - not_evaluated else "fail" if i % 5 == 0 else "pass"]
        for i, case in enumerate(cases)
    }
    return make_run(config or make_config(rubric, lead), dataset, lead, outcomes)


def test_a_check_agreeing_100_percent_with_the_humans_is_promotable_on_one_run(rubric, dataset, lead, reviewer):
    run = evidence_run(rubric, dataset, lead, reviewer, config=make_config(rubric, lead), repeats=1, wrong=0)
    assert run.config.deterministic
    event = promote(rubric, run, lead)
    assert event.figures["agreement"] == 1.0 and event.figures["repeats"] == 1
    assert event.figures["deterministic"] is True and event.figures["human_evidence"] is True
    applies = {rule["key"]: rule["applies"] for rule in event.rules}
    # and judge_above_reviewers: no case has two labels to compare the judge with the reviewers on
    assert [key for key, applied in applies.items() if not applied] == [
        "min_repeats", "agreement_ceiling", "max_flip_rate", "judge_above_reviewers",
    ]


def test_the_same_figures_from_a_judge_with_a_model_are_refused(rubric, dataset, lead, reviewer):
    run = evidence_run(rubric, dataset, lead, reviewer, repeats=1, wrong=0)  # a behavioral config
    assert not run.config.deterministic
    with pytest.raises(PromotionRefused) as refused:
        promote(rubric, run, lead)
    assert {r.key for r in refused.value.failing} == {"min_repeats", "agreement_ceiling"}


def test_a_deterministic_check_still_needs_labels_by_default(rubric, dataset, lead):
    run = unlabelled_run(rubric, dataset, lead)
    with pytest.raises(PromotionRefused) as refused:
        promote(rubric, run, lead)
    # Coverage too: it is counted over the cases with a human verdict, and there are none.
    assert {r.key for r in refused.value.failing} == HUMAN_RULES | {"min_coverage"}
    assert not RubricEvent.objects.exists()


def test_without_human_evidence_a_check_with_no_labels_is_gated_and_the_audit_says_so(
    lead_client, rubric, dataset, lead
):
    run = unlabelled_run(rubric, dataset, lead)
    [change] = rubric_thresholds_change(rubric=rubric, reason="A no-secrets contract needs no labels.", by=lead,
                                        require_human_evidence=False)
    assert change.changes == {"require_human_evidence": [True, False]}
    for stage in ("observe", "warn", "gate"):
        event = promote(rubric, run, lead, stage)
        assert event.figures["human_evidence"] is False
        assert (event.figures["n"], event.figures["coverage"]) == (0, 1.0)  # coverage over every judgment
        assert {r["key"] for r in event.rules if not r["applies"]} == HUMAN_RULES | {
            "min_repeats", "agreement_ceiling", "max_flip_rate", "judge_above_reviewers",
        }
    rubric.refresh_from_db()
    assert rubric.stage == "gate"
    [entry] = gate_config(project=store_project())["rubrics"]
    assert (entry["stage"], entry["calibration"]["n"], entry["calibration"]["coverage"]) == ("gate", 0, 1.0)
    assert entry["recalibration_needed"] is False

    audit = lead_client.get(reverse("judges:audit_log", args=[TEST_PROJECT])).text
    assert audit.count('data-testid="no-human-evidence">granted without human evidence') == 3
    assert "require_human_evidence</span>: True → <strong>False</strong>" in audit
    page = lead_client.get(reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])).text
    assert "granted without human evidence" in page and "no human evidence required" in page
    overview = lead_client.get(reverse("judges:promotion_overview", args=[TEST_PROJECT])).text
    assert "no human evidence" in overview and 'data-testid="relaxed"' in overview


def test_without_human_evidence_coverage_counts_every_judgment(rubric, dataset, lead):
    rubric_thresholds_change(rubric=rubric, reason="Safety contract.", by=lead, require_human_evidence=False)
    run = unlabelled_run(rubric, dataset, lead, n=40, not_evaluated=3)  # 37 of 40
    with pytest.raises(PromotionRefused) as refused:
        promote(rubric, run, lead)
    [failing] = refused.value.failing
    assert failing.key == "min_coverage" and failing.value == pytest.approx(37 / 40)
    assert failing.label == "coverage (all judgments)"


def test_a_judge_with_a_model_needs_labels_even_with_the_switch_off(rubric, dataset, lead):
    rubric_thresholds_change(rubric=rubric, reason="Safety contract.", by=lead, require_human_evidence=False)
    run = unlabelled_run(rubric, dataset, lead, config=make_config(rubric, lead, behavioral=True))
    with pytest.raises(PromotionRefused) as refused:
        promote(rubric, run, lead)
    assert HUMAN_RULES <= {r.key for r in refused.value.failing}


# ---- every calibration kind with at least N cases --------------------------------------------------------


def test_it_can_require_every_calibration_kind(rubric, dataset, lead, reviewer):
    run = evidence_run(rubric, dataset, lead, reviewer, config=make_config(rubric, lead), repeats=1, wrong=2)
    kinds = ["good", "bad", "incomplete", "injection"]  # no paraphrase among the 40 cases
    for i, case in enumerate(Case.objects.filter(dataset=dataset).order_by("external_id")):
        Case.objects.filter(pk=case.pk).update(kind=kinds[i % 4])
    rubric_thresholds_change(rubric=rubric, reason="Every kind, please.", by=lead, min_cases_per_kind=5)
    run = Run.objects.select_related("config__rubric").get(pk=run.pk)
    with pytest.raises(PromotionRefused) as refused:
        promote(rubric, run, lead)
    [failing] = refused.value.failing
    assert failing.key == "min_cases_per_kind"
    assert failing.value == {"good": 10, "bad": 10, "incomplete": 10, "injection": 10, "paraphrase": 0}
    [shown] = [rule for rule in shown_rules(run, run_rules(run=run)) if rule.key == "min_cases_per_kind"]
    assert shown.value == "good 10, bad 10, incomplete 10, injection 10, paraphrase 0"
    assert shown.threshold == "≥ 5 of each kind (good, bad, incomplete, injection, paraphrase)"
    Case.objects.filter(dataset=dataset, external_id__in=["case-000", "case-001", "case-002", "case-003",
                                                          "case-004"]).update(kind="paraphrase")
    # A kind is not judged content: the run does not go stale, and now every kind has at least 5.
    assert promote(rubric, run, lead).to_stage == "observe"


# ---- the thresholds page and the rubric editor ----------------------------------------------------------

THRESHOLDS = {"min_cases": 30, "min_repeats": 2, "agreement_floor": 80, "agreement_ceiling": 100,  # percent
              "min_true_pass_rate": 70, "min_true_fail_rate": 70, "max_flip_rate": 5, "min_coverage": 95}


def test_the_thresholds_page_turns_human_evidence_off_and_on_audited(lead_client, rubric):
    url = reverse("judges:promotion_thresholds", args=[TEST_PROJECT, rubric.slug])
    response = lead_client.post(url, {**THRESHOLDS, "without_human_evidence": "on", "min_cases_per_kind": 3,
                                      "reason": "A safety contract."})
    assert response.status_code == 302
    rubric.refresh_from_db()
    assert (rubric.require_human_evidence, rubric.min_cases_per_kind) == (False, 3)
    event = RubricEvent.objects.get()
    assert event.changes == {"min_cases_per_kind": [None, 3], "require_human_evidence": [True, False]}
    page = lead_client.get(reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])).text
    assert 'name="without_human_evidence" id="id_without_human_evidence" checked' in page
    # A form posted without the box (a script, an old page) keeps the safe value: labels required.
    assert lead_client.post(url, {**THRESHOLDS, "min_cases_per_kind": 3, "reason": "Back."}).status_code == 302
    rubric.refresh_from_db()
    assert rubric.require_human_evidence is True
    assert lead_client.post(url, {**THRESHOLDS, "min_cases_per_kind": 0, "reason": "x"}).status_code == 400


def test_the_rubric_editor_cannot_change_it(lead_client, rubric):
    response = lead_client.post(reverse("labeling:rubric_edit", args=[TEST_PROJECT, rubric.slug]), {
        "name": rubric.name, "criteria": rubric.criteria, "labels_per_case": 1, "require_human_evidence": "",
        "min_cases_per_kind": 9,
    })
    assert response.status_code == 302
    rubric.refresh_from_db()
    assert (rubric.require_human_evidence, rubric.min_cases_per_kind) == (True, None)
    form = lead_client.get(reverse("labeling:rubric_edit", args=[TEST_PROJECT, rubric.slug])).text
    assert "human_evidence" not in form and "min_cases_per_kind" not in form


# ---- relaxed thresholds, wherever the stage and figures show -------------------------------------------


def test_thresholds_looser_than_the_defaults_are_shown_as_relaxed(lead_client, rubric, dataset, lead, reviewer):
    run = evidence_run(rubric, dataset, lead, reviewer)
    promote(rubric, run, lead)
    pages = [reverse("judges:promotion_overview", args=[TEST_PROJECT]),
             reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug]),
             reverse("judges:run_report", args=[TEST_PROJECT, run.pk])]
    for url in pages:
        assert 'data-testid="relaxed"' not in lead_client.get(url).text, url
    rubric_thresholds_change(rubric=rubric, reason="Too strict for now.", by=lead, agreement_floor=0.7,
                             min_cases=20, max_flip_rate=0.01)  # the flip rule stricter: not relaxed
    for url in pages:
        text = lead_client.get(url).text
        assert 'data-testid="relaxed"' in text, url
        assert "cases 20 (default 30); agreement floor 70.0 % (default 80.0 %)" in text, url
        assert "flip rate 1.0 %" not in text, url
