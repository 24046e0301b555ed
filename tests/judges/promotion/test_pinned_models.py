"""A promoted judge is a pinned judge: every model of the evidence config — primary, secondary,
embeddings — is a dated snapshot, on by default; a lead may turn the rule off on the audited thresholds page."""

import pytest
from django.urls import reverse

from judges.models import RubricEvent
from judges.promotion.gate_config import gate_config
from judges.promotion.services import PromotionRefused, rubric_promote
from tests.conftest import TEST_PROJECT, store_project
from tests.judges.promotion.test_gate_config import behavioral_config
from tests.judges.promotion_factories import REASON, evidence_run

pytestmark = pytest.mark.django_db

# The page takes rates as percentages.
THRESHOLDS = {"min_cases": 30, "min_repeats": 2, "agreement_floor": 80, "agreement_ceiling": 100,
              "min_true_pass_rate": 70, "min_true_fail_rate": 70, "max_flip_rate": 5, "min_coverage": 95}


@pytest.fixture
def alias_run(rubric, dataset, lead, reviewer):
    """Evidence that meets every rule but names its secondary judge by an alias."""
    return evidence_run(rubric, dataset, lead, reviewer, config=behavioral_config(rubric, lead,
                                                                                  secondary_model="claude-haiku-4-5"))


def test_it_refuses_evidence_that_names_an_alias(rubric, lead, alias_run):
    with pytest.raises(PromotionRefused) as refused:
        rubric_promote(rubric=rubric, to_stage="observe", run=alias_run, reason=REASON, by=lead)
    assert [(r.key, r.value) for r in refused.value.failing] == [("pinned_models", ["claude-haiku-4-5"])]


def test_a_lead_turns_it_off_on_the_thresholds_page_audited(lead_client, rubric, lead, alias_run):
    url = reverse("judges:promotion_thresholds", args=[TEST_PROJECT, rubric.slug])
    response = lead_client.post(url, THRESHOLDS | {"allow_unpinned_models": "on",
                                                   "reason": "The secondary is a local model served under a tag."})
    assert response.status_code == 302
    rubric.refresh_from_db()
    assert rubric.require_pinned_models is False
    event = RubricEvent.objects.get(kind=RubricEvent.Kind.THRESHOLDS)
    assert event.changes == {"require_pinned_models": [True, False]}
    page = lead_client.get(reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])).text
    assert "models need not be pinned snapshots" in page  # shown as relaxed

    rubric_promote(rubric=rubric, to_stage="observe", run=alias_run, reason=REASON, by=lead)

    # A form posted without the box turns the rule back on: the safe default.
    lead_client.post(url, THRESHOLDS | {"reason": "Pinned the secondary again."})
    rubric.refresh_from_db()
    assert rubric.require_pinned_models is True
    [entry] = gate_config(project=store_project())["rubrics"]
    assert entry["recalibration_needed"] and "models pinned" in entry["recalibration_reasons"][0]


def test_a_pinned_config_passes_the_rule(rubric, dataset, lead, reviewer):
    run = evidence_run(rubric, dataset, lead, reviewer, config=behavioral_config(rubric, lead))
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)  # both models pinned
    rubric.refresh_from_db()
    assert rubric.stage == "observe"
