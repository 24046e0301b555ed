"""A label a promotion's evidence counted is not taken back by undo: the refusal says which promotion."""

import pytest

from judges.promotion.services import rubric_promote
from labeling.models import Label
from tests.judges.promotion_factories import REASON, evidence_run
from tests.labeling.queue_helpers import HTMX, label_form, queue_url

pytestmark = pytest.mark.django_db


def test_undo_refuses_a_label_that_a_promotion_counted(reviewer_client, reviewer, second_reviewer, rubric, dataset,
                                                       lead):
    run = evidence_run(rubric, dataset, lead, second_reviewer)
    judged = run.judgments.order_by("case_id").first().case
    reviewer_client.post(queue_url(dataset, rubric, "queue_label"), label_form(judged, "pass"), headers=HTMX)
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)

    offered = reviewer_client.get(queue_url(dataset, rubric), headers=HTMX).context["undo"]
    response = reviewer_client.post(queue_url(dataset, rubric, "queue_undo"), {"label": offered.pk}, headers=HTMX)
    assert Label.objects.filter(case=judged, reviewer=reviewer).exists()
    assert response.context["refusal"].startswith("Not taken back: the promotion to observe on ")
    assert "counted your label in its evidence" in response.context["refusal"]


def test_undo_still_takes_back_a_label_given_after_the_promotion(reviewer_client, reviewer, second_reviewer, rubric,
                                                                 dataset, lead):
    run = evidence_run(rubric, dataset, lead, second_reviewer)
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)
    judged = run.judgments.order_by("case_id").first().case
    reviewer_client.post(queue_url(dataset, rubric, "queue_label"), label_form(judged, "pass"), headers=HTMX)

    offered = reviewer_client.get(queue_url(dataset, rubric), headers=HTMX).context["undo"]
    response = reviewer_client.post(queue_url(dataset, rubric, "queue_undo"), {"label": offered.pk}, headers=HTMX)
    assert response.context["refusal"] == ""
    assert not Label.objects.filter(case=judged, reviewer=reviewer).exists()
