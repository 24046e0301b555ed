"""Contested cases back to the reviewers: a lead's request for another label on many cases at
once (`services.request_more_labels`), and the queue serving them to reviewers who have not labeled
them. The report's button and the blind queue page are tested end to end in
tests/judges/calibration/test_second_opinion_report.py."""

import pytest

from labeling.disputes import services
from labeling.models import CaseTally, LabelRequest
from labeling.queue.selectors import NEEDED, next_case
from tests.conftest import make_user
from tests.labeling.queue_helpers import give_label, make_cases

REASON = "contested by second opinion (run 7)"


def wanted(case, rubric) -> tuple[int, int]:
    """(labels it has, labels the queue wants for it)."""
    tally = CaseTally.objects.get(case=case, rubric=rubric)
    return tally.labels, rubric.labels_per_case + tally.requested


def served(dataset, rubric, reviewer) -> str | None:
    case = next_case(dataset=dataset, rubric=rubric, reviewer=reviewer)
    return case.external_id if case else None


@pytest.fixture
def labeled(dataset, rubric, reviewer):
    """Four cases, each with the one label the rubric asks for, from `reviewer`."""
    cases = make_cases(dataset, 4)
    for case in cases:
        give_label(case, rubric, reviewer)
    return cases


def test_it_asks_one_more_label_on_each_case(labeled, rubric, lead):
    sent = services.request_more_labels(case_ids=[c.pk for c in labeled[:3]], rubric=rubric, by=lead, reason=REASON)
    assert (sent.requested, sent.already) == (3, 0)
    assert [wanted(c, rubric) for c in labeled] == [(1, 2), (1, 2), (1, 2), (1, 1)]
    assert set(LabelRequest.objects.values_list("reason", "requested_by")) == {(REASON, lead.pk)}


def test_a_repeat_with_the_same_reason_changes_nothing_even_after_the_label_came(
    labeled, rubric, lead, second_reviewer
):
    ids = [c.pk for c in labeled[:2]]
    services.request_more_labels(case_ids=ids, rubric=rubric, by=lead, reason=REASON)
    again = services.request_more_labels(case_ids=ids + ids, rubric=rubric, by=lead, reason=REASON)
    assert (again.requested, again.already) == (0, 2)
    give_label(labeled[0], rubric, second_reviewer)  # the requested label is given
    assert services.request_more_labels(case_ids=ids, rubric=rubric, by=lead, reason=REASON).requested == 0
    assert LabelRequest.objects.count() == 2
    # Contested again by a later run: asked for once more.
    later = services.request_more_labels(case_ids=ids, rubric=rubric, by=lead, reason="contested (run 9)")
    assert (later.requested, later.already) == (1, 1)  # labeled[1] still waits for its first request
    assert wanted(labeled[0], rubric) == (2, 3)


def test_a_case_already_waiting_for_a_requested_label_is_left_alone(labeled, rubric, lead):
    services.request_another_label(case=labeled[0], rubric=rubric, by=lead, reason="tie")
    sent = services.request_more_labels(case_ids=[labeled[0].pk, labeled[1].pk], rubric=rubric, by=lead, reason=REASON)
    assert (sent.requested, sent.already) == (1, 1)
    assert wanted(labeled[0], rubric) == (1, 2)


def test_a_case_with_more_labels_than_asked_wants_exactly_one_more(dataset, rubric, lead, reviewer, second_reviewer):
    (case,) = make_cases(dataset, 1)
    give_label(case, rubric, reviewer)
    give_label(case, rubric, second_reviewer)  # labels_per_case is 1: one label more than needed
    services.request_more_labels(case_ids=[case.pk], rubric=rubric, by=lead, reason=REASON)
    assert wanted(case, rubric) == (2, 3)


def test_only_leads_request_labels(labeled, rubric, reviewer):
    with pytest.raises(services.LabelingRefused):
        services.request_more_labels(case_ids=[labeled[0].pk], rubric=rubric, by=reviewer, reason=REASON)
    assert not LabelRequest.objects.exists()


def test_the_queue_serves_requested_cases_only_to_reviewers_who_have_not_labeled_them(
    dataset, labeled, rubric, lead, reviewer, second_reviewer
):
    third = make_user("tess")
    dataset.reviewers.add(third)
    assert served(dataset, rubric, second_reviewer) is None  # every case has its label
    services.request_more_labels(case_ids=[labeled[1].pk, labeled[3].pk], rubric=rubric, by=lead, reason=REASON)

    assert served(dataset, rubric, reviewer) is None  # they labeled every one of them
    case = next_case(dataset=dataset, rubric=rubric, reviewer=second_reviewer)
    assert (case.external_id, case.queue_reason) == ("c001", NEEDED)
    give_label(case, rubric, second_reviewer)
    assert served(dataset, rubric, second_reviewer) == "c003"
    give_label(labeled[3], rubric, third)  # another reviewer got there first
    assert served(dataset, rubric, second_reviewer) is None
    assert served(dataset, rubric, third) is None  # c001 has the label it was asked for


@pytest.mark.parametrize("n", [2, 20])
def test_it_writes_any_number_of_requests_in_constant_queries(dataset, rubric, reviewer, lead, n,
                                                               django_assert_num_queries):
    cases = make_cases(dataset, n)
    for case in cases:
        give_label(case, rubric, reviewer)
    # the lead's role in the rubric's project; savepoint, the locked tallies, the earlier requests with this
    # reason, one INSERT, release
    with django_assert_num_queries(6):
        services.request_more_labels(case_ids=[c.pk for c in cases], rubric=rubric, by=lead, reason=REASON)
    assert LabelRequest.objects.count() == n
