"""Runs are their project's (docs/projects.md): another project's run is 404 on every run page, under either
project's address, exactly like a run that does not exist; the run list, the banner and the start form know only
the project's own; a run never pairs a rubric with another project's dataset."""

import io
import uuid

import pytest
from django.urls import reverse

from judges.models import Run
from judges.runs import services
from judges.runs.banners import banner_runs
from judges.runs.importing import judgments_import
from labeling.importing import Format, ImportRejected
from tests.conftest import TEST_PROJECT

# Every page of a run: (URL name, method, extra URL arguments after the run's id).
RUN_PAGES = [
    ("judges:run_detail", "get", []), ("judges:run_progress", "get", []), ("judges:run_cancel", "post", []),
    ("judges:run_retry", "post", []), ("judges:run_export", "get", ["jsonl"]),
]


@pytest.mark.parametrize("name, method, extra", RUN_PAGES)
def test_another_projects_lead_gets_404_for_a_run(client, our_world, other_lead, their_world, name, method, extra):
    client.force_login(other_lead)
    # Under our project's address: they are no member of it.
    assert getattr(client, method)(reverse(name, args=[TEST_PROJECT, our_world.run.pk, *extra])).status_code == 404
    # Under their own project's address: our run is no run of their_world, as one that does not exist.
    mine = getattr(client, method)(reverse(name, args=[their_world.project.slug, our_world.run.pk, *extra]))
    missing = getattr(client, method)(reverse(name, args=[their_world.project.slug, 999999, *extra]))
    assert mine.status_code == missing.status_code == 404
    our_world.run.refresh_from_db()
    assert our_world.run.status == Run.Status.FINISHED  # nothing cancelled or queued again


@pytest.mark.parametrize("name, method, extra", RUN_PAGES)
def test_a_lead_gets_404_for_another_projects_run_under_their_own_project(lead_client, their_world, name, method,
                                                                          extra):
    url = reverse(name, args=[TEST_PROJECT, their_world.run.pk, *extra])
    assert getattr(lead_client, method)(url).status_code == 404


def test_the_run_list_shows_only_the_projects_runs(lead_client, our_world, their_world):
    response = lead_client.get(reverse("judges:run_list", args=[TEST_PROJECT]))
    assert [run.pk for run in response.context["page"].object_list] == [our_world.run.pk]
    searched = lead_client.get(reverse("judges:run_list", args=[TEST_PROJECT]), {"q": f"#{their_world.run.pk}"})
    assert list(searched.context["page"].object_list) == []
    assert f"Run {their_world.run.pk}<" not in response.content.decode()


def test_the_banner_follows_only_the_projects_runs(lead_client, our_world, their_world):
    assert banner_runs([our_world.run.pk, their_world.run.pk], project=our_world.project) == [our_world.run]
    response = lead_client.get(reverse("judges:run_banner", args=[TEST_PROJECT]),
                               {"runs": f"{our_world.run.pk},{their_world.run.pk}"})
    assert [run.pk for run in response.context["runs"]] == [our_world.run.pk]


def test_the_start_form_offers_only_the_projects_datasets(lead_client, our_world, their_world):
    their_world.dataset.slug = "their-own-data"
    their_world.dataset.save(update_fields=["slug"])
    url = reverse("judges:run_create", args=[TEST_PROJECT, our_world.config.pk])
    page = lead_client.get(url).content.decode()
    assert 'value="store-support"' in page and "their-own-data" not in page
    posted = lead_client.post(url, {"dataset": "their-own-data", "repeats": 1, "concurrency": 1,
                                    "start_token": uuid.uuid4()})
    assert posted.status_code == 200 and "dataset" in posted.context["form"].errors
    assert not Run.objects.filter(dataset=their_world.dataset).exclude(pk=their_world.run.pk).exists()


def test_another_projects_config_cannot_be_started_here(lead_client, their_world):
    assert lead_client.get(reverse("judges:run_create", args=[TEST_PROJECT, their_world.config.pk])).status_code == 404


def test_starting_a_run_refuses_a_rubric_of_another_project(our_world, their_world, lead):
    with pytest.raises(services.RunError, match="its rubric belongs to another project"):
        services.run_start(config=our_world.config, dataset=their_world.dataset, repeats=1, concurrency=1,
                           spend_cap_usd=None, by=lead)
    assert Run.objects.count() == 2  # the two projects' own runs, nothing more


def test_importing_judgments_refuses_a_rubric_of_another_project(our_world, their_world, lead):
    rows = b'{"external_id": "c001", "repeat": 1, "verdict": "pass"}\n'
    with pytest.raises(ImportRejected) as refused:
        judgments_import(dataset=their_world.dataset, rubric=our_world.rubric, stream=io.BytesIO(rows),
                         fmt=Format.JSONL, source_name="j.jsonl", by=lead)
    assert "is not a rubric of the dataset store-support's project" in str(refused.value.errors[0].message)
    assert Run.objects.count() == 2

