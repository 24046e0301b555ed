"""A team labeling at once: choosing and holding the next case is one atomic step.

Real threads, each with its own PostgreSQL connection, released together by a barrier.
"""

import re
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from labeling.models import Case, CaseTally, Label
from labeling.queue import services
from labeling.queue.selectors import CHANGED, next_case
from tests.conftest import make_user
from tests.labeling.queue_helpers import HTMX, change_content, give_label, label_form, make_cases, queue_url


def at_once(calls) -> list:
    """Run the calls in threads released together; their results in order (an exception fails the test)."""
    barrier = threading.Barrier(len(calls))
    results: list = [None] * len(calls)
    errors: list = []

    def run(i, call):
        try:
            barrier.wait()
            results[i] = call()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    return results


def held_by(rubric) -> dict[int, int]:
    return dict(CaseTally.objects.filter(rubric=rubric, claimed_by__isnull=False).values_list("case_id", "claimed_by"))


@pytest.fixture
def team(dataset):
    reviewers = [make_user(f"team{i}") for i in range(10)]
    dataset.reviewers.add(*reviewers)
    return reviewers


@pytest.mark.django_db(transaction=True)
def test_ten_reviewers_asking_at_the_same_instant_get_ten_different_cases(dataset, rubric, team):
    rubric.labels_per_case = 2  # every case could take two of them: still one screen per case at a time
    rubric.save()
    make_cases(dataset, 12)
    for _ in range(3):  # three rounds: each reviewer asks again (letting go of the case they held)
        served = at_once([lambda r=r: services.case_serve(dataset=dataset, rubric=rubric, reviewer=r) for r in team])
        ids = [case.pk for case in served]
        assert len(set(ids)) == 10, sorted(ids)
        assert held_by(rubric) == {case.pk: reviewer.pk for case, reviewer in zip(served, team, strict=True)}


@pytest.mark.django_db(transaction=True)
def test_a_hold_cannot_be_taken_by_reviewers_claiming_it_at_once(dataset, rubric, team):
    (case,) = make_cases(dataset, 1)
    taken = at_once([lambda r=r: services.case_claim(case_id=case.pk, rubric=rubric, reviewer=r) for r in team])
    assert taken.count(True) == 1
    assert held_by(rubric) == {case.pk: team[taken.index(True)].pk}


def test_a_hold_is_never_taken_from_a_reviewer_who_still_holds_it(dataset, rubric, reviewer, second_reviewer):
    rubric.labels_per_case = 2
    rubric.save()
    first, second = make_cases(dataset, 2)
    assert services.case_serve(dataset=dataset, rubric=rubric, reviewer=reviewer).pk == first.pk
    # Asked for by id (a link, an undo): shown, but the hold stays with its holder.
    assert services.case_claim(case_id=first.pk, rubric=rubric, reviewer=second_reviewer) is False
    assert held_by(rubric) == {first.pk: reviewer.pk}
    assert services.case_serve(dataset=dataset, rubric=rubric, reviewer=second_reviewer).pk == second.pk
    assert held_by(rubric) == {first.pk: reviewer.pk, second.pk: second_reviewer.pk}
    # Renewing one's own hold is fine; once a hold runs out, another reviewer may take the case.
    assert services.case_claim(case_id=first.pk, rubric=rubric, reviewer=reviewer) is True
    later = timezone.now() + services.CLAIM_LEASE + timedelta(seconds=1)
    assert services.case_claim(case_id=first.pk, rubric=rubric, reviewer=second_reviewer, now=later) is True
    assert held_by(rubric) == {first.pk: second_reviewer.pk}  # and they let go of the one they held


def test_a_skipped_case_held_by_another_reviewer_waits_for_them(dataset, rubric, reviewer, second_reviewer):
    only, other = make_cases(dataset, 2)
    services.skip(case=only, rubric=rubric, reviewer=reviewer)
    give_label(other, rubric, reviewer)
    assert services.case_serve(dataset=dataset, rubric=rubric, reviewer=second_reviewer).pk == only.pk
    # It needs one label and is on the second reviewer's screen: not served again from the skipped ones.
    assert services.case_serve(dataset=dataset, rubric=rubric, reviewer=reviewer) is None
    later = timezone.now() + services.CLAIM_LEASE + timedelta(seconds=1)
    assert services.case_serve(dataset=dataset, rubric=rubric, reviewer=reviewer, now=later).pk == only.pk


def test_a_changed_label_is_shown_to_its_author_without_taking_anothers_hold(
    dataset, rubric, reviewer, second_reviewer
):
    rubric.labels_per_case = 2
    rubric.save()
    (case,) = make_cases(dataset, 1)
    give_label(case, rubric, reviewer)
    change_content(case, "Returns are accepted within 14 days.")
    assert services.case_serve(dataset=dataset, rubric=rubric, reviewer=second_reviewer).pk == case.pk
    served = services.case_serve(dataset=dataset, rubric=rubric, reviewer=reviewer)
    assert (served.pk, served.queue_reason) == (case.pk, CHANGED)
    assert held_by(rubric) == {case.pk: second_reviewer.pk}
    assert next_case(dataset=dataset, rubric=rubric, reviewer=reviewer).queue_reason == CHANGED


def shown_case(response) -> Case | None:
    """The case a page shows, read from its HTML: response.context mixes threads (a process-wide signal)."""
    found = re.search(r'name="case" value="(\d+)"', response.content.decode())
    return Case.objects.get(pk=found.group(1)) if found else None


@pytest.mark.django_db(transaction=True)
def test_a_team_labeling_through_the_page_at_once_gives_no_case_more_labels_than_it_needs(dataset, rubric, team):
    rubric.labels_per_case = 2
    rubric.save()
    make_cases(dataset, 12)
    clients = []
    for user in team[:6]:
        client = Client()
        client.force_login(user)
        clients.append(client)
    url = queue_url(dataset, rubric)
    shown = [shown_case(response) for response in at_once([lambda c=c: c.get(url) for c in clients])]
    for _ in range(3):  # label what each was shown, all at once, and take the next case served
        assert None not in shown
        responses = at_once([
            lambda c=c, case=case: c.post(queue_url(dataset, rubric, "queue_label"), label_form(case), headers=HTMX)
            for c, case in zip(clients, shown, strict=True)
        ])
        assert {response.status_code for response in responses} == {200}
        shown = [shown_case(response) for response in responses]
    assert Label.objects.count() == 18
    assert max(CaseTally.objects.filter(rubric=rubric).values_list("labels", flat=True)) == 2
