"""The queue keeps projects apart (docs/projects.md): a queue is a dataset and a rubric of one project, a slug names
that project's object only, and a reviewer's pages, counts and history never show another project's."""

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from evalhub.models import Role
from labeling.models import CaseTally, Label, LabelingRefused, Rubric, Skip
from labeling.queue import services
from labeling.queue.selectors import queues_for
from tests.conftest import TEST_PROJECT, make_user
from tests.labeling.queue_helpers import HTMX, give_label, label_form, make_case, make_queue, queue_url


@pytest.fixture
def shop(other_project):
    """Another project's queue with the very slugs of the tests' own (store-support, return-policy)."""
    return make_queue(other_project)


@pytest.fixture
def mia(dataset, shop):
    """A reviewer of both projects, assigned to the dataset of each."""
    user = make_user("mia")
    shop_dataset, _ = shop
    user.memberships.create(project=shop_dataset.project, role=Role.REVIEWER)
    dataset.reviewers.add(user)
    shop_dataset.reviewers.add(user)
    return user


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_reviewer_of_one_project_gets_404_on_every_queue_page_of_another(reviewer_client, reviewer, shop):
    shop_dataset, shop_rubric = shop
    case = make_case(shop_dataset, "theirs")
    other = shop_dataset.project.slug
    for url in (reverse("labeling:queue_start", args=[other]), reverse("labeling:history", args=[other]),
                queue_url(shop_dataset, shop_rubric), queue_url(shop_dataset, shop_rubric, "queue_progress")):
        assert reviewer_client.get(url).status_code == 404, url
    for name, form in (("queue_label", label_form(case)), ("queue_skip", {"case": case.pk}),
                       ("queue_undo", {"label": 1})):
        assert reviewer_client.post(queue_url(shop_dataset, shop_rubric, name), form).status_code == 404, name
    assert not Label.objects.exists() and not Skip.objects.exists()


def test_a_rubric_of_another_project_is_404_even_with_a_valid_dataset(reviewer_client, dataset, other_project):
    _, foreign = make_queue(other_project, slug="shop-data", rubric_slug="shop-tone")
    case = make_case(dataset, "ours")
    assert reviewer_client.get(queue_url(dataset, foreign)).status_code == 404
    for name, form in (("queue_label", label_form(case)), ("queue_skip", {"case": case.pk})):
        assert reviewer_client.post(queue_url(dataset, foreign, name), form).status_code == 404, name
    assert reviewer_client.get(reverse("labeling:history", args=[TEST_PROJECT]), {"rubric": "shop-tone"}
                               ).status_code == 404
    assert not Label.objects.exists() and not Skip.objects.exists()


def test_the_same_slugs_in_two_projects_open_each_projects_own_queue(mia, dataset, rubric, shop):
    shop_dataset, shop_rubric = shop
    ours, theirs = make_case(dataset, "ours"), make_case(shop_dataset, "theirs")
    client = client_of(mia)
    assert queue_url(dataset, rubric) != queue_url(shop_dataset, shop_rubric)  # same slugs, other project
    response = client.get(queue_url(dataset, rubric))
    assert (response.context["dataset"], response.context["rubric"], response.context["case"]) == (dataset, rubric,
                                                                                                   ours)
    response = client.get(queue_url(shop_dataset, shop_rubric))
    assert (response.context["dataset"], response.context["rubric"], response.context["case"]) == (
        shop_dataset, shop_rubric, theirs)
    # A case of the other project, asked for through this project's queue: no such case here.
    assert client.get(queue_url(dataset, rubric) + f"?case={theirs.pk}").status_code == 404
    assert client.post(queue_url(dataset, rubric, "queue_label"), label_form(theirs), headers=HTMX).status_code == 404
    client.post(queue_url(dataset, rubric, "queue_label"), label_form(ours), headers=HTMX)
    assert list(Label.objects.values_list("case", "rubric")) == [(ours.pk, rubric.pk)]


def test_a_reviewer_assigned_in_one_project_only_gets_404_on_the_same_slug_in_the_other(reviewer, dataset, shop):
    shop_dataset, shop_rubric = shop
    reviewer.memberships.create(project=shop_dataset.project, role=Role.REVIEWER)  # a member there, not assigned
    make_case(shop_dataset, "theirs")
    client = client_of(reviewer)
    assert client.get(queue_url(shop_dataset, shop_rubric)).status_code == 404
    assert client.get(reverse("labeling:queue_start", args=[shop_dataset.project.slug])).context["queues"] == []


def test_the_label_page_lists_only_the_projects_pairs(mia, lead, dataset, other_dataset, rubric, shop):
    shop_dataset, shop_rubric = shop
    tone = Rubric.objects.create(project=rubric.project, slug="tone", name="Polite?", criteria="…")
    ours, theirs = make_case(dataset, "ours"), make_case(shop_dataset, "theirs")
    give_label(theirs, shop_rubric, mia)  # counted in the other project only

    def pairs(user, project_slug) -> list[tuple]:
        queues = client_of(user).get(reverse("labeling:queue_start", args=[project_slug])).context["queues"]
        return [(q["dataset"].pk, q["rubric"].pk, q["mine"], q["left"]) for q in queues]

    assert pairs(mia, TEST_PROJECT) == [(dataset.pk, rubric.pk, 0, 1), (dataset.pk, tone.pk, 0, 1)]
    assert pairs(mia, shop_dataset.project.slug) == [(shop_dataset.pk, shop_rubric.pk, 1, 0)]
    # A lead: every dataset of the project with every rubric of it, never another project's rubric.
    assert pairs(lead, TEST_PROJECT) == [
        (other_dataset.pk, rubric.pk, 0, 0), (other_dataset.pk, tone.pk, 0, 0),
        (dataset.pk, rubric.pk, 0, 1), (dataset.pk, tone.pk, 0, 1),
    ]
    assert ours.pk not in {t.case_id for t in CaseTally.objects.filter(rubric=shop_rubric)}


def test_the_instance_admin_labels_in_any_project_as_its_lead(admin_user, dataset, rubric, shop):
    shop_dataset, shop_rubric = shop
    client = client_of(admin_user)
    queues = client.get(reverse("labeling:queue_start", args=[shop_dataset.project.slug])).context["queues"]
    assert [(q["dataset"], q["rubric"]) for q in queues] == [(shop_dataset, shop_rubric)]
    assert queues_for(project=dataset.project, user=admin_user, role=Role.LEAD)[0]["rubric"] == rubric


def test_history_shows_only_the_projects_labels(mia, dataset, rubric, shop):
    shop_dataset, shop_rubric = shop
    mine = give_label(make_case(dataset, "ours"), rubric, mia, note="OUR-NOTE")
    give_label(make_case(shop_dataset, "theirs"), shop_rubric, mia, note="THEIR-NOTE")
    client = client_of(mia)
    url = reverse("labeling:history", args=[TEST_PROJECT])
    response = client.get(url)
    assert [label.pk for label in response.context["page"]] == [mine.pk]
    assert "THEIR-NOTE" not in response.content.decode()
    # The same slugs narrow to this project's dataset and rubric.
    narrowed = client.get(url, {"dataset": dataset.slug, "rubric": rubric.slug})
    assert (narrowed.context["dataset"], narrowed.context["rubric"]) == (dataset, rubric)
    assert [label.pk for label in narrowed.context["page"]] == [mine.pk]


def test_the_queue_services_refuse_a_rubric_of_another_project(dataset, reviewer, shop):
    _, shop_rubric = shop
    case = make_case(dataset, "ours")
    with pytest.raises(LabelingRefused, match="another project"):
        services.label_submit(case=case, rubric=shop_rubric, reviewer=reviewer, verdict="pass",
                              content_hash=case.content_hash)
    with pytest.raises(LabelingRefused, match="another project"):
        services.skip(case=case, rubric=shop_rubric, reviewer=reviewer)
    with pytest.raises(LabelingRefused, match="another project"):
        services.case_serve(dataset=dataset, rubric=shop_rubric, reviewer=reviewer)
    with pytest.raises(LabelingRefused, match="another project"):
        services.label_undo(label_id=1, reviewer=reviewer, dataset=dataset, rubric=shop_rubric,
                            given_at=timezone.now(), created=True)
    assert not Label.objects.exists() and not Skip.objects.exists()
    assert not CaseTally.objects.filter(case=case, rubric=shop_rubric).exists()
