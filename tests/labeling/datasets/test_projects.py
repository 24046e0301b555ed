"""The dataset pages of a project show, choose among and change that project's objects only: a member of another
project gets 404 for every one of them, a slug of another project is unknown here, and the forms offer nothing of
another project's (docs/projects.md)."""

import re

import pytest
from django.urls import reverse

from evalhub.models import Role
from labeling.datasets.services import dataset_set_policies
from labeling.importing.cases import cases_import_objects
from labeling.models import Case, Dataset, DatasetEvent, Label, LabelingRefused, Rubric
from labeling.policies.services import policy_write
from tests.conftest import TEST_PROJECT, make_user

pytestmark = pytest.mark.django_db

OTHER = "shopnest"


@pytest.fixture
def stocked(dataset, rubric, reviewer):
    """The store's dataset with a case labeled by its reviewer."""
    cases_import_objects(dataset=dataset, objects=[{"external_id": "c1", "input": "store question", "output": "a"}])
    case = Case.objects.get()
    Label.objects.create(case=case, rubric=rubric, reviewer=reviewer, verdict="pass", content_hash=case.content_hash)
    return dataset


@pytest.fixture
def theirs(other_lead) -> Dataset:
    """Another project's dataset, rubric and policy of slugs the store does not have."""
    project = other_lead.memberships.get().project
    Rubric.objects.create(project=project, slug="their-rubric", name="THEIR RUBRIC?", criteria="c")
    policy_write(project=project, slug="their-policy", text="Their policy.", by=other_lead)
    return Dataset.objects.create(project=project, slug="their-data", name="THEIR DATA")


def pages(slug: str, project: str = TEST_PROJECT) -> list[tuple[str, str, dict]]:
    """(method, url, data) of every dataset page of `project` for the dataset `slug`."""
    def url(name, *args):
        return reverse(f"labeling:{name}", args=[project, *args])

    return [
        ("get", url("dataset_list"), {}),
        ("get", url("dataset_create"), {}),
        ("post", url("dataset_create"), {"slug": "made-by-a-stranger", "name": "x"}),
        ("get", url("dataset_detail", slug), {}),
        ("get", url("dataset_import", slug), {}),
        ("post", url("dataset_import", slug), {"kind": "cases"}),
        ("post", url("dataset_kinds", slug), {"set_kind": "good", "scope": "filtered"}),
        ("post", url("dataset_redaction", slug), {"redact": ["email"]}),
        ("post", url("dataset_redaction", slug), {"action": "apply"}),
        ("post", url("dataset_policies", slug), {}),
        ("get", url("dataset_export", slug, "cases"), {}),
        ("get", url("dataset_export", slug, "labels") + "?rubric=return-policy", {}),
        ("get", url("dataset_export", slug, "report"), {}),
    ]


def test_a_lead_of_another_project_gets_404_on_every_dataset_page(client, stocked, other_lead):
    client.force_login(other_lead)
    for method, url, data in pages(stocked.slug):
        response = getattr(client, method)(url, data)
        assert response.status_code == 404, (method, url, response.status_code)
        assert b"store question" not in response.content
    # Their own project's pages do not know the store's dataset either.
    for method, url, data in pages(stocked.slug, OTHER)[3:]:
        assert getattr(client, method)(url, data).status_code == 404, (method, url)
    assert not DatasetEvent.objects.exists() and not Dataset.objects.filter(slug="made-by-a-stranger").exists()
    assert Case.objects.get().kind == ""


def test_a_reviewer_of_another_project_assigned_by_mistake_still_gets_404(client, stocked, other_project):
    stranger = make_user("sam", role=Role.REVIEWER, project=other_project)
    stocked.reviewers.add(stranger)  # the admin refuses this; the door does not rely on it
    client.force_login(stranger)
    assert client.get(reverse("labeling:case_detail", args=[TEST_PROJECT, Case.objects.get().pk])).status_code == 404
    assert client.get(reverse("labeling:dataset_detail", args=[TEST_PROJECT, stocked.slug])).status_code == 404


def test_a_slug_of_another_project_is_404_for_a_lead_here(lead_client, theirs):
    for method, url, data in pages(theirs.slug)[3:]:
        response = getattr(lead_client, method)(url, data)
        assert response.status_code == 404, (method, url, response.status_code)
    assert not DatasetEvent.objects.exists()


def test_the_list_and_the_page_show_and_offer_the_projects_objects_only(lead_client, stocked, theirs, lead):
    policy_write(project=stocked.project, slug="returns", text="Ours.", by=lead)

    listing = lead_client.get(reverse("labeling:dataset_list", args=[TEST_PROJECT]))
    assert [d.slug for d in listing.context["datasets"]] == [stocked.slug]
    response = lead_client.get(reverse("labeling:dataset_detail", args=[TEST_PROJECT, stocked.slug]))
    body = response.content.decode()
    assert [r.slug for r in response.context["all_rubrics"]] == ["return-policy"]
    assert [r.slug for r in response.context["rubrics"]] == ["return-policy"]
    assert re.findall(r'name="policies" value="([\w-]+)"', body) == ["returns"]
    for hidden in ("their-rubric", "THEIR RUBRIC", "their-policy", "their-data", "THEIR DATA"):
        assert hidden not in body, hidden
    page = lead_client.get(reverse("labeling:dataset_import", args=[TEST_PROJECT, stocked.slug])).content.decode()
    assert 'value="return-policy"' in page and "their-rubric" not in page


def test_a_policy_or_rubric_of_another_project_cannot_be_chosen(lead_client, lead, stocked, theirs):
    url = reverse("labeling:dataset_policies", args=[TEST_PROJECT, stocked.slug])
    response = lead_client.post(url, {"policies": ["their-policy"]}, follow=True)
    assert "Choose among the policy documents shown." in response.content.decode()
    with pytest.raises(LabelingRefused, match="No policy document their-policy"):
        dataset_set_policies(dataset=stocked, slugs=["their-policy"], by=lead)
    stocked.refresh_from_db()
    assert stocked.policies == []

    upload = lead_client.post(reverse("labeling:dataset_import", args=[TEST_PROJECT, stocked.slug]),
                              {"kind": "labels", "labels-rubric": "their-rubric"})
    assert "rubric" in upload.context["label_form"].errors
    export = reverse("labeling:dataset_export", args=[TEST_PROJECT, stocked.slug, "labels"])
    assert lead_client.get(export, {"rubric": "their-rubric"}).status_code == 404


def test_the_exports_hold_the_projects_data_only(lead_client, stocked, other_project):
    twin = Dataset.objects.create(project=other_project, slug=stocked.slug, name="Twin")
    cases_import_objects(dataset=twin, objects=[{"external_id": "t1", "input": "shopnest question", "output": "b"}])
    twin_rubric = Rubric.objects.create(project=other_project, slug="return-policy", name="Theirs", criteria="")
    case = twin.cases.get()
    Label.objects.create(case=case, rubric=twin_rubric, reviewer=make_user("sam", project=other_project),
                         verdict="fail", content_hash=case.content_hash)

    for kind, query in (("cases", {}), ("labels", {"rubric": "return-policy"}), ("report", {})):
        response = lead_client.get(reverse("labeling:dataset_export", args=[TEST_PROJECT, stocked.slug, kind]), query)
        text = b"".join(response.streaming_content).decode()
        assert "c1" in text and "t1" not in text and "shopnest" not in text and "sam" not in text, kind


def test_a_slug_is_unique_within_the_project_only_and_others_are_not_revealed(lead_client, dataset, theirs):
    url = reverse("labeling:dataset_create", args=[TEST_PROJECT])

    taken = lead_client.post(url, {"slug": dataset.slug, "name": "x"})
    assert taken.context["form"].errors["slug"] == [
        "This project has a dataset 'store-support' already: choose another slug."]
    created = lead_client.post(url, {"slug": theirs.slug, "name": "Ours too"})
    assert created.status_code == 302
    assert sorted(Dataset.objects.filter(slug=theirs.slug).values_list("project__slug", flat=True)) == [
        OTHER, TEST_PROJECT]
