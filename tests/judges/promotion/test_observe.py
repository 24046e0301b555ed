"""Observe from day one: entering observe and switching CI's config at it name a kept config version, with no
run, labels or evidence; the gate config carries such a rubric with `calibration: null`; warn keeps every rule."""

import json

import pytest
from django.urls import reverse

from judges.gate.config import check_calibrated, parse_gate_config
from judges.models import RubricEvent
from judges.promotion.gate_config import gate_config
from judges.promotion.services import (
    PromotionError,
    PromotionRefused,
    rubric_demote,
    rubric_promote,
    rubric_switch_config,
)
from labeling.models import Rubric
from tests.conftest import TEST_PROJECT, store_project
from tests.judges.promotion_factories import REASON, evidence_run
from tests.judges.report_factories import make_config

pytestmark = pytest.mark.django_db


def observe(rubric, config, lead):
    return rubric_promote(rubric=rubric, to_stage="observe", config=config, reason=REASON, by=lead)


def shipped(slug: str) -> dict:
    [entry] = [r for r in gate_config(project=store_project())["rubrics"] if r["slug"] == slug]
    return entry


def test_a_new_rubric_enters_observe_with_a_config_and_no_labels_or_run(rubric, lead):
    config = make_config(rubric, lead, behavioral=True)
    event = observe(rubric, config, lead)
    rubric.refresh_from_db()
    assert rubric.stage == "observe"
    assert (event.kind, event.from_stage, event.to_stage) == ("promote", "draft", "observe")
    assert (event.config, event.run, event.figures, event.reason, event.by) == (config, None, None, REASON, lead)
    entry = shipped(rubric.slug)
    assert entry["stage"] == "observe" and entry["calibration"] is None
    assert entry["judge"]["config_hash"] == config.config_hash
    assert (entry["recalibration_needed"], entry["recalibration_reasons"]) == (False, [])
    assert entry["promoted_by"] == lead.username
    # CI accepts it, and calibration null never trips --require-calibrated.
    [parsed] = parse_gate_config(json.loads(json.dumps(gate_config(project=store_project()))))
    assert parsed.calibration is None and parsed.stage == "observe"
    check_calibrated([parsed])


def test_warn_and_gate_keep_every_rule(rubric, dataset, lead, reviewer):
    config = make_config(rubric, lead, behavioral=True)
    observe(rubric, config, lead)
    with pytest.raises(PromotionError, match="names the run that is its evidence"):
        rubric_promote(rubric=rubric, to_stage="warn", config=config, reason=REASON, by=lead)
    weak = evidence_run(rubric, dataset, lead, reviewer, config=config, wrong=10, repeats=1)
    with pytest.raises(PromotionRefused):
        rubric_promote(rubric=rubric, to_stage="warn", run=weak, reason=REASON, by=lead)
    rubric.refresh_from_db()
    assert rubric.stage == "observe" and shipped(rubric.slug)["calibration"] is None


def test_observe_still_takes_a_run_as_evidence_by_every_rule(rubric, dataset, lead, reviewer):
    weak = evidence_run(rubric, dataset, lead, reviewer, wrong=10, repeats=1)
    with pytest.raises(PromotionRefused):
        rubric_promote(rubric=rubric, to_stage="observe", run=weak, reason=REASON, by=lead)
    with pytest.raises(PromotionError, match="either the evidence run or the config"):
        rubric_promote(rubric=rubric, to_stage="observe", run=weak, config=weak.config, reason=REASON, by=lead)
    with pytest.raises(PromotionError, match="names the judge config version"):
        rubric_promote(rubric=rubric, to_stage="observe", reason=REASON, by=lead)
    assert not RubricEvent.objects.exists()


def test_only_a_kept_config_of_the_rubric_enters_observe(rubric, lead):
    other = Rubric.objects.create(project=store_project(), slug="tone", name="Tone?", criteria="Polite.")
    with pytest.raises(PromotionError, match="is a config of tone"):
        observe(rubric, make_config(other, lead), lead)
    with pytest.raises(PromotionError, match="imported from another tool"):
        observe(rubric, make_config(rubric, lead, external=True), lead)
    rubric.refresh_from_db()
    assert rubric.stage == "draft" and not RubricEvent.objects.exists()


def test_at_observe_a_lead_switches_ci_to_another_kept_version(rubric, dataset, lead, reviewer):
    first = make_config(rubric, lead, behavioral=True)
    run = evidence_run(rubric, dataset, lead, reviewer, config=first)
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)
    assert shipped(rubric.slug)["calibration"]["run"] == run.pk
    second = make_config(rubric, lead, behavioral=True, note="Returns: 60 days.")
    event = rubric_switch_config(rubric=rubric, config=second, reason="Try the longer policy.", by=lead)
    assert (event.kind, event.from_stage, event.to_stage, event.config, event.run) == (
        "switch", "observe", "observe", second, None)
    entry = shipped(rubric.slug)
    # The switched config has no evidence: the old run's figures must not ride along with it.
    assert entry["judge"]["config_hash"] == second.config_hash and entry["calibration"] is None
    with pytest.raises(PromotionError, match="already runs"):
        rubric_switch_config(rubric=rubric, config=second, reason="Again.", by=lead)
    # Back to the first version: still no evidence (a renewal or a promotion names a run again).
    rubric_switch_config(rubric=rubric, config=first, reason="Back.", by=lead)
    assert shipped(rubric.slug)["judge"]["config_hash"] == first.config_hash
    assert shipped(rubric.slug)["calibration"] is None


def test_a_switch_is_only_at_observe(rubric, dataset, lead, reviewer):
    config = make_config(rubric, lead, behavioral=True)
    with pytest.raises(PromotionError, match="is at draft"):
        rubric_switch_config(rubric=rubric, config=config, reason=REASON, by=lead)
    run = evidence_run(rubric, dataset, lead, reviewer, config=config)
    observe(rubric, config, lead)
    rubric_promote(rubric=rubric, to_stage="warn", run=run, reason=REASON, by=lead)
    newer = make_config(rubric, lead, behavioral=True, note="Returns: 60 days.")
    with pytest.raises(PromotionError, match="is at warn"):
        rubric_switch_config(rubric=rubric, config=newer, reason=REASON, by=lead)
    assert shipped(rubric.slug)["judge"]["config_hash"] == config.config_hash


def test_a_demotion_to_draft_takes_an_observed_rubric_out_of_the_gate_config(rubric, lead):
    observe(rubric, make_config(rubric, lead), lead)
    rubric_demote(rubric=rubric, to_stage="draft", reason="Rewrite.", by=lead)
    assert gate_config(project=store_project())["rubrics"] == []


# ---- the page -----------------------------------------------------------------------------------------------


def page(client, rubric) -> str:
    return client.get(reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])).text


def test_the_page_says_what_observe_means_and_what_warn_will_need(lead_client, rubric, lead):
    config = make_config(rubric, lead, behavioral=True)
    rubric.min_cases, rubric.agreement_floor = 45, 0.85
    rubric.save(update_fields=["min_cases", "agreement_floor"])
    text = page(lead_client, rubric)
    assert "No labels or run are needed" in text and "Observe records and never fails" in text
    response = lead_client.post(reverse("judges:promotion_observe", args=[TEST_PROJECT, rubric.slug]),
                                {"action": "enter", "config": config.pk, "reason": "Start observing."})
    assert response.status_code == 302
    text = page(lead_client, rubric)
    assert "observe never fails a build" in text and "<code>calibration: null</code>" in text
    assert 'data-testid="ci-config"' in text and f"v{config.version}</a>" in text
    # Warn's rules with this rubric's own thresholds.
    assert 'data-testid="warn-needs"' in text
    assert "cases with a human verdict: ≥ 45" in text and "agreement (floor): ≥ 85.0 %" in text
    assert "repeats K: ≥ 2" in text and "flip rate: ≤ 5.0 %" in text
    assert "Switch the config CI runs" in text


def test_a_stale_observe_form_is_refused_and_changes_nothing(lead_client, rubric, lead):
    config = make_config(rubric, lead)
    observe(rubric, config, lead)
    newer = make_config(rubric, lead, note="x+")
    # The page was loaded at draft; another lead entered observe meanwhile: no silent switch.
    response = lead_client.post(reverse("judges:promotion_observe", args=[TEST_PROJECT, rubric.slug]),
                                {"action": "enter", "config": newer.pk, "reason": "Start."})
    assert response.status_code == 400 and "one stage at a time" in response.text
    assert RubricEvent.objects.count() == 1


def test_the_observe_form_needs_a_reason_and_a_kept_config(lead_client, rubric, lead):
    make_config(rubric, lead)
    external = make_config(rubric, lead, external=True, note="y+")
    response = lead_client.post(reverse("judges:promotion_observe", args=[TEST_PROJECT, rubric.slug]),
                                {"action": "enter", "config": external.pk, "reason": ""})
    assert response.status_code == 400
    assert "Type the reason" in response.text and "Select a valid choice" in response.text
    assert not RubricEvent.objects.exists()


def test_reviewers_cannot_enter_observe(reviewer_client, rubric, lead):
    config = make_config(rubric, lead)
    response = reviewer_client.post(reverse("judges:promotion_observe", args=[TEST_PROJECT, rubric.slug]),
                                    {"action": "enter", "config": config.pk, "reason": "x"})
    assert response.status_code == 403 and not RubricEvent.objects.exists()


def test_config_notes_and_reasons_stay_escaped(lead_client, rubric, lead):
    hostile = "<script>alert(1)</script>"
    config = make_config(rubric, lead, behavioral=True)
    config.note = hostile
    config.save(update_fields=["note"])
    text = page(lead_client, rubric)
    assert hostile not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    observe(rubric, config, lead)
    rubric_switch_config(rubric=rubric, config=make_config(rubric, lead, behavioral=True, note="P"), reason=hostile,
                         by=lead)
    log = lead_client.get(reverse("judges:audit_log", args=[TEST_PROJECT])).text
    assert hostile not in log and "CI config switch" in log and "no evidence" in log
