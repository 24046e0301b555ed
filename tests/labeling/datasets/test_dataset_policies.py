"""A dataset's list of policy documents: set by a lead on the dataset page, audited like its redaction, refused
for a policy that does not exist and for a reviewer."""

import re

import pytest
from django.urls import reverse

from labeling.datasets.services import dataset_set_policies
from labeling.models import DatasetEvent, LabelingRefused
from labeling.policies.services import policy_write
from tests.conftest import TEST_PROJECT, store_project

pytestmark = pytest.mark.django_db


@pytest.fixture
def policies(lead):
    policy_write(project=store_project(), slug="returns", text="Refunds within 30 days.", by=lead)
    policy_write(project=store_project(), slug="tools", text="Look the order up before answering.", by=lead)


def test_a_lead_sets_the_policies_on_the_dataset_page_and_it_is_audited(lead_client, lead, dataset, policies):
    url = reverse("labeling:dataset_policies", args=[TEST_PROJECT, dataset.slug])

    response = lead_client.post(url, {"policies": ["tools", "returns"]})

    assert response.status_code == 302
    dataset.refresh_from_db()
    assert dataset.policies == ["returns", "tools"]
    event = DatasetEvent.objects.get()
    assert (event.kind, event.by, event.detail) == ("policies_set", lead, "policy documents returns, tools (was none)")
    page = lead_client.get(reverse("labeling:dataset_detail", args=[TEST_PROJECT, dataset.slug])).content.decode()
    assert "policy documents returns, tools (was none)" in page
    assert set(re.findall(r'name="policies" value="([\w-]+)"[^>]*checked', page)) == {"returns", "tools"}
    # The same list again changes nothing and logs nothing; an empty list is a change.
    lead_client.post(url, {"policies": ["returns", "tools"]})
    assert DatasetEvent.objects.count() == 1
    lead_client.post(url, {})
    dataset.refresh_from_db()
    assert dataset.policies == [] and DatasetEvent.objects.count() == 2


def test_an_unknown_policy_is_refused_and_nothing_changes(lead_client, lead, dataset, policies):
    response = lead_client.post(reverse("labeling:dataset_policies", args=[TEST_PROJECT, dataset.slug]),
                                {"policies": ["returns", "no-such"]}, follow=True)
    assert "Choose among the policy documents shown." in response.content.decode()
    with pytest.raises(LabelingRefused, match="No policy document no-such"):
        dataset_set_policies(dataset=dataset, slugs=["no-such"], by=lead)
    dataset.refresh_from_db()
    assert dataset.policies == [] and not DatasetEvent.objects.exists()


def test_reviewers_cannot_set_the_policies(reviewer_client, dataset, policies):
    response = reviewer_client.post(reverse("labeling:dataset_policies", args=[TEST_PROJECT, dataset.slug]),
                                    {"policies": ["returns"]})
    assert response.status_code == 403
    dataset.refresh_from_db()
    assert dataset.policies == [] and not DatasetEvent.objects.exists()
