"""The synthetic-cases form on the dataset page, the job it queues (a Celery task, run eagerly here) and the job's
page, polled until done; leads only."""

from decimal import Decimal

import pytest
from django.urls import reverse

from judges.models import ModelPrice, SynthesisJob
from judges.synthetic.services import synthesis_start, synthesis_work
from labeling.models import Case
from tests.conftest import TEST_PROJECT
from tests.judges.synthetic.helpers import (
    EDITOR_MODEL,
    SCRIPT,
    behavioral_config,
    return_policy,
    stand_in_editor,
    with_policies,
)

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


@pytest.fixture
def world(fake_provider, lead, dataset, rubric, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    return_policy(lead)
    ModelPrice.objects.create(model=EDITOR_MODEL, input_per_mtok=Decimal(1), output_per_mtok=Decimal(4),
                              updated_by=lead)
    fake_provider.control(model=EDITOR_MODEL, script=[SCRIPT])
    return {"dataset": with_policies(dataset, "returns"), "config": behavioral_config(rubric, lead)}


def form_data(world, **extra) -> dict:
    return {"n": 5, "types": ["adversarial", "near_miss", "ordinary"], "policies": ["returns"], "seed": 11,
            "editor_config": world["config"].pk, "editor_model": EDITOR_MODEL, **extra}


def test_a_lead_asks_from_the_dataset_page_and_follows_the_job(lead_client, world, django_capture_on_commit_callbacks):
    dataset = world["dataset"]
    page = lead_client.get(reverse("labeling:dataset_detail", args=[TEST_PROJECT, dataset.slug])).content.decode()
    assert 'data-testid="synthesis-form"' in page
    assert reverse("judges:synthesis_create", args=[TEST_PROJECT, dataset.slug]) in page

    with django_capture_on_commit_callbacks(execute=True):
        response = lead_client.post(reverse("judges:synthesis_create", args=[TEST_PROJECT, dataset.slug]),
                                    form_data(world))

    job = SynthesisJob.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("judges:synthesis_detail", args=[TEST_PROJECT, job.pk])
    assert (job.status, job.written, job.duplicates, job.seed, job.editor["model"]) == ("finished", 3, 1, 11,
                                                                                        EDITOR_MODEL)
    assert Case.objects.filter(dataset=dataset, output__isnull=True).count() == 3
    page = lead_client.get(response["Location"]).content.decode()
    assert 'data-testid="synthesis-written">3<' in page and 'data-testid="synthesis-duplicates">1<' in page
    assert "$0.0" in page and "at most $" in page  # the cost, and the estimate before it
    assert all(external_id in page for external_id in job.external_ids)
    # The polled partial stops the polling once the job is done.
    partial = lead_client.get(response["Location"], headers=HTMX)
    assert partial.status_code == 286 and b"<html" not in partial.content
    # The dataset page lists the request.
    page = lead_client.get(reverse("labeling:dataset_detail", args=[TEST_PROJECT, dataset.slug])).content.decode()
    assert "3 written, 1 duplicate dropped" in page


def test_a_request_that_cannot_be_made_shows_why_and_queues_nothing(lead_client, world):
    url = reverse("judges:synthesis_create", args=[TEST_PROJECT, world["dataset"].slug])
    response = lead_client.post(url, form_data(world, n=0))
    assert response.status_code == 200 and 'data-testid="error-summary"' in response.content.decode()
    response = lead_client.post(url, form_data(world, editor_model="   ", policies=[]))  # the dataset's own
    assert response.status_code == 302  # an empty model keeps the config's own; no named policy keeps the list
    with_policies(world["dataset"])
    response = lead_client.post(url, form_data(world, policies=[]))
    assert "lists no policy document" in response.content.decode()
    assert SynthesisJob.objects.count() == 1


def test_reviewers_cannot_ask_or_see_a_job(reviewer_client, world, lead):
    url = reverse("judges:synthesis_create", args=[TEST_PROJECT, world["dataset"].slug])
    assert reviewer_client.post(url, form_data(world)).status_code == 403
    assert not SynthesisJob.objects.exists()
    job = SynthesisJob.objects.create(dataset=world["dataset"], n=1, types=["ordinary"], seed=1, prompt_version="x",
                                      editor={"model": EDITOR_MODEL}, created_by=lead)
    assert reviewer_client.get(reverse("judges:synthesis_detail", args=[TEST_PROJECT, job.pk])).status_code == 403


def test_the_editors_text_in_a_failure_renders_as_text(lead_client, world, lead, fake_provider):
    fake_provider.control(model=EDITOR_MODEL, script=[{"cases": [
        {"input": "q", "type": "<script>alert(1)</script>", "expected_behaviour": "b", "category": None}]}])
    job = synthesis_start(dataset=world["dataset"], n=1, types=["ordinary"], editor=stand_in_editor(), by=lead,
                          queue=False)
    synthesis_work(job_id=job.pk)

    page = lead_client.get(reverse("judges:synthesis_detail", args=[TEST_PROJECT, job.pk])).content.decode()
    assert 'data-testid="synthesis-error">Nothing was written.' in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert(1)" not in page


# ---- projects ---------------------------------------------------------------------------------------------


@pytest.fixture
def theirs(other_project, other_lead):
    """Another project's judge config and policy document: never an editor or a source here."""
    from labeling.models import Rubric
    from labeling.policies.services import policy_write

    rubric = Rubric.objects.create(project=other_project, slug="their-rubric", name="Theirs?", criteria="Theirs.")
    policy_write(project=other_project, slug="their-policy", text="Their secret policy.", by=other_lead)
    return behavioral_config(rubric, other_lead)


def test_the_form_offers_only_the_projects_editors_and_policies(lead_client, world, theirs):
    page = lead_client.get(reverse("judges:synthesis_create", args=[TEST_PROJECT, world["dataset"].slug])).text
    assert f'value="{world["config"].pk}"' in page and "their-rubric" not in page and "their-policy" not in page
    response = lead_client.post(reverse("judges:synthesis_create", args=[TEST_PROJECT, world["dataset"].slug]),
                                form_data(world, editor_config=theirs.pk, policies=["their-policy"]))
    assert response.status_code == 200 and not SynthesisJob.objects.exists()  # both refused by the form's choices


def test_another_projects_dataset_and_job_are_404(client, world, lead, other_lead):
    job = synthesis_start(dataset=world["dataset"], n=3, types=["ordinary"], editor=stand_in_editor(),
                          by=lead, queue=False)
    client.force_login(other_lead)
    for project in (TEST_PROJECT, "shopnest"):
        assert client.get(reverse("judges:synthesis_detail", args=[project, job.pk])).status_code == 404
        url = reverse("judges:synthesis_create", args=[project, world["dataset"].slug])
        assert client.post(url, form_data(world)).status_code == 404
    assert SynthesisJob.objects.count() == 1


def test_the_service_refuses_another_projects_editor(world, theirs):
    from judges.synthetic.services import SynthesisError, synthesis_editor

    with pytest.raises(SynthesisError, match=f"No judge config {theirs.pk} in project store"):
        synthesis_editor(project=world["dataset"].project, config=theirs)
    # Without a config named, the project's own newest config with a model writes, however new another's is.
    assert synthesis_editor(project=world["dataset"].project).to_dict() == synthesis_editor(
        project=world["dataset"].project, config=world["config"]).to_dict()
