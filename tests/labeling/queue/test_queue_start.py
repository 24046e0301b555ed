"""The reviewer's start page: each queue with how many cases are left for them."""

import pytest
from django.urls import reverse

from tests.conftest import TEST_PROJECT
from tests.labeling.queue_helpers import change_content, give_label, make_cases

pytestmark = pytest.mark.django_db


def left(client) -> list[int]:
    return [q["left"] for q in client.get(reverse("labeling:queue_start", args=[TEST_PROJECT])).context["queues"]]


def test_it_counts_the_cases_left_for_each_reviewer(reviewer_client, reviewer, second_reviewer, dataset, rubric):
    a, b, c, d = make_cases(dataset, 4)
    assert left(reviewer_client) == [4]
    give_label(a, rubric, reviewer)  # mine: no longer left for me
    give_label(b, rubric, second_reviewer)  # one label is all it needs: left for nobody
    assert left(reviewer_client) == [2]
    change_content(a, "Changed: my label stops counting, so it is left for me again.")
    assert left(reviewer_client) == [3]
    page = reviewer_client.get(reverse("labeling:queue_start", args=[TEST_PROJECT])).content.decode()
    assert '<td class="num" data-label="Left for you" data-testid="queue-left"><strong>3</strong></td>' in page


def test_a_rubric_that_needs_two_labels_stays_left_for_the_second_reviewer(
    reviewer_client, reviewer, second_reviewer, dataset, rubric
):
    rubric.labels_per_case = 2
    rubric.save(update_fields=["labels_per_case"])
    a, b = make_cases(dataset, 2)
    give_label(a, rubric, second_reviewer)
    assert left(reviewer_client) == [2]


@pytest.mark.parametrize("n", [1, 15])
def test_the_start_page_runs_the_same_queries_however_many_cases(
    reviewer_client, reviewer, dataset, rubric, django_assert_num_queries, n
):
    for case in make_cases(dataset, n):
        give_label(case, rubric, reviewer)
    # session, user, membership (the project's door), the project's datasets I may see, its rubrics, my labels
    # per queue, cases needing labels, my stale labels = 8
    with django_assert_num_queries(8):
        reviewer_client.get(reverse("labeling:queue_start", args=[TEST_PROJECT]))
