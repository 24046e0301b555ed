"""Leads' pages and writes keep projects apart (docs/projects.md): a lead of another project is a stranger here (404
on the pages, refused by the services), a slug names this project's dataset or rubric only, and the disputes
counted are this project's."""

import pytest
from django.test import Client
from django.urls import reverse

from evalhub.models import Role
from labeling.disputes import services
from labeling.disputes.selectors import cases_with_human_verdict, disputes_by_queue
from labeling.models import Adjudication, CaseTally, LabelingRefused, LabelRequest
from tests.conftest import TEST_PROJECT, make_user
from tests.labeling.queue_helpers import give_label, make_case, make_queue


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def tie(dataset, rubric, external_id: str = "tie"):
    """A case whose two labels disagree: an open dispute."""
    case = make_case(dataset, external_id)
    give_label(case, rubric, make_user(f"{external_id}-a", project=dataset.project), "pass")
    give_label(case, rubric, make_user(f"{external_id}-b", project=dataset.project), "fail")
    return case


@pytest.fixture
def shop(other_project):
    """Another project's dataset and rubric, with the very slugs of the tests' own, and one open dispute."""
    dataset, rubric = make_queue(other_project)
    tie(dataset, rubric, "shop-tie")
    return dataset, rubric


def leads_pages(dataset, rubric, case) -> list[tuple[str, str]]:
    """(method, url) of every lead's page of the tests' project about this dataset, rubric and case."""
    args = [TEST_PROJECT, dataset.slug, rubric.slug]
    return [
        ("get", reverse("labeling:disputes_index", args=[TEST_PROJECT])),
        ("get", reverse("labeling:dataset_rubric", args=args)),
        ("get", reverse("labeling:disputes", args=args)),
        ("post", reverse("labeling:adjudicate", args=[*args, case.pk])),
        ("post", reverse("labeling:request_label", args=[*args, case.pk])),
    ]


def test_a_lead_of_another_project_gets_404_on_every_leads_page(other_lead, dataset, rubric):
    case = tie(dataset, rubric)
    client = client_of(other_lead)
    for method, url in leads_pages(dataset, rubric, case):
        response = getattr(client, method)(url, {"verdict": "pass"} if method == "post" else {})
        assert response.status_code == 404, url
    assert not Adjudication.objects.exists() and not LabelRequest.objects.exists()


def test_a_rubric_or_case_of_another_project_is_404_on_the_leads_pages(lead_client, dataset, rubric, other_project):
    dataset_there, foreign_rubric = make_queue(other_project, slug="shop-data", rubric_slug="shop-tone")
    foreign_case = tie(dataset_there, foreign_rubric, "shop-tie")
    ours = tie(dataset, rubric)
    # This project's dataset with the other's rubric (its slug exists nowhere here)...
    for method, url in leads_pages(dataset, foreign_rubric, ours)[1:]:
        assert getattr(lead_client, method)(url, {"verdict": "pass"}).status_code == 404, url
    # ...and this project's dataset and rubric with the other's case.
    for _, url in leads_pages(dataset, rubric, foreign_case)[3:]:
        assert lead_client.post(url, {"verdict": "pass"}).status_code == 404, url
    assert not Adjudication.objects.exists() and not LabelRequest.objects.exists()


def test_the_same_slugs_open_this_projects_dataset_and_rubric(lead_client, dataset, rubric, shop):
    shop_dataset, shop_rubric = shop
    ours = tie(dataset, rubric)
    args = [TEST_PROJECT, dataset.slug, rubric.slug]
    response = lead_client.get(reverse("labeling:disputes", args=args))
    assert (response.context["dataset"], response.context["rubric"]) == (dataset, rubric)
    assert [case.pk for case in response.context["page"]] == [ours.pk]
    overview = lead_client.get(reverse("labeling:dataset_rubric", args=args))
    assert overview.context["counts"]["open"] == 1 and list(overview.context["rubrics"]) == [rubric]
    shop_case = shop_dataset.cases.get()
    assert lead_client.post(reverse("labeling:adjudicate", args=[*args, shop_case.pk]),
                            {"verdict": "pass"}).status_code == 404


def test_the_disputes_index_counts_only_the_projects_disputes(lead_client, dataset, rubric, other_project, shop):
    shop_dataset, shop_rubric = shop
    tie(dataset, rubric)
    response = lead_client.get(reverse("labeling:disputes_index", args=[TEST_PROJECT]))
    assert [(row["dataset"], row["rubric"], row["open"]) for row in response.context["queues"]] == [
        (dataset, rubric, 1)]
    assert list(response.context["datasets"]) == [dataset] and list(response.context["rubrics"]) == [rubric]
    assert [(row["dataset"], row["open"]) for row in disputes_by_queue(project=other_project)] == [(shop_dataset, 1)]


def test_a_lead_of_another_project_is_refused_by_the_services(dataset, rubric, other_project):
    """Even one who is a reviewer here: it is their role in the rubric's project that counts."""
    case = tie(dataset, rubric)
    stranger = make_user("otto", role=Role.LEAD, project=other_project)
    both = make_user("bea", role=Role.LEAD, project=other_project)
    both.memberships.create(project=dataset.project, role=Role.REVIEWER)
    for who in (stranger, both):
        with pytest.raises(LabelingRefused, match="Only the project's leads adjudicate"):
            services.adjudicate(case=case, rubric=rubric, verdict="pass", by=who)
        with pytest.raises(LabelingRefused, match="Only the project's leads request labels"):
            services.request_another_label(case=case, rubric=rubric, by=who)
        with pytest.raises(LabelingRefused, match="Only the project's leads request labels"):
            services.request_more_labels(case_ids=[case.pk], rubric=rubric, by=who, reason="contested")
    assert not Adjudication.objects.exists() and not LabelRequest.objects.exists()


def test_the_instance_admin_decides_in_any_project(admin_user, dataset, rubric):
    case = tie(dataset, rubric)
    assert services.adjudicate(case=case, rubric=rubric, verdict="fail", by=admin_user).decided_by == admin_user
    response = client_of(admin_user).post(reverse("labeling:request_label", args=[TEST_PROJECT, dataset.slug,
                                                                                  rubric.slug, case.pk]))
    assert response.status_code == 302 and LabelRequest.objects.filter(requested_by=admin_user).exists()


def test_a_rubric_is_never_applied_to_another_projects_case(lead, dataset, rubric, shop):
    shop_dataset, _ = shop
    theirs = shop_dataset.cases.get()
    with pytest.raises(LabelingRefused, match="another project"):
        services.adjudicate(case=theirs, rubric=rubric, verdict="pass", by=lead)
    with pytest.raises(LabelingRefused, match="another project"):
        services.request_another_label(case=theirs, rubric=rubric, by=lead)
    # Many at once: another project's case has no tally with this rubric, so it is passed over, counted nowhere.
    ours = tie(dataset, rubric)
    sent = services.request_more_labels(case_ids=[theirs.pk, ours.pk], rubric=rubric, by=lead, reason="contested")
    assert (sent.requested, sent.already) == (1, 0)
    assert set(LabelRequest.objects.values_list("case", flat=True)) == {ours.pk}
    assert not Adjudication.objects.exists()
    assert not CaseTally.objects.filter(case=theirs, rubric=rubric).exists()


def test_human_verdicts_of_a_rubric_cover_its_own_projects_cases_only(dataset, rubric, shop):
    ours = tie(dataset, rubric)
    assert list(cases_with_human_verdict(rubric=rubric).values_list("pk", flat=True)) == [ours.pk]
