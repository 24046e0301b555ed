"""A drift check's runs say what they are on their own page: not a bias probe, but the check of an evidence run."""

import pytest
from django.urls import reverse

from judges.models import DriftCheck, Run
from judges.promotion.services import rubric_promote
from tests.conftest import TEST_PROJECT
from tests.judges.promotion_factories import evidence_run


@pytest.mark.django_db
def test_a_drift_run_and_its_fresh_sample_name_their_check(client, rubric, dataset, lead, reviewer):
    evidence = evidence_run(rubric, dataset, lead, reviewer)
    rubric_promote(rubric=rubric, to_stage="observe", run=evidence, reason="Calibrated.", by=lead)
    drift, fresh = (Run.objects.create(config=evidence.config, dataset=dataset, created_by=lead, parent=evidence,
                                       fresh=is_fresh, status=Run.Status.FINISHED) for is_fresh in (False, True))
    DriftCheck.objects.create(rubric=rubric, evidence_run=evidence, run=drift, fresh_run=fresh)
    client.force_login(lead)
    promotion = reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])
    for run, opening in ((drift, "A drift check of"), (fresh, "The fresh sample of a drift check of")):
        page = client.get(reverse("judges:run_detail", args=[TEST_PROJECT, run.pk])).content.decode()
        card = page[page.index('data-testid="drift-of"'):]
        card = card[:card.index("</p>")]
        assert opening in card and f"run {evidence.pk}</a>" in card and f'href="{promotion}"' in card
        assert "Bias probe" not in page
