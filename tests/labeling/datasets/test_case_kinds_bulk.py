"""Leads set the calibration kind in bulk from the dataset page, and filter by it; the kind is not
judged content, so no run becomes stale and no label stops counting."""

import pytest
from django.urls import reverse

from labeling.importing.cases import cases_import_objects
from labeling.models import Case
from tests.conftest import TEST_PROJECT

pytestmark = pytest.mark.django_db


@pytest.fixture
def cases(dataset):
    cases_import_objects(dataset=dataset, objects=[
        {"external_id": f"c{i}", "input": "q", "output": "a", "category": "adversarial" if i < 3 else "policy"}
        for i in range(6)
    ])
    return list(Case.objects.order_by("pk"))


def kinds() -> dict[str, str]:
    return dict(Case.objects.values_list("external_id", "kind"))


def test_a_lead_sets_the_kind_of_ticked_cases_without_changing_content(lead_client, dataset, cases):
    before = {c.external_id: (c.content_hash, c.content_changed_at) for c in cases}
    response = lead_client.post(reverse("labeling:dataset_kinds", args=[TEST_PROJECT, dataset.slug]),
                                {"case": [cases[0].pk, cases[4].pk], "set_kind": "paraphrase", "scope": "ticked"})
    assert response.status_code == 302
    assert kinds() == {"c0": "paraphrase", "c1": "", "c2": "", "c3": "", "c4": "paraphrase", "c5": ""}
    assert {c.external_id: (c.content_hash, c.content_changed_at) for c in Case.objects.all()} == before


def test_a_lead_sets_every_case_the_filters_select_and_clears_a_kind(lead_client, dataset, cases):
    url = reverse("labeling:dataset_kinds", args=[TEST_PROJECT, dataset.slug])
    lead_client.post(url, {"scope": "filtered", "filter_query": "category=adversarial", "set_kind": "injection"})
    assert kinds() == {"c0": "injection", "c1": "injection", "c2": "injection", "c3": "", "c4": "", "c5": ""}
    lead_client.post(url, {"case": [cases[1].pk], "set_kind": "unset", "scope": "ticked"})
    assert kinds()["c1"] == ""


def test_it_filters_the_case_list_by_kind(lead_client, dataset, cases):
    Case.objects.filter(external_id__in=["c0", "c5"]).update(kind="good")
    url = reverse("labeling:dataset_detail", args=[TEST_PROJECT, dataset.slug])
    good = lead_client.get(url, {"kind": "good"}).context["page"].object_list
    assert [r["external_id"] for r in good] == ["c0", "c5"]
    unset = lead_client.get(url, {"kind": "unset"}).context["page"].paginator.count
    assert unset == 4


@pytest.mark.parametrize("data", [
    {"set_kind": "great", "case": ["1"]}, {"set_kind": "good"}, {"set_kind": "good", "case": ["x"]},
])
def test_it_refuses_a_bad_request_with_a_message(lead_client, dataset, cases, data):
    response = lead_client.post(reverse("labeling:dataset_kinds", args=[TEST_PROJECT, dataset.slug]), data, follow=True)
    assert response.status_code == 200 and set(kinds().values()) == {""}


def test_reviewers_may_not_set_kinds(reviewer_client, dataset, cases):
    url = reverse("labeling:dataset_kinds", args=[TEST_PROJECT, dataset.slug])
    assert reviewer_client.post(url, {"case": [cases[0].pk], "set_kind": "good"}).status_code == 403
    assert set(kinds().values()) == {""}


def test_cases_of_other_datasets_are_left_alone(lead_client, dataset, other_dataset, cases):
    url = reverse("labeling:dataset_kinds", args=[TEST_PROJECT, dataset.slug])
    cases_import_objects(dataset=other_dataset, objects=[{"external_id": "x", "input": "q", "output": "a"}])
    foreign = Case.objects.get(dataset=other_dataset)
    lead_client.post(url, {"case": [foreign.pk], "set_kind": "good", "scope": "ticked"})
    assert Case.objects.get(pk=foreign.pk).kind == "" and set(kinds().values()) == {""}
