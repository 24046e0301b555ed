"""A run's report and its comparisons are its project's (docs/projects.md): another project's lead gets 404 on
every report page, as for a run that does not exist; the compare menu offers the project's runs only; the report
API answers a token of the run's project only, with the words it gives for an unknown run."""

import pytest
from django.urls import reverse

from evalhub.models import ApiToken, Scope
from labeling.models import LabelRequest
from tests.conftest import TEST_PROJECT
from tests.judges.helpers import project_world

REPORT_PAGES = [
    ("judges:run_report", "get"), ("judges:run_agreement", "get"), ("judges:run_send_contested", "post"),
]


@pytest.fixture
def ours(project, lead):
    return project_world(project, lead)


@pytest.fixture
def theirs(other_project, other_lead):
    return project_world(other_project, other_lead)


@pytest.mark.parametrize("name, method", REPORT_PAGES)
def test_another_projects_lead_gets_404_for_a_report(client, ours, theirs, other_lead, name, method):
    client.force_login(other_lead)
    assert getattr(client, method)(reverse(name, args=[TEST_PROJECT, ours.run.pk])).status_code == 404
    mine = getattr(client, method)(reverse(name, args=[theirs.project.slug, ours.run.pk]))
    missing = getattr(client, method)(reverse(name, args=[theirs.project.slug, 999999]))
    assert mine.status_code == missing.status_code == 404
    assert not LabelRequest.objects.exists()


@pytest.mark.parametrize("name, method", REPORT_PAGES)
def test_a_lead_gets_404_for_another_projects_report(lead_client, theirs, name, method):
    assert getattr(lead_client, method)(reverse(name, args=[TEST_PROJECT, theirs.run.pk])).status_code == 404


def test_the_compare_page_knows_only_the_projects_runs(lead_client, ours, theirs):
    url = reverse("judges:run_compare", args=[TEST_PROJECT])
    assert [run.pk for run in lead_client.get(url).context["choices"]] == [ours.run.pk]
    assert lead_client.get(url, {"a": ours.run.pk, "b": theirs.run.pk}).status_code == 404
    assert lead_client.get(url, {"a": theirs.run.pk, "b": ours.run.pk}).status_code == 404
    assert lead_client.get(url, {"a": ours.run.pk, "b": ours.run.pk}).status_code == 200


def _get(client, run_id: int, token: str):
    return client.get(reverse("judges:api_run_report", args=[run_id]), headers={"Authorization": f"Bearer {token}"})


def test_the_report_api_answers_only_for_the_tokens_project(client, ours, theirs, lead, other_lead):
    their_token = ApiToken.issue(project=theirs.project, name="ci", scopes=[Scope.RUNS_READ], created_by=other_lead)[1]
    our_token = ApiToken.issue(project=ours.project, name="ci", scopes=[Scope.RUNS_READ], created_by=lead)[1]

    refused, unknown = _get(client, ours.run.pk, their_token), _get(client, 999999, their_token)
    assert refused.status_code == unknown.status_code == 404
    assert refused.json() == {"error": f"No run {ours.run.pk}."}  # the words of a run that does not exist
    assert _get(client, theirs.run.pk, their_token).status_code == 200
    assert _get(client, ours.run.pk, our_token).json()["run"] == ours.run.pk
