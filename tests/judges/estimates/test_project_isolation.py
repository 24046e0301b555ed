"""A run's audit sample and pass rate are its project's (docs/projects.md): another project's lead cannot draw a
sample of it (404), and the pass-rate API answers a token of the run's project only, with the words it gives
for an unknown run."""

from django.urls import reverse

from evalhub.models import ApiToken, Scope
from judges.models import AuditDraw
from tests.conftest import TEST_PROJECT


def test_another_projects_lead_cannot_draw_a_sample(client, our_world, their_world, other_lead):
    client.force_login(other_lead)
    for slug in (TEST_PROJECT, their_world.project.slug):
        response = client.post(reverse("judges:audit_sample_create", args=[slug, our_world.run.pk]),
                               {"size": 2, "method": "uniform"})
        assert response.status_code == 404
    assert not AuditDraw.objects.exists()


def test_the_pass_rate_api_answers_only_for_the_tokens_project(client, our_world, their_world, lead, other_lead):
    their_token = ApiToken.issue(project=their_world.project, name="ci", scopes=[Scope.RUNS_READ],
                                 created_by=other_lead)[1]
    auth = {"Authorization": f"Bearer {their_token}"}
    refused = client.get(reverse("judges:api_run_pass_rate", args=[our_world.run.pk]), headers=auth)
    unknown = client.get(reverse("judges:api_run_pass_rate", args=[999999]), headers=auth)
    assert refused.status_code == unknown.status_code == 404
    assert refused.json() == {"error": f"No run {our_world.run.pk}."}
    assert client.get(reverse("judges:api_run_pass_rate", args=[their_world.run.pk]), headers=auth).status_code == 200
