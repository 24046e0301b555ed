"""Renewing a rubric's evidence at its current stage: how "recalibration needed" clears without a demotion.

The same rules as a promotion, audited as a renewal; the gate config follows the new evidence and says
whether the evidence still holds (`recalibration_needed` with its reasons), exactly as the pages do.
"""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from judges.models import RubricEvent
from judges.promotion.gate_config import gate_config
from judges.promotion.selectors import evidence_for, promotion_rows
from judges.promotion.services import PromotionError, PromotionRefused, rubric_promote, rubric_renew
from tests.conftest import TEST_PROJECT, store_project
from tests.judges.promotion_factories import REASON, evidence_run
from tests.judges.report_factories import make_config

pytestmark = pytest.mark.django_db

RENEWAL = "Recalibrated on the changed cases."


def page_url(rubric) -> str:
    return reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])


@pytest.fixture
def warned(rubric, dataset, lead, reviewer):
    """`rubric` at warn on a model judge's run."""
    run = evidence_run(rubric, dataset, lead, reviewer)
    for stage in ("observe", "warn"):
        rubric_promote(rubric=rubric, to_stage=stage, run=run, reason=REASON, by=lead)
    return run


def go_stale(dataset, run) -> None:
    """A re-import changes a judged case after the run: its evidence no longer judges what stands."""
    case = dataset.cases.order_by("id").first()
    case.output = "changed by a re-import"
    # Now: after the evidence run finished and before any run made from here on finishes.
    case.content_changed_at = max(timezone.now(), run.finished_at + timedelta(microseconds=1))
    case.save(update_fields=["output", "content_changed_at"])


def test_a_renewal_clears_recalibration_without_a_demotion(rubric, dataset, lead, reviewer, warned):
    go_stale(dataset, warned)
    [row] = promotion_rows(rubrics=[rubric])
    assert row.recalibration == ["1 case changed since this run finished"]
    [entry] = gate_config(project=store_project())["rubrics"]
    assert entry["recalibration_needed"] is True
    assert entry["recalibration_reasons"] == ["1 case changed since this run finished"]

    fresh = evidence_run(rubric, dataset, lead, reviewer, config=warned.config, prefix="fresh")
    event = rubric_renew(rubric=rubric, run=fresh, reason=RENEWAL, by=lead)
    rubric.refresh_from_db()
    assert rubric.stage == "warn"
    assert (event.kind, event.from_stage, event.to_stage, event.run, event.reason) == (
        "renew", "warn", "warn", fresh, RENEWAL,
    )
    assert event.figures["run"] == fresh.pk and event.figures["n"] == 40
    assert all(rule["met"] for rule in event.rules)
    assert evidence_for(rubric=rubric) == event
    [row] = promotion_rows(rubrics=[rubric])
    assert row.recalibration == []
    [entry] = gate_config(project=store_project())["rubrics"]
    assert (entry["recalibration_needed"], entry["recalibration_reasons"]) == (False, [])
    assert (entry["stage"], entry["calibration"]["run"]) == ("warn", fresh.pk)


def test_a_renewal_onto_a_newer_config_ships_that_judge(rubric, dataset, lead, reviewer, warned):
    newer = make_config(rubric, lead, note="Returns: 60 days.", behavioral=True)
    [entry] = gate_config(project=store_project())["rubrics"]
    assert (entry["recalibration_needed"], entry["recalibration_reasons"]) == (False, [])  # a candidate
    assert entry["judge"]["config_hash"] == warned.config.config_hash  # CI keeps the calibrated judge meanwhile
    rubric_renew(rubric=rubric, run=evidence_run(rubric, dataset, lead, reviewer, config=newer, prefix="v2"),
                 reason=RENEWAL, by=lead)
    [entry] = gate_config(project=store_project())["rubrics"]
    assert entry["judge"]["config_hash"] == newer.config_hash and entry["recalibration_needed"] is False


def test_a_refused_renewal_changes_nothing(rubric, dataset, lead, reviewer, warned):
    weak = evidence_run(rubric, dataset, lead, reviewer, config=warned.config, prefix="weak", repeats=1)
    with pytest.raises(PromotionRefused) as refused:
        rubric_renew(rubric=rubric, run=weak, reason=RENEWAL, by=lead)
    assert [r.key for r in refused.value.failing] == ["min_repeats"]
    assert RubricEvent.objects.filter(kind="renew").count() == 0
    assert evidence_for(rubric=rubric).run == warned


def test_a_draft_has_no_evidence_to_renew(rubric, dataset, lead, reviewer):
    run = evidence_run(rubric, dataset, lead, reviewer)
    with pytest.raises(PromotionError, match="no evidence to renew"):
        rubric_renew(rubric=rubric, run=run, reason=RENEWAL, by=lead)
    with pytest.raises(PromotionError, match="reason"):
        rubric_renew(rubric=rubric, run=run, reason=" ", by=lead)


def test_labels_that_break_a_rule_show_in_the_gate_config(rubric, reviewer, warned):
    # Humans change their minds on 10 passed cases: agreement drops below the floor (labels never make a
    # run stale; its figures follow them).
    for label in reviewer.labels.filter(verdict="pass").order_by("case_id")[:10]:
        label.verdict = "fail"
        label.save(update_fields=["verdict"])
    [entry] = gate_config(project=store_project())["rubrics"]
    assert entry["recalibration_needed"] is True
    assert entry["recalibration_reasons"] == [
        "agreement (floor) is now 75.0 %, needs ≥ 80.0 %", "true fail rate is now 66.7 %, needs ≥ 70.0 %",
    ]


# ---- the page ---------------------------------------------------------------------------------------------


def post_renew(client, rubric, run, reason=RENEWAL):
    return client.post(reverse("judges:promotion_renew", args=[TEST_PROJECT, rubric.slug]),
                       {"run": run.pk, "reason": reason})


def test_the_page_renews_and_the_audit_log_keeps_it(lead_client, rubric, dataset, lead, reviewer, warned):
    go_stale(dataset, warned)
    page = lead_client.get(page_url(rubric)).text
    assert 'data-testid="recalibration"' in page and "1 case changed since this run finished" in page
    assert 'data-testid="renew"' in page and "Renew the evidence at warn" in page
    fresh = evidence_run(rubric, dataset, lead, reviewer, config=warned.config, prefix="fresh")
    response = post_renew(lead_client, rubric, fresh)
    assert response.status_code == 302 and response["Location"] == page_url(rubric)
    page = lead_client.get(page_url(rubric)).text
    assert f"evidence at warn renewed on run {fresh.pk}" in page
    assert 'data-testid="recalibration"' not in page and "The evidence still holds" in page
    assert "<dt>Renewed</dt>" in page
    audit = lead_client.get(reverse("judges:audit_log", args=[TEST_PROJECT]) + "?kind=renew").text
    assert audit.count('<tr data-kind="renew">') == 1 and "at warn" in audit and RENEWAL in audit


def test_a_refused_renewal_lists_each_failing_rule_on_the_page(lead_client, rubric, dataset, lead, reviewer, warned):
    weak = evidence_run(rubric, dataset, lead, reviewer, config=warned.config, prefix="weak", repeats=1)
    response = post_renew(lead_client, rubric, weak)
    assert response.status_code == 400
    assert "Renewal at warn refused: 1 of 12 rules not met by run" in response.text
    assert "Rule 4: repeats K</strong>" in response.text
    assert not RubricEvent.objects.filter(kind="renew").exists()
    assert post_renew(lead_client, rubric, weak, reason="").status_code == 400


def test_reviewers_cannot_renew(reviewer_client, rubric, warned):
    assert post_renew(reviewer_client, rubric, warned).status_code == 403
    assert not RubricEvent.objects.filter(kind="renew").exists()


def test_a_draft_rubric_page_offers_no_renewal(lead_client, rubric):
    assert 'data-testid="renew"' not in lead_client.get(page_url(rubric)).text
