"""A run's report and its comparisons are its project's (docs/projects.md): another project's lead gets 404 on
every report page, as for a run that does not exist; the compare menu offers the project's runs only; the report
API answers a token of the run's project only, with the words it gives for an unknown run."""

import pytest
from django.urls import reverse

from evalhub.models import ApiToken, Scope
from labeling.models import LabelRequest
from tests.conftest import TEST_PROJECT

REPORT_PAGES = [
    ("judges:run_report", "get"), ("judges:run_agreement", "get"), ("judges:run_send_contested", "post"),
]


@pytest.mark.parametrize("name, method", REPORT_PAGES)
def test_another_projects_lead_gets_404_for_a_report(client, our_world, their_world, other_lead, name, method):
    client.force_login(other_lead)
    assert getattr(client, method)(reverse(name, args=[TEST_PROJECT, our_world.run.pk])).status_code == 404
    mine = getattr(client, method)(reverse(name, args=[their_world.project.slug, our_world.run.pk]))
    missing = getattr(client, method)(reverse(name, args=[their_world.project.slug, 999999]))
    assert mine.status_code == missing.status_code == 404
    assert not LabelRequest.objects.exists()


@pytest.mark.parametrize("name, method", REPORT_PAGES)
def test_a_lead_gets_404_for_another_projects_report(lead_client, their_world, name, method):
    assert getattr(lead_client, method)(reverse(name, args=[TEST_PROJECT, their_world.run.pk])).status_code == 404


def test_the_compare_page_knows_only_the_projects_runs(lead_client, our_world, their_world):
    url = reverse("judges:run_compare", args=[TEST_PROJECT])
    assert [run.pk for run in lead_client.get(url).context["choices"]] == [our_world.run.pk]
    assert lead_client.get(url, {"a": our_world.run.pk, "b": their_world.run.pk}).status_code == 404
    assert lead_client.get(url, {"a": their_world.run.pk, "b": our_world.run.pk}).status_code == 404
    assert lead_client.get(url, {"a": our_world.run.pk, "b": our_world.run.pk}).status_code == 200


def _get(client, run_id: int, token: str):
    return client.get(reverse("judges:api_run_report", args=[run_id]), headers={"Authorization": f"Bearer {token}"})


def test_the_report_api_answers_only_for_the_tokens_project(client, our_world, their_world, lead, other_lead):
    their_token = ApiToken.issue(project=their_world.project, name="ci", scopes=[Scope.RUNS_READ],
                                 created_by=other_lead)[1]
    our_token = ApiToken.issue(project=our_world.project, name="ci", scopes=[Scope.RUNS_READ], created_by=lead)[1]

    refused, unknown = _get(client, our_world.run.pk, their_token), _get(client, 999999, their_token)
    assert refused.status_code == unknown.status_code == 404
    assert refused.json() == {"error": f"No run {our_world.run.pk}."}  # the words of a run that does not exist
    assert _get(client, their_world.run.pk, their_token).status_code == 200
    assert _get(client, our_world.run.pk, our_token).json()["run"] == our_world.run.pk
