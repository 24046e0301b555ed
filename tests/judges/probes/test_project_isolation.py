"""A run's bias probes are its project's (docs/projects.md): another project's lead gets 404 for the probes panel
and cannot start probes of a run they do not own, under either project's address."""

import pytest
from django.urls import reverse

from judges.models import Run
from tests.conftest import TEST_PROJECT
from tests.judges.helpers import project_world

HTMX = {"HX-Request": "true"}


@pytest.fixture
def ours(project, lead):
    return project_world(project, lead)


@pytest.fixture
def theirs(other_project, other_lead):
    return project_world(other_project, other_lead)


def test_another_projects_lead_gets_404_for_the_probes(client, ours, theirs, other_lead):
    client.force_login(other_lead)
    for slug in (TEST_PROJECT, theirs.project.slug):
        assert client.get(reverse("judges:probes_panel", args=[slug, ours.run.pk]), headers=HTMX).status_code == 404
        started = client.post(reverse("judges:probes_start", args=[slug, ours.run.pk]), {"kinds": ["verbosity"]})
        assert started.status_code == 404
    assert not Run.objects.filter(parent=ours.run).exists()


def test_a_lead_gets_404_for_another_projects_probes(lead_client, theirs):
    url = reverse("judges:probes_panel", args=[TEST_PROJECT, theirs.run.pk])
    assert lead_client.get(url, headers=HTMX).status_code == 404
    assert lead_client.post(reverse("judges:probes_start", args=[TEST_PROJECT, theirs.run.pk]),
                            {"kinds": ["verbosity"]}).status_code == 404
