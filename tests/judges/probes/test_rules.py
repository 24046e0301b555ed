"""The promotion rule "verdicts moved by probes ≤ X %": audited, evaluated from the probes' figures,
refusing a promotion when a probe moved more; probe runs are never evidence."""

import pytest
from django.urls import reverse

from evalhub.models import ApiToken, Scope
from judges.calibration.selectors import run_figures, run_rules, shown_rules
from judges.models import RubricEvent, Run
from judges.promotion.selectors import candidate_runs, evidence_rules, promotion_rows
from judges.promotion.services import (
    PromotionError,
    PromotionRefused,
    rubric_promote,
    rubric_thresholds_change,
    threshold_errors,
)
from tests.conftest import TEST_PROJECT
from tests.judges.probes.factories import make_probe
from tests.judges.promotion_factories import REASON, evidence_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(rubric, dataset, lead, reviewer) -> Run:
    """40 cases, agreement 0.95: every other rule is met."""
    return Run.objects.select_related("config__rubric").get(pk=evidence_run(rubric, dataset, lead, reviewer).pk)


def add_rule(rubric, lead, value):
    return rubric_thresholds_change(rubric=rubric, reason=REASON, by=lead, max_probe_moved=value)


def rule(run) -> object:
    run.config.rubric.refresh_from_db()
    return {r.key: r for r in run_rules(run=run)}.get("max_probe_moved")


def test_the_rule_is_absent_until_a_lead_adds_it_and_the_change_is_audited(run, rubric, lead):
    assert rule(run) is None
    [event] = add_rule(rubric, lead, 0.1)
    assert (event.kind, event.changes) == (RubricEvent.Kind.THRESHOLDS, {"max_probe_moved": [None, 0.1]})
    rubric.refresh_from_db()
    assert rubric.max_probe_moved == 0.1
    [removed] = add_rule(rubric, lead, None)
    assert removed.changes == {"max_probe_moved": [0.1, None]}
    assert rule(run) is None
    assert threshold_errors({"max_probe_moved": 1.5}) == {"max_probe_moved": "A fraction from 0 to 1 (0.8 is 80 %)."}
    assert threshold_errors({"max_probe_moved": None}) == {}


def test_without_a_finished_probe_the_rule_fails(run, rubric, lead):
    add_rule(rubric, lead, 0.1)
    make_probe(run, "verbosity", moved=0, status=Run.Status.RUNNING)  # at work: no figures yet
    result = rule(run)
    assert not result.met and result.value is None
    with pytest.raises(PromotionRefused) as refused:
        rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)
    assert [r.key for r in refused.value.failing] == ["max_probe_moved"]


def test_a_probe_that_moved_more_than_allowed_refuses_the_promotion(run, rubric, lead):
    add_rule(rubric, lead, 0.1)
    make_probe(run, "sycophancy", moved=2)  # 5 %
    make_probe(run, "verbosity", moved=8)  # 20 %: the largest counts
    result = rule(run)
    assert not result.met and result.value == pytest.approx(0.2)
    shown = {r.key: r for r in shown_rules(run, run_rules(run=run))}["max_probe_moved"]
    assert (shown.value, shown.threshold) == ("20.0 %", "≤ 10.0 %")
    with pytest.raises(PromotionRefused) as refused:
        rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)
    assert [r.key for r in refused.value.failing] == ["max_probe_moved"]
    rubric.refresh_from_db()
    assert rubric.stage == "draft"


def test_a_newer_probe_within_the_limit_lets_it_through_and_the_pages_agree(run, rubric, lead):
    add_rule(rubric, lead, 0.1)
    make_probe(run, "verbosity", moved=8)
    make_probe(run, "verbosity", moved=2)  # the newest verbosity probe: 5 %
    assert rule(run).met and rule(run).value == pytest.approx(0.05)
    event = rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)
    assert {r["key"]: r["met"] for r in event.rules}["max_probe_moved"] is True
    # The overview's rules (many runs at once) read the probes the same way.
    rubric.refresh_from_db()
    run.config.rubric = rubric
    assert evidence_rules(runs=[run])[run.pk] == run_rules(run=run)
    # A stricter limit later: "recalibration needed", naming the rule.
    add_rule(rubric, lead, 0.01)
    rubric.refresh_from_db()
    [row] = promotion_rows(rubrics=[rubric])
    assert any("probe verdicts moved is now 5.0 %" in reason for reason in row.recalibration)


def test_a_probe_run_is_never_evidence(run, rubric, lead, lead_client):
    probe = make_probe(run, "verbosity", moved=0)
    assert list(candidate_runs(rubric=rubric)) == [run]
    with pytest.raises(PromotionError, match="never evidence"):
        rubric_promote(rubric=rubric, to_stage="observe", run=probe, reason=REASON, by=lead)
    # Through the page too: the probe is not even a choice.
    response = lead_client.post(reverse("judges:promotion_promote", args=[TEST_PROJECT, rubric.slug]),
                                {"to_stage": "observe", "run": probe.pk, "reason": REASON})
    assert response.status_code == 400
    rubric.refresh_from_db()
    assert rubric.stage == "draft"


def test_the_thresholds_form_adds_and_clears_the_rule(run, rubric, lead_client):
    url = reverse("judges:promotion_thresholds", args=[TEST_PROJECT, rubric.slug])
    page = lead_client.get(reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])).content.decode()
    assert 'name="max_probe_moved"' in page and "Verdicts moved by bias probes, at most" in page
    fields = {
        "min_cases": 30, "min_repeats": 2, "agreement_floor": 80, "agreement_ceiling": 100,  # percent
        "min_true_pass_rate": 70, "min_true_fail_rate": 70, "max_flip_rate": 5, "min_coverage": 95,
        "reason": REASON,
    }
    assert lead_client.post(url, fields | {"max_probe_moved": "10"}).status_code == 302
    rubric.refresh_from_db()
    assert rubric.max_probe_moved == 0.1
    assert lead_client.post(url, fields | {"max_probe_moved": "200"}).status_code == 400
    assert lead_client.post(url, fields | {"max_probe_moved": ""}).status_code == 302
    rubric.refresh_from_db()
    assert rubric.max_probe_moved is None
    assert list(RubricEvent.objects.filter(rubric=rubric).values_list("changes", flat=True)) == [
        {"max_probe_moved": [0.1, None]}, {"max_probe_moved": [None, 0.1]},
    ]


def test_the_figures_carry_the_probes(run, rubric, lead):
    assert "probes" not in run_figures(run=run) and "probe_moved" not in run_figures(run=run)
    make_probe(run, "injection", moved=3)
    figures = run_figures(run=run)
    assert figures["probe_moved"] == pytest.approx(3 / 40)
    assert figures["probes"]["injection"]["moved"] == 3

def test_the_json_api_carries_the_probes(run, lead, client):
    make_probe(run, "injection", moved=3)
    _, raw = ApiToken.issue(project=run.dataset.project, name="ci", scopes=[Scope.RUNS_READ], created_by=lead)
    response = client.get(reverse("judges:api_run_report", args=[run.pk]), headers={"Authorization": f"Bearer {raw}"})
    body = response.json()
    assert body["probe_moved"] == pytest.approx(3 / 40)
    assert [c["external_id"] for c in body["probes"]["injection"]["moved_cases"]] == ["case-000", "case-001",
                                                                                      "case-002"]
