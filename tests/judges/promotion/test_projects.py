"""Promotion within a project (docs/projects.md): the pages list and open only the project's rubrics and audit
entries, another project's lead gets 404 and a reviewer of the project 403, a rubric's evidence is a run over a
dataset of its own project, and only a lead of the rubric's project (or the instance admin) changes its promotion."""

import pytest
from django.urls import reverse

from judges.models import CiResult, RubricEvent
from judges.promotion.selectors import candidate_runs, promotion_overview, rubric_events
from judges.promotion.services import (
    PromotionError,
    rubric_demote,
    rubric_promote,
    rubric_thresholds_change,
)
from labeling.models import Dataset, Rubric
from tests.conftest import TEST_PROJECT, make_user
from tests.judges.promotion_factories import REASON, evidence_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def theirs(other_project, other_lead):
    """Another project's rubric of the same slug, promoted on its own evidence by its own lead."""
    rubric = Rubric.objects.create(project=other_project, slug="return-policy", name="Theirs?",
                                   criteria="Their secret criteria.")
    data = Dataset.objects.create(project=other_project, slug="their-support", name="Theirs")
    reviewer = make_user("theo", project=other_project)
    run = evidence_run(rubric, data, other_lead, reviewer, prefix="theirs")
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason="Their own reason.", by=other_lead)
    CiResult.objects.create(rubric=rubric, config_hash="b" * 64, stage="observe", outcome="recorded", passed=1,
                            failed=0, not_evaluated=0, total=1, exit_code=0, token_name="their-ci")
    return rubric


def test_the_overview_and_the_audit_log_list_only_the_projects_rubrics(lead_client, lead, rubric, dataset,
                                                                       reviewer, theirs):
    run = evidence_run(rubric, dataset, lead, reviewer)
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)
    assert [row.rubric for row in promotion_overview(project=rubric.project)] == [rubric]
    assert set(rubric_events(project=rubric.project)) == set(RubricEvent.objects.filter(rubric=rubric))

    overview = lead_client.get(reverse("judges:promotion_overview", args=[TEST_PROJECT])).text
    assert "Their" not in overview and "their-ci" not in overview
    audit = lead_client.get(reverse("judges:audit_log", args=[TEST_PROJECT])).text
    assert REASON in audit and "Their own reason." not in audit
    # Filtering by the slug both projects use still shows only this project's entries.
    audit = lead_client.get(reverse("judges:audit_log", args=[TEST_PROJECT]), {"rubric": "return-policy"}).text
    assert REASON in audit and "Their own reason." not in audit


def test_the_rubric_page_and_its_ci_results_are_the_projects_own(lead_client, rubric, theirs):
    page = lead_client.get(reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])).text
    assert rubric.name in page or rubric.slug in page
    assert "Their secret criteria." not in page and "their-ci" not in page
    their_result = CiResult.objects.get(rubric=theirs)
    url = reverse("judges:promotion_ci_result", args=[TEST_PROJECT, rubric.slug, their_result.pk])
    assert lead_client.get(url).status_code == 404


@pytest.mark.parametrize("name", ["promotion_overview", "audit_log"])
def test_a_lead_of_another_project_gets_404_on_its_lists(client, other_lead, rubric, name):
    client.force_login(other_lead)
    assert client.get(reverse(f"judges:{name}", args=[TEST_PROJECT])).status_code == 404


@pytest.mark.parametrize("name", ["promotion_rubric", "promotion_promote", "promotion_demote", "promotion_renew",
                                  "promotion_thresholds", "promotion_release", "promotion_observe",
                                  "promotion_drift", "traffic_set"])
def test_a_lead_of_another_project_gets_404_and_a_reviewer_403_on_a_rubrics_pages(client, other_lead, reviewer,
                                                                                  rubric, name):
    url = reverse(f"judges:{name}", args=[TEST_PROJECT, rubric.slug])
    data = {"to_stage": "observe", "reason": "x", "min_cases": 1}
    client.force_login(other_lead)
    assert client.post(url, data).status_code == 404
    client.force_login(reviewer)
    assert client.post(url, data).status_code == 403
    rubric.refresh_from_db()
    assert rubric.stage == "draft" and not RubricEvent.objects.filter(rubric=rubric).exists()


def test_the_instance_admin_leads_every_project(client, admin_user, rubric, theirs):
    client.force_login(admin_user)
    assert client.get(reverse("judges:promotion_rubric", args=["shopnest", theirs.slug])).status_code == 200
    assert client.get(reverse("judges:promotion_overview", args=[TEST_PROJECT])).status_code == 200


def test_evidence_over_another_projects_dataset_is_refused_and_never_offered(lead, rubric, reviewer,
                                                                             other_project):
    elsewhere = Dataset.objects.create(project=other_project, slug="their-data", name="Theirs")
    run = evidence_run(rubric, elsewhere, lead, reviewer, prefix="elsewhere")
    assert run not in candidate_runs(rubric=rubric)  # the forms' evidence menus never offer it
    with pytest.raises(PromotionError, match="judged a dataset of another project") as refused:
        rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)
    assert "their-data" not in str(refused.value)  # the refusal names nothing of the other project
    rubric.refresh_from_db()
    assert rubric.stage == "draft" and not RubricEvent.objects.exists()


def test_only_a_lead_of_the_rubrics_project_or_the_admin_changes_its_promotion(lead, rubric, dataset, reviewer,
                                                                                other_lead, admin_user):
    run = evidence_run(rubric, dataset, lead, reviewer)
    for stranger in (other_lead, reviewer):  # a lead elsewhere, a reviewer here
        with pytest.raises(PromotionError, match="Only a lead of return-policy's project"):
            rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=stranger)
        with pytest.raises(PromotionError, match="Only a lead"):
            rubric_thresholds_change(rubric=rubric, reason=REASON, by=stranger, min_cases=10)
    assert not RubricEvent.objects.exists()
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=admin_user)
    with pytest.raises(PromotionError, match="Only a lead"):
        rubric_demote(rubric=rubric, to_stage="draft", reason=REASON, by=other_lead)
    rubric_demote(rubric=rubric, to_stage="draft", reason=REASON, by=lead)
    assert list(RubricEvent.objects.order_by("pk").values_list("kind", "by__username")) == [
        ("promote", "ada"), ("demote", "lena")]
