"""A run's bias probes are its project's (docs/projects.md): another project's lead gets 404 for the probes panel
and cannot start probes of a run they do not own, under either project's address."""

from django.urls import reverse

from judges.models import Run
from tests.conftest import TEST_PROJECT

HTMX = {"HX-Request": "true"}


def test_another_projects_lead_gets_404_for_the_probes(client, our_world, their_world, other_lead):
    client.force_login(other_lead)
    for slug in (TEST_PROJECT, their_world.project.slug):
        panel = client.get(reverse("judges:probes_panel", args=[slug, our_world.run.pk]), headers=HTMX)
        assert panel.status_code == 404
        started = client.post(reverse("judges:probes_start", args=[slug, our_world.run.pk]), {"kinds": ["verbosity"]})
        assert started.status_code == 404
    assert not Run.objects.filter(parent=our_world.run).exists()


def test_a_lead_gets_404_for_another_projects_probes(lead_client, their_world):
    url = reverse("judges:probes_panel", args=[TEST_PROJECT, their_world.run.pk])
    assert lead_client.get(url, headers=HTMX).status_code == 404
    assert lead_client.post(reverse("judges:probes_start", args=[TEST_PROJECT, their_world.run.pk]),
                            {"kinds": ["verbosity"]}).status_code == 404
