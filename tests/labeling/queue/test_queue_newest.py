"""A living dataset's queue (Dataset.queue_order "newest"): new ingested cases go to reviewers first, so new
production traffic gets human verdicts; the rest of the queue order (changed labels first, skips last, a
lead's requests, holds) stays as it is. Query counts: tests/labeling/queue/test_queue.py's pinned ones hold for both
orders (the order is read from the dataset row the view already has)."""

import pytest
from django.urls import reverse

from labeling.models import Dataset
from labeling.queue import services
from labeling.queue.selectors import CHANGED, NEEDED, next_case
from tests.conftest import TEST_PROJECT
from tests.labeling.queue_helpers import HTMX, change_content, give_label, label_form, make_cases, queue_url

pytestmark = pytest.mark.django_db


def served(dataset, rubric, reviewer) -> tuple[str | None, str | None]:
    case = next_case(dataset=dataset, rubric=rubric, reviewer=reviewer)
    return (case.external_id, case.queue_reason) if case else (None, None)


@pytest.fixture
def living(dataset):
    dataset.queue_order = Dataset.QueueOrder.NEWEST
    dataset.save(update_fields=["queue_order"])
    return dataset


def test_a_dataset_serves_the_fewest_labels_first_unless_it_says_so(dataset, rubric, reviewer):
    assert dataset.queue_order == Dataset.QueueOrder.FEWEST_LABELS
    make_cases(dataset, 3)
    assert served(dataset, rubric, reviewer) == ("c000", NEEDED)


def test_a_living_dataset_serves_the_newest_ingested_first(living, rubric, reviewer, second_reviewer):
    rubric.labels_per_case = 2
    rubric.save()
    old = make_cases(living, 3)
    give_label(old[2], rubric, second_reviewer)  # fewer labels no longer wins: newest does
    assert served(living, rubric, reviewer) == ("c002", NEEDED)
    make_cases(living, 2, prefix="new")  # production traffic arrives
    assert served(living, rubric, reviewer) == ("new001", NEEDED)
    give_label(living.cases.get(external_id="new001"), rubric, reviewer)
    assert served(living, rubric, reviewer) == ("new000", NEEDED)


def test_changed_labels_still_come_first_in_a_living_dataset(living, rubric, reviewer):
    old = make_cases(living, 2)
    give_label(old[0], rubric, reviewer)
    change_content(old[0], "A re-import changed the answer.")
    make_cases(living, 1, prefix="new")
    assert served(living, rubric, reviewer) == ("c000", CHANGED)


def test_a_hold_still_spreads_reviewers_over_the_newest_cases(living, rubric, reviewer, second_reviewer):
    make_cases(living, 3)
    first = services.case_serve(dataset=living, rubric=rubric, reviewer=reviewer)
    second = services.case_serve(dataset=living, rubric=rubric, reviewer=second_reviewer)
    assert (first.external_id, second.external_id) == ("c002", "c001")


@pytest.mark.parametrize("n", [3, 30])
def test_label_and_next_runs_the_same_queries_in_a_living_dataset(
    reviewer_client, reviewer, second_reviewer, living, rubric, django_assert_num_queries, n
):
    cases = make_cases(living, n)
    for case in cases[: n // 2]:
        give_label(case, rubric, second_reviewer)
    # As tests/labeling/queue/test_queue.py's fewest-labels count: the order changes the query, not how many.
    with django_assert_num_queries(19):
        response = reviewer_client.post(queue_url(living, rubric, "queue_label"), label_form(cases[0]), headers=HTMX)
    assert response.status_code == 200 and response.context["case"].external_id == f"c{n - 1:03d}"


def test_a_lead_sets_the_order_when_creating_a_dataset(lead_client):
    response = lead_client.post(reverse("labeling:dataset_create", args=[TEST_PROJECT]),
                                {"slug": "traffic", "name": "Traffic", "queue_order": "newest"})
    assert response.status_code == 302
    assert Dataset.objects.get(slug="traffic").queue_order == "newest"


def in_share(case_id: int, share: int) -> bool:
    """The queue's fixed pseudo-random choice, restated."""
    return (case_id * 7919) % 100 < share


def test_a_share_of_cases_goes_first_newest_first_then_the_rest(dataset, rubric, reviewer, second_reviewer):
    dataset.queue_order, dataset.queue_share = Dataset.QueueOrder.SHARE, 30
    dataset.save(update_fields=["queue_order", "queue_share"])
    rubric.labels_per_case = 2
    rubric.save()
    cases = make_cases(dataset, 100)
    chosen = [c for c in cases if in_share(c.pk, 30)]
    rest = [c for c in cases if not in_share(c.pk, 30)]
    assert len(chosen) == 30  # 30 % of any 100 consecutive ids
    give_label(rest[0], rubric, second_reviewer)  # outside the share, fewest labels still orders the rest
    order = []
    while (case := next_case(dataset=dataset, rubric=rubric, reviewer=reviewer)) is not None:
        order.append(case.pk)
        give_label(case, rubric, reviewer)
    expected_rest = [c.pk for c in rest[1:]] + [rest[0].pk]
    assert order == [c.pk for c in reversed(chosen)] + expected_rest


def test_the_share_must_be_a_percentage(lead_client):
    response = lead_client.post(reverse("labeling:dataset_create", args=[TEST_PROJECT]),
                                {"slug": "t", "name": "T", "queue_order": "share", "queue_share": "0"})
    assert response.status_code == 200 and "queue_share" in response.context["form"].errors
    assert not Dataset.objects.filter(slug="t").exists()
