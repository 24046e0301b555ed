"""The reviewer's queue: order, skip, requests, claims, blindness, access, htmx, query counts."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from labeling.disputes import services as dispute_services
from labeling.models import Case, CaseTally, Label, Rubric, Skip
from labeling.queue import services
from labeling.queue.selectors import CHANGED, NEEDED, SKIPPED, next_case
from tests.conftest import TEST_PROJECT, make_user
from tests.labeling.queue_helpers import (
    HTMX,
    change_content,
    give_label,
    label_form,
    make_case,
    make_cases,
    queue_url,
)


def served(dataset, rubric, reviewer) -> tuple[str | None, str | None]:
    case = next_case(dataset=dataset, rubric=rubric, reviewer=reviewer)
    return (case.external_id, case.queue_reason) if case else (None, None)


def test_it_serves_cases_in_id_order_when_none_has_labels(dataset, rubric, reviewer):
    make_cases(dataset, 3)
    assert served(dataset, rubric, reviewer) == ("c000", NEEDED)


def test_it_serves_the_fewest_labels_first_and_never_a_case_the_reviewer_labeled(dataset, rubric, reviewer):
    rubric.labels_per_case = 3
    rubric.save()
    a, b, c = make_cases(dataset, 3)
    others = [make_user(f"other{i}") for i in range(2)]
    give_label(a, rubric, others[0])
    give_label(a, rubric, others[1])
    give_label(b, rubric, others[0])
    give_label(c, rubric, reviewer)
    # c has one label but it is theirs; b has one label; a two.
    assert served(dataset, rubric, reviewer) == ("c001", NEEDED)
    give_label(b, rubric, reviewer)
    assert served(dataset, rubric, reviewer) == ("c000", NEEDED)
    give_label(a, rubric, reviewer)
    assert served(dataset, rubric, reviewer) == (None, None)


def test_it_does_not_serve_cases_that_have_all_their_labels(dataset, rubric, reviewer, second_reviewer):
    done, todo = make_cases(dataset, 2)
    give_label(done, rubric, second_reviewer)  # labels_per_case is 1
    assert served(dataset, rubric, reviewer) == ("c001", NEEDED)
    give_label(todo, rubric, second_reviewer)
    assert served(dataset, rubric, reviewer) == (None, None)


def test_it_serves_the_reviewers_changed_labels_first(dataset, rubric, reviewer):
    rubric.labels_per_case = 2
    rubric.save()
    cases = make_cases(dataset, 3)
    give_label(cases[2], rubric, reviewer)
    assert served(dataset, rubric, reviewer) == ("c000", NEEDED)
    change_content(cases[2], "Returns are accepted within 14 days.")
    assert served(dataset, rubric, reviewer) == ("c002", CHANGED)
    # Confirming (against the new content) puts it back among the labeled.
    services.label_submit(case=cases[2], rubric=rubric, reviewer=reviewer, verdict="fail",
                          content_hash=cases[2].content_hash)
    assert served(dataset, rubric, reviewer) == ("c000", NEEDED)


def test_a_changed_case_does_not_go_to_others_while_its_labels_wait_for_their_authors(
    dataset, rubric, reviewer, second_reviewer
):
    case = make_case(dataset, "only")
    give_label(case, rubric, second_reviewer)
    change_content(case, "Something else entirely.")
    # Its one label stopped counting: it goes back to its author, not to a second reviewer.
    assert served(dataset, rubric, reviewer) == (None, None)
    assert served(dataset, rubric, second_reviewer) == ("only", CHANGED)


def test_it_serves_skipped_cases_after_the_rest_oldest_skip_first(dataset, rubric, reviewer):
    a, b, c = make_cases(dataset, 3)
    services.skip(case=a, rubric=rubric, reviewer=reviewer)
    services.skip(case=b, rubric=rubric, reviewer=reviewer)
    assert served(dataset, rubric, reviewer) == ("c002", NEEDED)
    give_label(c, rubric, reviewer)
    assert served(dataset, rubric, reviewer) == ("c000", SKIPPED)
    services.skip(case=a, rubric=rubric, reviewer=reviewer)  # skipped again: to the back
    assert served(dataset, rubric, reviewer) == ("c001", SKIPPED)


def test_a_skipped_case_whose_content_changed_comes_back_among_the_skipped_after_the_rest(dataset, rubric, reviewer):
    rubric.labels_per_case = 2
    rubric.save()
    changed, other_skip, fresh = make_cases(dataset, 3)
    give_label(changed, rubric, reviewer)
    change_content(changed, "Returns are accepted within 14 days.")
    assert served(dataset, rubric, reviewer) == ("c000", CHANGED)
    services.skip(case=changed, rubric=rubric, reviewer=reviewer)  # not now: it waits behind the rest
    services.skip(case=other_skip, rubric=rubric, reviewer=reviewer)
    assert served(dataset, rubric, reviewer) == ("c002", NEEDED)
    give_label(fresh, rubric, reviewer)
    # Then the skipped ones, oldest skip first: the changed case among them, with its label to revisit.
    case = next_case(dataset=dataset, rubric=rubric, reviewer=reviewer)
    assert (case.external_id, case.queue_reason, case.own_label.stale) == ("c000", SKIPPED, True)
    services.label_submit(case=changed, rubric=rubric, reviewer=reviewer, verdict="pass",
                          content_hash=Case.objects.get(pk=changed.pk).content_hash)
    assert served(dataset, rubric, reviewer) == ("c001", SKIPPED)


def test_a_skip_is_the_reviewers_own(dataset, rubric, reviewer, second_reviewer):
    a, _ = make_cases(dataset, 2)
    services.skip(case=a, rubric=rubric, reviewer=second_reviewer)
    assert served(dataset, rubric, reviewer) == ("c000", NEEDED)


def test_a_skipped_case_that_got_its_labels_does_not_come_back(dataset, rubric, reviewer, second_reviewer):
    (a,) = make_cases(dataset, 1)
    services.skip(case=a, rubric=rubric, reviewer=reviewer)
    give_label(a, rubric, second_reviewer)
    assert served(dataset, rubric, reviewer) == (None, None)


def test_a_leads_request_brings_a_full_case_back_for_reviewers_who_have_not_labeled_it(
    dataset, rubric, reviewer, second_reviewer, lead
):
    full, fresh = make_cases(dataset, 2)
    give_label(full, rubric, second_reviewer)
    give_label(fresh, rubric, second_reviewer)
    assert served(dataset, rubric, reviewer) == (None, None)
    dispute_services.request_another_label(case=full, rubric=rubric, by=lead)
    assert served(dataset, rubric, reviewer) == ("c000", NEEDED)
    assert served(dataset, rubric, second_reviewer) == (None, None)  # never one they labeled
    give_label(full, rubric, reviewer)
    assert served(dataset, rubric, reviewer) == (None, None)


def test_a_request_is_refused_while_an_earlier_one_waits(dataset, rubric, second_reviewer, lead):
    case = make_case(dataset, "contested")
    give_label(case, rubric, second_reviewer)
    dispute_services.request_another_label(case=case, rubric=rubric, by=lead)
    with pytest.raises(services.LabelingRefused):
        dispute_services.request_another_label(case=case, rubric=rubric, by=lead)
    assert CaseTally.objects.get(case=case, rubric=rubric).requested == 1


def test_a_case_shown_to_one_reviewer_waits_for_them(dataset, rubric, reviewer, second_reviewer):
    rubric.labels_per_case = 2
    rubric.save()
    make_cases(dataset, 2)
    first = next_case(dataset=dataset, rubric=rubric, reviewer=reviewer)
    services.case_claim(case_id=first.pk, rubric=rubric, reviewer=reviewer)
    # Two people at once do not both get c000 (even though it needs two labels)...
    assert served(dataset, rubric, second_reviewer) == ("c001", NEEDED)
    assert served(dataset, rubric, reviewer) == ("c000", NEEDED)
    # ...until the hold runs out.
    later = timezone.now() + services.CLAIM_LEASE + timedelta(seconds=1)
    assert next_case(dataset=dataset, rubric=rubric, reviewer=second_reviewer, now=later).external_id == "c000"


def test_a_hold_ends_when_its_holder_answers(dataset, rubric, reviewer, second_reviewer):
    rubric.labels_per_case = 2
    rubric.save()
    only = make_case(dataset, "only")
    services.case_claim(case_id=only.pk, rubric=rubric, reviewer=reviewer)
    assert served(dataset, rubric, second_reviewer) == (None, None)
    give_label(only, rubric, reviewer)
    assert served(dataset, rubric, second_reviewer) == ("only", NEEDED)


def test_a_reviewer_holds_one_case_per_rubric(dataset, rubric, reviewer):
    a, b = make_cases(dataset, 2)
    services.case_claim(case_id=a.pk, rubric=rubric, reviewer=reviewer)
    services.case_claim(case_id=b.pk, rubric=rubric, reviewer=reviewer)
    assert list(CaseTally.objects.filter(claimed_by=reviewer).values_list("case_id", flat=True)) == [b.pk]
    services.case_claim(case_id=None, rubric=rubric, reviewer=reviewer)
    assert not CaseTally.objects.filter(claimed_by=reviewer).exists()


def test_it_keeps_datasets_and_rubrics_apart(dataset, other_dataset, rubric, reviewer):
    other_rubric = Rubric.objects.create(project=rubric.project, slug="tone", name="Is the tone polite?", criteria="…")
    make_case(other_dataset, "elsewhere")
    (case,) = make_cases(dataset, 1)
    give_label(case, other_rubric, reviewer)
    assert served(dataset, rubric, reviewer) == ("c000", NEEDED)
    assert served(dataset, other_rubric, reviewer) == (None, None)


# --- The page ---------------------------------------------------------------------------------------


def test_it_shows_the_case_criteria_trace_and_expectations(reviewer_client, dataset, rubric):
    case = make_case(dataset, "shown")
    body = reviewer_client.get(queue_url(dataset, rubric)).content.decode()
    for text in (rubric.criteria, case.input, case.output, "lookup_order", "ORD-1", case.golden_answer,
                 case.expected_behaviour, "policy", case.content_hash):
        assert text in body
    assert 'data-key="p"' in body and 'src="/static/js/labeling.js"' in body


def test_it_escapes_the_agents_output(reviewer_client, dataset, rubric):
    make_case(dataset, "xss", output='<script>alert("x")</script><img src=x onerror=alert(1)>')
    body = reviewer_client.get(queue_url(dataset, rubric)).content.decode()
    assert "<script>alert" not in body and "<img src=x" not in body
    assert "&lt;script&gt;alert" in body


def test_it_is_blind_to_other_reviewers_and_adjudications(
    reviewer_client, dataset, rubric, second_reviewer, lead
):
    rubric.labels_per_case = 2
    rubric.save()
    case = make_case(dataset, "blind")
    give_label(case, rubric, second_reviewer, verdict="fail", note="SECRET-NOTE-OF-ROB")
    dispute_services.adjudicate(case=case, rubric=rubric, verdict="fail", note="SECRET-DECISION", by=lead)
    response = reviewer_client.get(queue_url(dataset, rubric))
    body = response.content.decode()
    assert response.context["case"].pk == case.pk
    for secret in ("SECRET-NOTE-OF-ROB", "SECRET-DECISION", second_reviewer.username, "verdict-fail"):
        assert secret not in body


def test_it_shows_the_reviewer_only_their_own_label_when_the_case_comes_back(
    reviewer_client, reviewer, dataset, rubric
):
    case = make_case(dataset, "mine")
    give_label(case, rubric, reviewer, verdict="fail", note="my own note")
    change_content(case, "A different answer now.")
    body = reviewer_client.get(queue_url(dataset, rubric)).content.decode()
    assert "changed since you labeled it" in body
    assert "my own note" in body


def test_it_says_when_nothing_is_left_with_the_reviewers_count(reviewer_client, reviewer, dataset, rubric):
    for case in make_cases(dataset, 2):
        give_label(case, rubric, reviewer)
    response = reviewer_client.get(queue_url(dataset, rubric))
    assert response.context["case"] is None
    body = response.content.decode()
    assert "Nothing left to label here" in body
    assert "You have labeled <strong>2</strong> cases" in body


def test_it_says_when_the_case_left_is_open_in_another_reviewers_tab_and_when_it_frees(
    reviewer_client, reviewer, second_reviewer, dataset, rubric
):
    done, last = make_cases(dataset, 2)
    give_label(done, rubric, reviewer)
    shown_at = timezone.now()
    services.case_claim(case_id=last.pk, rubric=rubric, reviewer=second_reviewer, now=shown_at)
    response = reviewer_client.get(queue_url(dataset, rubric))
    assert response.context["case"] is None
    assert response.context["progress"].left == 1  # as the start page says
    assert response.context["held"] == {"count": 1, "frees_at": shown_at + services.CLAIM_LEASE}
    body = response.content.decode()
    frees = (shown_at + services.CLAIM_LEASE).strftime("%H:%M")
    assert "1 case left for you is open in another reviewer's tab; it frees at" in body
    assert f"{frees} UTC</time> if they leave it" in body
    assert "Nothing left to label here" not in body
    # Once the hold runs out, the case is served again and the notice is gone.
    CaseTally.objects.filter(case=last).update(claimed_until=shown_at - timedelta(seconds=1))
    assert reviewer_client.get(queue_url(dataset, rubric)).context["case"].pk == last.pk


def test_the_labeling_page_says_how_many_cases_are_left_for_the_reviewer(
    reviewer_client, reviewer, second_reviewer, dataset, rubric
):
    a, b, c, d = make_cases(dataset, 4)
    give_label(a, rubric, reviewer)
    give_label(b, rubric, second_reviewer)  # labels_per_case 1: b needs no more
    change_content(a, "Changed since the reviewer labeled it.")  # theirs to look at again: left
    response = reviewer_client.get(queue_url(dataset, rubric, "queue_progress"), headers=HTMX)
    assert response.context["progress"].left == 3  # a (changed), c, d
    assert 'data-testid="queue-left">3</strong>' in response.content.decode()


def test_it_answers_404_for_a_dataset_not_assigned_to_the_reviewer(reviewer_client, other_dataset, rubric):
    make_case(other_dataset, "theirs")
    assert reviewer_client.get(queue_url(other_dataset, rubric)).status_code == 404
    case = other_dataset.cases.get()
    response = reviewer_client.post(queue_url(other_dataset, rubric, "queue_label"), label_form(case))
    assert response.status_code == 404
    assert not Label.objects.exists()


def test_it_answers_404_for_a_case_of_another_dataset(reviewer_client, reviewer, dataset, other_dataset, rubric):
    other_dataset.reviewers.add(reviewer)
    foreign = make_case(other_dataset, "foreign")
    response = reviewer_client.post(queue_url(dataset, rubric, "queue_label"), label_form(foreign))
    assert response.status_code == 404
    assert reviewer_client.get(queue_url(dataset, rubric) + f"?case={foreign.pk}").status_code == 404


def test_the_start_page_lists_only_assigned_datasets(reviewer_client, dataset, other_dataset, rubric):
    body = reviewer_client.get(reverse("labeling:queue_start", args=[TEST_PROJECT])).content.decode()
    assert queue_url(dataset, rubric) in body
    assert queue_url(other_dataset, rubric) not in body


def test_labeling_without_javascript_redirects_to_the_next_case(reviewer_client, reviewer, dataset, rubric):
    first, second = make_cases(dataset, 2)
    response = reviewer_client.post(queue_url(dataset, rubric, "queue_label"), label_form(first, "fail", "why"))
    assert response.status_code == 302 and response["Location"] == queue_url(dataset, rubric)
    assert reviewer_client.get(response["Location"]).context["case"].pk == second.pk
    label = Label.objects.get()
    assert (label.case_id, label.reviewer_id, label.verdict, label.note) == (first.pk, reviewer.pk, "fail", "why")


def test_htmx_gets_the_next_case_panel_and_a_progress_event(reviewer_client, dataset, rubric):
    first, second = make_cases(dataset, 2)
    response = reviewer_client.post(queue_url(dataset, rubric, "queue_label"), label_form(first), headers=HTMX)
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="queue-case"')
    assert "<html" not in body
    assert f'name="case" value="{second.pk}"' in body
    assert response["HX-Trigger"] == '{"labeled": {}}'
    # A plain form gets a redirect, htmx the panel: both the answer and the page vary on the header.
    assert "HX-Request" in response["Vary"]
    assert "HX-Request" in reviewer_client.get(queue_url(dataset, rubric))["Vary"]


def test_the_progress_panel_counts_the_reviewers_and_the_datasets_labels(
    reviewer_client, reviewer, second_reviewer, dataset, rubric
):
    a, b, _ = make_cases(dataset, 3)
    give_label(a, rubric, reviewer)
    give_label(b, rubric, second_reviewer)
    response = reviewer_client.get(queue_url(dataset, rubric, "queue_progress"), headers=HTMX)
    progress = response.context["progress"]
    assert (progress.mine, progress.done, progress.cases) == (1, 2, 3)
    body = response.content.decode()
    assert "queue-progress" not in body and "<strong>1</strong> label" in body  # the panel's inside only


def test_it_refuses_a_label_it_cannot_read(reviewer_client, dataset, rubric):
    case = make_case(dataset, "bad")
    for bad in ({"verdict": "maybe"}, {"content_hash": "not-a-hash"}, {"case": "x"}):
        response = reviewer_client.post(queue_url(dataset, rubric, "queue_label"), label_form(case) | bad)
        assert response.status_code == 400
    assert not Label.objects.exists()


def test_skip_through_the_page_records_a_skip_and_serves_the_next(reviewer_client, reviewer, dataset, rubric):
    first, second = make_cases(dataset, 2)
    response = reviewer_client.post(queue_url(dataset, rubric, "queue_skip"), {"case": first.pk}, headers=HTMX)
    assert response.context["case"].pk == second.pk
    assert Skip.objects.filter(case=first, reviewer=reviewer, rubric=rubric).exists()
    assert not Label.objects.exists()


# --- Query counts -----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [3, 30])
def test_label_and_next_runs_the_same_queries_however_many_cases(
    reviewer_client, reviewer, second_reviewer, dataset, rubric, django_assert_num_queries, n
):
    cases = make_cases(dataset, n)
    for case in cases[: n // 2]:
        give_label(case, rubric, second_reviewer)
    target = cases[-1]
    # 2 session and user, 1 assigned dataset, 1 rubric, 1 case; label_submit: savepoint, insert returning
    # its id, skip delete, release (the savepoint is the test's: in production it is a transaction);
    # case_serve: savepoint, 1 next case with the reviewer's own label, 1 hold of the case shown, release
    # = 13. (Was 11: choosing and holding became one transaction, so two reviewers asking at
    # once never get the same case; in production its savepoint and release are BEGIN and COMMIT.)
    # Then 1 label undo would take back, and the session's savepoint, update and release (the sitting's
    # step, labeling.queue.sitting) = 17. Then 1 membership: the project's door (evalhub.access) reads the
    # reviewer's role in the project the URL names = 18; the project check of label_submit reads nothing (the
    # case carries the dataset it was found through). Then 1: whether the project exports verdicts (judges/export,
    # a LABEL_RECORDED hook) = 19.
    with django_assert_num_queries(19):
        response = reviewer_client.post(queue_url(dataset, rubric, "queue_label"), label_form(target), headers=HTMX)
    assert response.status_code == 200 and response.context["case"] is not None


@pytest.mark.parametrize("n", [3, 30])
def test_the_queue_page_runs_the_same_queries_however_many_cases(
    reviewer_client, reviewer, dataset, rubric, django_assert_num_queries, n
):
    cases = make_cases(dataset, n)
    for case in cases[: n // 2]:
        give_label(case, rubric, reviewer)
    # 2 session and user, 1 assigned dataset, 1 rubric; case_serve: savepoint, 1 next case, 1 hold,
    # release; 4 progress (own labels, own changed labels, dataset tallies, cases left for them) = 12 (no
    # label of this sitting to offer for undo: no query). (Was 10: the savepoint and release of the one
    # choose-and-hold transaction, as above.) Then the project's door: 1 list of the user's memberships, which the
    # navigation's project switcher reads too = 13.
    with django_assert_num_queries(13):
        response = reviewer_client.get(queue_url(dataset, rubric))
    assert response.status_code == 200


def test_the_page_holds_the_case_it_shows_and_lets_go_on_skip(reviewer_client, reviewer, dataset, rubric):
    first, second = make_cases(dataset, 2)
    assert reviewer_client.get(queue_url(dataset, rubric)).context["case"].pk == first.pk
    assert list(CaseTally.objects.filter(claimed_by=reviewer).values_list("case_id", flat=True)) == [first.pk]
    response = reviewer_client.post(queue_url(dataset, rubric, "queue_skip"), {"case": first.pk}, headers=HTMX)
    assert response.context["case"].pk == second.pk
    assert list(CaseTally.objects.filter(claimed_by=reviewer).values_list("case_id", flat=True)) == [second.pk]
    give_label(second, rubric, reviewer)
    response = reviewer_client.get(queue_url(dataset, rubric))
    assert response.context["case"].pk == first.pk  # the skipped one, after the rest
    for case in (first,):
        give_label(case, rubric, reviewer)
    assert reviewer_client.get(queue_url(dataset, rubric)).context["case"] is None
    assert not CaseTally.objects.filter(claimed_by=reviewer).exists()  # nothing shown, nothing held


def test_reviewers_working_at_once_get_different_cases(client, reviewer, second_reviewer, dataset, rubric):
    rubric.labels_per_case = 2
    rubric.save()
    make_cases(dataset, 2)
    client.force_login(reviewer)
    assert client.get(queue_url(dataset, rubric)).context["case"].external_id == "c000"
    client.force_login(second_reviewer)
    assert client.get(queue_url(dataset, rubric)).context["case"].external_id == "c001"


def test_a_second_tab_on_the_same_case_is_told_it_changed_and_asked(reviewer_client, reviewer, dataset, rubric):
    # Before: the second tab's verdict silently replaced the first's 0.16 s later.
    case = make_case(dataset, "two-tabs")
    url = queue_url(dataset, rubric, "queue")
    first = reviewer_client.get(url, {"case": case.pk}).content.decode()
    second = reviewer_client.get(url, {"case": case.pk}).content.decode()
    assert 'name="seen_verdict" value="none"' in first and 'name="seen_verdict" value="none"' in second
    reviewer_client.post(queue_url(dataset, rubric, "queue_label"), label_form(case, "pass", seen_verdict="none"),
                         headers=HTMX)
    refused = reviewer_client.post(queue_url(dataset, rubric, "queue_label"),
                                   label_form(case, "fail", seen_verdict="none"), headers=HTMX)
    page = refused.content.decode()
    assert refused.status_code == 200 and "This case changed since you opened it: your label on it is now pass" in page
    assert Label.objects.get(case=case, reviewer=reviewer).verdict == "pass"  # nothing laid over it
    assert 'name="seen_verdict" value="pass"' in page  # the form shows it again, asking
    reviewer_client.post(queue_url(dataset, rubric, "queue_label"), label_form(case, "fail", seen_verdict="pass"),
                         headers=HTMX)
    assert Label.objects.get(case=case, reviewer=reviewer).verdict == "fail"  # asked and answered
    # The same form posted twice (a double click) is no conflict: it changes nothing.
    again = reviewer_client.post(queue_url(dataset, rubric, "queue_label"),
                                 label_form(case, "fail", seen_verdict="pass"), headers=HTMX)
    assert "changed since you opened it" not in again.content.decode()
