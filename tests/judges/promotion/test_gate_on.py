"""Gating on a rate (docs/promotion.md, docs/gate.md): a lead sets gate_on pass_rate with min_agent_pass_rate
through the audited thresholds path; a deterministic rubric always gates on every case; the gate config ships
the choice and the evidence's case counts."""

import pytest
from django.urls import reverse

from judges.models import RubricEvent
from judges.promotion.gate_config import gate_config
from judges.promotion.services import PromotionError, rubric_promote, rubric_thresholds_change
from labeling.models import Rubric
from tests.conftest import TEST_PROJECT, store_project
from tests.judges.promotion_factories import REASON, evidence_run
from tests.judges.report_factories import make_config

pytestmark = pytest.mark.django_db


def promoted(rubric, dataset, lead, reviewer, *, behavioral=True):
    config = make_config(rubric, lead, behavioral=behavioral)
    run = evidence_run(rubric, dataset, lead, reviewer, config=config, repeats=2 if behavioral else 1,
                       wrong=2 if behavioral else 0)
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)
    return run


def test_the_page_sets_the_rate_gate_audited_and_the_gate_config_ships_it(lead_client, rubric, dataset, lead,
                                                                            reviewer):
    run = promoted(rubric, dataset, lead, reviewer)
    url = reverse("judges:promotion_thresholds", args=[TEST_PROJECT, rubric.slug])
    page = lead_client.get(reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])).text
    assert "At gate stage, CI fails on" in page and "Agent&#x27;s pass rate, at least (%)" in page
    data = {"min_cases": 30, "min_repeats": 2, "agreement_floor": 80, "agreement_ceiling": 100,
            "min_true_pass_rate": 70, "min_true_fail_rate": 70, "max_flip_rate": 5, "min_coverage": 95,
            "gate_on": "pass_rate", "min_agent_pass_rate": 70, "reason": "The agent is sampled; gate its rate."}
    response = lead_client.post(url, data)
    assert response.status_code == 302, response.text
    rubric.refresh_from_db()
    assert (rubric.gate_on, rubric.min_agent_pass_rate) == ("pass_rate", 0.7)
    event = RubricEvent.objects.get(kind=RubricEvent.Kind.THRESHOLDS)
    assert event.changes == {"gate_on": ["every_case", "pass_rate"], "min_agent_pass_rate": [None, 0.7]}
    assert event.reason == data["reason"] and event.by == lead
    [entry] = gate_config(project=store_project())["rubrics"]
    assert (entry["gate_on"], entry["min_agent_pass_rate"]) == ("pass_rate", 0.7)
    # 40 cases alternating pass / fail, the first two wrong on both repeats (the run's figures).
    counts = {"tp": 19, "fn": 1, "fp": 1, "tn": 19}
    assert entry["calibration"]["cases"] == counts and entry["calibration"]["cases_single"] == counts
    # `project` (0.6.0) is in every gate config, release_judge (0.4.0) in every entry
    assert entry["calibration"]["run"] == run.pk and gate_config(project=store_project())["requires_cli"] == "0.6.0"
    # Without a minimum the rate gate has nothing to compare: refused, nothing written.
    response = lead_client.post(url, {**data, "min_agent_pass_rate": "", "reason": "Drop the minimum."})
    assert response.status_code == 400 and "needs the minimum rate" in response.text
    assert "min_agent_pass_rate: Gating" not in response.text  # said beside the field, not as a raw name
    assert RubricEvent.objects.filter(kind=RubricEvent.Kind.THRESHOLDS).count() == 1


def test_a_deterministic_rubric_is_refused_a_rate_gate(lead_client, rubric, dataset, lead, reviewer):
    promoted(rubric, dataset, lead, reviewer, behavioral=False)
    with pytest.raises(PromotionError, match="deterministic .* gates on every case"):
        rubric_thresholds_change(rubric=rubric, reason="Rate, please.", by=lead, gate_on="pass_rate",
                                 min_agent_pass_rate=0.9)
    rubric.refresh_from_db()
    assert rubric.gate_on == "every_case" and not RubricEvent.objects.filter(kind="thresholds").exists()
    # Its minimum alone may be kept for later; the gate config still says every case.
    rubric_thresholds_change(rubric=rubric, reason="Kept for a judge with a model.", by=lead, min_agent_pass_rate=0.9)
    Rubric.objects.filter(pk=rubric.pk).update(gate_on="pass_rate")  # as if chosen before a deterministic config
    [entry] = gate_config(project=store_project())["rubrics"]
    assert entry["gate_on"] == "every_case"
