"""label_submit, undo and revise: what the database holds is exactly what the reviewer chose."""

import threading
import time

import pytest
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse

from labeling.models import CaseTally, Label, Skip
from labeling.queue import services
from tests.conftest import TEST_PROJECT, make_user
from tests.labeling.queue_helpers import HTMX, change_content, give_label, label_form, make_case, make_cases, queue_url


def submit(case, rubric, reviewer, verdict="pass", note="", content_hash=None):
    return services.label_submit(case=case, rubric=rubric, reviewer=reviewer, verdict=verdict, note=note,
                                 content_hash=content_hash or case.content_hash).label


def test_it_creates_one_label_against_the_content_seen(dataset, rubric, reviewer):
    case = make_case(dataset, "one")
    label = submit(case, rubric, reviewer, "fail", "  too vague  ")
    row = Label.objects.get()
    assert (row.pk, row.verdict, row.note, row.content_hash, row.stale) == (label.pk, "fail", "too vague",
                                                                           case.content_hash, False)
    assert row.dataset_id == dataset.pk


def test_a_repeated_submit_changes_nothing_not_even_updated_at(dataset, rubric, reviewer):
    case = make_case(dataset, "twice")
    first = submit(case, rubric, reviewer, "pass", "ok")
    again = submit(case, rubric, reviewer, "pass", "ok")
    row = Label.objects.get()
    assert again.pk == first.pk
    assert row.updated_at == first.updated_at and row.previous is None


def test_a_double_submit_of_the_page_form_keeps_one_label(reviewer_client, dataset, rubric):
    first, _ = make_cases(dataset, 2)
    form = label_form(first, "fail", "no")
    reviewer_client.post(queue_url(dataset, rubric, "queue_label"), form, headers=HTMX)
    stamp = Label.objects.get().updated_at
    response = reviewer_client.post(queue_url(dataset, rubric, "queue_label"), form, headers=HTMX)
    assert response.status_code == 200
    row = Label.objects.get()
    assert (row.verdict, row.note, row.updated_at) == ("fail", "no", stamp)
    assert CaseTally.objects.get(case=first, rubric=rubric).labels == 1


def test_a_different_verdict_revises_the_label_and_remembers_the_old_one(dataset, rubric, reviewer):
    case = make_case(dataset, "revise")
    first = submit(case, rubric, reviewer, "pass")
    submit(case, rubric, reviewer, "fail", "on second thought")
    row = Label.objects.get()
    assert (row.verdict, row.note) == ("fail", "on second thought")
    assert row.updated_at > first.updated_at
    assert row.previous["verdict"] == "pass"


def test_a_label_given_on_content_that_changed_meanwhile_does_not_count(dataset, rubric, reviewer):
    case = make_case(dataset, "moving")
    seen = case.content_hash
    change_content(case, "The answer changed while the reviewer read the old one.")
    submit(case, rubric, reviewer, "pass", content_hash=seen)
    assert Label.objects.get().stale is True  # it comes back to them as "changed since you labeled"


def test_labeling_clears_the_reviewers_skip(dataset, rubric, reviewer):
    case = make_case(dataset, "skipped")
    services.skip(case=case, rubric=rubric, reviewer=reviewer)
    submit(case, rubric, reviewer)
    assert not Skip.objects.exists()


def test_it_refuses_a_verdict_that_is_not_pass_or_fail(dataset, rubric, reviewer):
    case = make_case(dataset, "odd")
    with pytest.raises(services.LabelingRefused):
        submit(case, rubric, reviewer, "maybe")
    assert not Label.objects.exists()


# --- Undo -------------------------------------------------------------------------------------------


def test_undo_deletes_a_new_label_and_shows_its_case_again(reviewer_client, reviewer, dataset, rubric):
    first, second, _ = make_cases(dataset, 3)
    reviewer_client.post(queue_url(dataset, rubric, "queue_label"), label_form(first), headers=HTMX)
    response = reviewer_client.post(queue_url(dataset, rubric, "queue_label"), label_form(second, "fail"),
                                    headers=HTMX)
    undo_id = response.context["undo"].pk
    assert undo_id == Label.objects.get(case=second).pk
    response = reviewer_client.post(queue_url(dataset, rubric, "queue_undo"), {"label": undo_id}, headers=HTMX)
    assert response.context["case"].pk == second.pk
    assert list(Label.objects.values_list("case_id", "verdict")) == [(first.pk, "pass")]
    # The next undo on the page takes back the label before.
    assert response.context["undo"].case_id == first.pk
    assert CaseTally.objects.get(case=second, rubric=rubric).labels == 0


def test_undo_restores_a_revised_label(dataset, rubric, reviewer):
    case = make_case(dataset, "revised")
    first = submit(case, rubric, reviewer, "pass", "fine")
    label = submit(case, rubric, reviewer, "fail", "not fine")
    assert services.label_undo(label_id=label.pk, reviewer=reviewer, dataset=dataset, rubric=rubric,
                               given_at=label.updated_at, created=False) == case.pk
    row = Label.objects.get()
    assert (row.verdict, row.note, row.updated_at, row.previous) == ("pass", "fine", first.updated_at, None)


def test_undo_of_a_confirmed_changed_label_makes_it_changed_again(dataset, rubric, reviewer):
    case = make_case(dataset, "confirm")
    give_label(case, rubric, reviewer, "pass")
    change_content(case, "New words.")
    confirmed = submit(case, rubric, reviewer, "pass")  # confirm against the new content
    assert Label.objects.get().stale is False
    services.label_undo(label_id=confirmed.pk, reviewer=reviewer, dataset=dataset, rubric=rubric,
                        given_at=confirmed.updated_at, created=False)
    assert Label.objects.get().stale is True


def test_a_repeated_undo_changes_nothing(reviewer_client, reviewer, dataset, rubric):
    first, second = make_cases(dataset, 2)
    for case in (first, second):
        reviewer_client.post(queue_url(dataset, rubric, "queue_label"), label_form(case))
    label = Label.objects.get(case=second)
    for _ in range(2):
        response = reviewer_client.post(queue_url(dataset, rubric, "queue_undo"), {"label": label.pk})
        assert response.status_code == 302
    assert list(Label.objects.values_list("case_id", flat=True)) == [first.pk]
    assert response["Location"] == queue_url(dataset, rubric)


def test_undo_without_javascript_shows_the_case_again(reviewer_client, reviewer, dataset, rubric):
    case = make_case(dataset, "back")
    reviewer_client.post(queue_url(dataset, rubric, "queue_label"), label_form(case))
    label = Label.objects.get()
    response = reviewer_client.post(queue_url(dataset, rubric, "queue_undo"), {"label": label.pk})
    assert response["Location"] == f"{queue_url(dataset, rubric)}?case={case.pk}"
    assert reviewer_client.get(response["Location"]).context["case"].pk == case.pk


def test_nobody_undoes_another_reviewers_label(reviewer_client, second_reviewer, dataset, rubric):
    label = give_label(make_case(dataset, "theirs"), rubric, second_reviewer)
    reviewer_client.post(queue_url(dataset, rubric, "queue_undo"), {"label": label.pk})
    assert Label.objects.filter(pk=label.pk).exists()


# --- History and revising ---------------------------------------------------------------------------


def test_history_lists_the_reviewers_labels_newest_first(reviewer_client, reviewer, second_reviewer, dataset,
                                                         other_dataset, rubric):
    a, b = make_cases(dataset, 2)
    submit(a, rubric, reviewer, "pass")
    submit(b, rubric, reviewer, "fail", "b note")
    give_label(a, rubric, second_reviewer, note="NOT-MINE")
    give_label(make_case(other_dataset, "unassigned"), rubric, reviewer)
    response = reviewer_client.get(reverse("labeling:history", args=[TEST_PROJECT]))
    assert [label.case_id for label in response.context["page"]] == [b.pk, a.pk]
    body = response.content.decode()
    assert "NOT-MINE" not in body and "b note" in body
    assert f"?case={a.pk}&amp;back=history" in body


def test_history_searches_case_ids_and_notes_and_sorts(reviewer_client, reviewer, dataset, rubric):
    a, b, c = make_cases(dataset, 3)
    submit(a, rubric, reviewer, "pass", "refund window")
    submit(b, rubric, reviewer, "fail")
    submit(c, rubric, reviewer, "fail", "tone")
    url = reverse("labeling:history", args=[TEST_PROJECT])

    def listed(**query):
        return [label.case_id for label in reviewer_client.get(url, query).context["page"]]

    assert listed(q="refund") == [a.pk]
    assert listed(q=b.external_id) == [b.pk]
    assert listed(sort="when") == [a.pk, b.pk, c.pk]
    assert listed(sort="verdict") == [c.pk, b.pk, a.pk]  # fail before pass, newest first within
    assert listed(sort="-case") == [c.pk, b.pk, a.pk]
    assert listed(sort="reviewer__password") == [c.pk, b.pk, a.pk]  # not offered: newest first


def test_revising_from_history_goes_back_to_history(reviewer_client, reviewer, dataset, rubric):
    case = make_case(dataset, "again")
    give_label(case, rubric, reviewer, "pass")
    page = reviewer_client.get(queue_url(dataset, rubric) + f"?case={case.pk}&back=history")
    assert page.context["mine"].verdict == "pass"
    assert 'name="back" value="history"' in page.content.decode()
    response = reviewer_client.post(queue_url(dataset, rubric, "queue_label"),
                                    label_form(case, "fail", "changed my mind", back="history"))
    assert response["Location"].startswith(reverse("labeling:history", args=[TEST_PROJECT]))
    assert Label.objects.get().verdict == "fail"


# --- At once ----------------------------------------------------------------------------------------


def _at_once(*calls) -> list:
    """Run the calls in threads released together; each thread has its own database connection."""
    barrier = threading.Barrier(len(calls))
    errors: list = []

    def run(call):
        try:
            barrier.wait()
            call()
        except Exception as exc:  # noqa: BLE001 - reported to the test below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return errors


@pytest.mark.django_db(transaction=True)
def test_two_reviewers_labeling_one_case_at_once_both_keep_their_label(dataset, rubric, reviewer, second_reviewer):
    rubric.labels_per_case = 2
    rubric.save()
    cases = make_cases(dataset, 20)
    for case in cases:
        errors = _at_once(lambda c=case: submit(c, rubric, reviewer, "pass"),
                          lambda c=case: submit(c, rubric, second_reviewer, "fail"))
        assert errors == []
    assert Label.objects.count() == 40
    assert set(Label.objects.filter(reviewer=reviewer).values_list("verdict", flat=True)) == {"pass"}
    assert set(Label.objects.filter(reviewer=second_reviewer).values_list("verdict", flat=True)) == {"fail"}
    assert set(CaseTally.objects.filter(rubric=rubric).values_list("labels", flat=True)) == {2}


@pytest.mark.django_db(transaction=True)
def test_one_reviewer_submitting_twice_at_once_keeps_one_label(dataset, rubric, reviewer):
    cases = make_cases(dataset, 20)
    for case in cases:
        errors = _at_once(*[lambda c=case: submit(c, rubric, reviewer, "fail", "same")] * 3)
        assert errors == []
    assert Label.objects.count() == 20
    assert set(Label.objects.values_list("verdict", "note", "previous")) == {("fail", "same", None)}
    assert set(CaseTally.objects.filter(rubric=rubric).values_list("labels", flat=True)) == {1}


def wait_for_a_session_blocked_on_a_lock(timeout: float = 10) -> bool:
    """Whether another session of this test database is seen waiting on a lock within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                           "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()")
            if cursor.fetchone()[0]:
                return True
            time.sleep(0.02)
    return False


@pytest.mark.django_db(transaction=True)
def test_a_submit_waits_for_a_concurrent_insert_of_the_same_label_then_revises_it(dataset, rubric, reviewer):
    """Deterministic: the first transaction holds its new row uncommitted while the second arrives."""
    case = make_case(dataset, "held")
    inserted, release = threading.Event(), threading.Event()

    def slow_first():
        with transaction.atomic():
            submit(case, rubric, reviewer, "pass", "first")
            inserted.set()
            release.wait(10)

    def second():
        inserted.wait(10)
        submit(case, rubric, reviewer, "fail", "second")

    threads = [threading.Thread(target=lambda f=f: (f(), connection.close())) for f in (slow_first, second)]
    for thread in threads:
        thread.start()
    inserted.wait(10)
    # Proven, not assumed after a sleep: PostgreSQL shows the second submit waiting on a lock.
    assert wait_for_a_session_blocked_on_a_lock(), "the second submit never waited for the first"
    assert not Label.objects.exists()  # nothing committed yet
    release.set()
    for thread in threads:
        thread.join(30)
    row = Label.objects.get()
    assert (row.verdict, row.note, row.previous["note"]) == ("fail", "second", "first")


@pytest.mark.django_db(transaction=True)
def test_reviewers_posting_through_the_page_at_once_never_lose_a_label(dataset, rubric):
    rubric.labels_per_case = 3
    rubric.save()
    reviewers = [make_user(f"r{i}") for i in range(3)]
    dataset.reviewers.add(*reviewers)
    clients = []
    for user in reviewers:
        client = Client()
        client.force_login(user)
        clients.append(client)
    cases = make_cases(dataset, 5)
    for case in cases:
        form = label_form(case, "pass")
        url = queue_url(dataset, rubric, "queue_label")
        errors = _at_once(*[lambda c=client, f=form, u=url: c.post(u, f, headers=HTMX) for client in clients])
        assert errors == []
    assert Label.objects.count() == 15
    assert set(CaseTally.objects.filter(rubric=rubric).values_list("labels", flat=True)) == {3}


@pytest.mark.parametrize("n", [2, 20])
def test_history_runs_the_same_queries_however_many_labels(reviewer_client, reviewer, dataset, rubric,
                                                           django_assert_num_queries, n):
    for case in make_cases(dataset, n):
        give_label(case, rubric, reviewer)
    # 2 session and user, 1 membership (the project's door), 1 count and 1 page of labels with their cases,
    # datasets and rubrics = 5.
    with django_assert_num_queries(5):
        response = reviewer_client.get(reverse("labeling:history", args=[TEST_PROJECT]), {"q": "c0", "sort": "case"})
    assert len(response.context["page"].object_list) == n


def test_a_note_is_stored_redacted_when_the_dataset_redacts(dataset, rubric, reviewer, lead):
    # A reviewer's note may quote the case; it is stored (and so shown and exported) as the case is.
    from labeling.datasets.services import dataset_set_redaction

    dataset_set_redaction(dataset=dataset, kinds=["email", "card"], by=lead)
    case = make_case(dataset, "c1")
    label = submit(case, rubric, reviewer, "fail", note="She wrote from jane@example.com, card 4111 1111 1111 1111.")
    assert Label.objects.get(pk=label.pk).note == "She wrote from [EMAIL_1], card [CARD_1]."
    # The same note again (the form shows the stored one) changes nothing.
    again = services.label_submit(case=case, rubric=rubric, reviewer=reviewer, verdict="fail", note=label.note,
                                  content_hash=case.content_hash)
    assert not again.changed
