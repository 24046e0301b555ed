"""The queue's priority levels (CaseTally.priority, written by `judges` for drawn audit-sample cases):
cases with a priority come before the other cases that need labels, higher level first, then in their
priority_order; only while they still need labels, never one the reviewer labeled or skipped, and never
ahead of the reviewer's labels that stopped counting. The raw SQL and a plain Python statement of the
rule serve the same sequence on a seeded set, for every dataset queue order."""

import random

import pytest

from labeling.models import CaseTally, Dataset, Label, QueuePriority, Skip
from labeling.queue.selectors import CHANGED, NEEDED, SKIPPED, next_case
from tests.labeling.queue_helpers import change_content, give_label, make_cases

pytestmark = pytest.mark.django_db


def prioritise(case, rubric, level: int, order: int) -> None:
    CaseTally.objects.filter(case=case, rubric=rubric).update(priority=level, priority_order=order)


def served(dataset, rubric, reviewer) -> tuple[str | None, str | None]:
    case = next_case(dataset=dataset, rubric=rubric, reviewer=reviewer)
    return (case.external_id, case.queue_reason) if case else (None, None)


def test_drawn_cases_come_first_in_their_order_then_the_rest(dataset, rubric, reviewer, second_reviewer):
    cases = make_cases(dataset, 6)
    give_label(cases[0], rubric, second_reviewer)  # labeled by someone else: not needed any more
    prioritise(cases[4], rubric, QueuePriority.AUDIT_SAMPLE, 2)
    prioritise(cases[2], rubric, QueuePriority.AUDIT_SAMPLE, 1)
    prioritise(cases[0], rubric, QueuePriority.AUDIT_SAMPLE, 0)  # drawn, but it has its label
    prioritise(cases[5], rubric, QueuePriority.CONTESTED, 0)
    sequence = []
    while (case := next_case(dataset=dataset, rubric=rubric, reviewer=reviewer)) is not None:
        sequence.append((case.external_id, case.queue_reason))
        give_label(case, rubric, reviewer)
    assert sequence == [("c002", NEEDED), ("c004", NEEDED), ("c005", NEEDED), ("c001", NEEDED), ("c003", NEEDED)]


def test_a_priority_never_goes_ahead_of_changed_labels_nor_brings_back_a_skip(dataset, rubric, reviewer):
    cases = make_cases(dataset, 3)
    give_label(cases[0], rubric, reviewer)
    change_content(cases[0], "A new answer.")
    Skip.objects.create(case=cases[1], rubric=rubric, reviewer=reviewer)
    prioritise(cases[1], rubric, QueuePriority.AUDIT_SAMPLE, 0)
    prioritise(cases[0], rubric, QueuePriority.AUDIT_SAMPLE, 1)
    assert served(dataset, rubric, reviewer) == ("c000", CHANGED)
    give_label(cases[2], rubric, reviewer)
    Label.objects.filter(case=cases[0]).update(content_hash=cases[0].content_hash)  # confirmed
    assert served(dataset, rubric, reviewer) == ("c001", SKIPPED)


def _python_rule(tallies: list[dict], *, per_case: int, queue_order: str, share: int) -> list[int]:
    """The order in plain Python: among cases that need labels, a priority first (higher level, then its
    order, then case id), then the dataset's own order."""
    def needed_key(t: dict) -> tuple:
        if queue_order == Dataset.QueueOrder.NEWEST:
            return (0, -t["case"])
        if queue_order == Dataset.QueueOrder.SHARE and (t["case"] * 7919) % 100 < share:
            return (-1, -t["case"])
        return (t["labels"], t["case"])

    open_ = [t for t in tallies if t["labels"] < per_case + t["requested"]]
    ranked = sorted(open_, key=lambda t: (0, -t["priority"], t["priority_order"], t["case"]) if t["priority"] > 0
                    else (1, 0, *needed_key(t)))
    return [t["case"] for t in ranked]


@pytest.mark.parametrize("queue_order", Dataset.QueueOrder.values)
def test_the_sql_and_the_python_rule_agree_on_a_seeded_set(dataset, rubric, reviewer, second_reviewer, queue_order):
    dataset.queue_order = queue_order
    dataset.save(update_fields=["queue_order"])
    rubric.labels_per_case = 2
    rubric.save(update_fields=["labels_per_case"])
    rng = random.Random(17)
    cases = make_cases(dataset, 40)
    for case in cases:
        if rng.random() < 0.3:
            give_label(case, rubric, second_reviewer)
        draw = rng.random()
        if draw < 0.25:
            prioritise(case, rubric, QueuePriority.AUDIT_SAMPLE, rng.randrange(1000))
        elif draw < 0.35:
            prioritise(case, rubric, QueuePriority.CONTESTED, rng.randrange(1000))
    tallies = list(CaseTally.objects.filter(rubric=rubric).values("case", "labels", "requested", "priority",
                                                                    "priority_order"))
    expected = _python_rule(tallies, per_case=2, queue_order=queue_order, share=dataset.queue_share)
    sequence = []
    while (case := next_case(dataset=dataset, rubric=rubric, reviewer=reviewer)) is not None:
        sequence.append(case.pk)
        give_label(case, rubric, reviewer)  # one label from this reviewer: each case comes once
    assert sequence == expected
