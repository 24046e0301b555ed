"""Undo reaches only this sitting's labels, one step at a time, and never silently one a lead decided on."""

from datetime import timedelta

from django.utils import timezone

from labeling.disputes import services as dispute_services
from labeling.models import Label
from labeling.queue.sitting import SITTING_PAUSE, Step, sitting_record, sitting_steps
from tests.labeling.queue_helpers import HTMX, give_label, label_form, make_case, make_cases, queue_url


def label_here(client, dataset, rubric, case, verdict="pass"):
    return client.post(queue_url(dataset, rubric, "queue_label"), label_form(case, verdict), headers=HTMX)


def press_u(client, dataset, rubric):
    """What `u` does: post the undo the page offers (none: nothing to post, as the page has no button)."""
    offered = client.get(queue_url(dataset, rubric), headers=HTMX).context["undo"]
    if offered is None:
        return None
    return client.post(queue_url(dataset, rubric, "queue_undo"), {"label": offered.pk}, headers=HTMX)


def test_skip_and_undo_never_reach_a_label_from_an_earlier_sitting(reviewer_client, reviewer, dataset, rubric):
    earlier = [give_label(case, rubric, reviewer) for case in make_cases(dataset, 3, prefix="old")]
    fresh = make_cases(dataset, 4, prefix="new")
    label_here(reviewer_client, dataset, rubric, fresh[0])
    for _ in range(4):  # s, u, s, u, …
        reviewer_client.post(queue_url(dataset, rubric, "queue_skip"), {"case": fresh[1].pk}, headers=HTMX)
        press_u(reviewer_client, dataset, rubric)
    assert set(Label.objects.values_list("pk", flat=True)) == {label.pk for label in earlier}
    assert reviewer_client.get(queue_url(dataset, rubric)).context["undo"] is None


def test_undo_goes_back_one_step_at_a_time_through_the_sitting(reviewer_client, reviewer, dataset, rubric):
    a, b, c = make_cases(dataset, 3)
    for case in (a, b, c):
        label_here(reviewer_client, dataset, rubric, case)
    shown = [press_u(reviewer_client, dataset, rubric).context["case"].pk for _ in range(3)]
    assert shown == [c.pk, b.pk, a.pk]
    assert not Label.objects.exists()
    assert press_u(reviewer_client, dataset, rubric) is None


def test_undoing_a_revision_of_an_older_label_restores_it_never_deletes_it(reviewer_client, reviewer, dataset,
                                                                        rubric):
    case = make_case(dataset, "older")
    give_label(case, rubric, reviewer, "pass")
    label_here(reviewer_client, dataset, rubric, case, "fail")  # revised in this sitting
    press_u(reviewer_client, dataset, rubric)
    assert list(Label.objects.values_list("verdict", flat=True)) == ["pass"]
    assert press_u(reviewer_client, dataset, rubric) is None


def test_an_out_of_date_undo_changes_nothing(reviewer_client, reviewer, dataset, rubric):
    a, b = make_cases(dataset, 2)
    label_here(reviewer_client, dataset, rubric, a)
    label_here(reviewer_client, dataset, rubric, b)
    older = Label.objects.get(case=a)  # a page open in another tab still offers a
    reviewer_client.post(queue_url(dataset, rubric, "queue_undo"), {"label": older.pk}, headers=HTMX)
    assert Label.objects.count() == 2


def test_undo_refuses_a_label_a_lead_decided_on_and_says_so(reviewer_client, reviewer, lead, dataset, rubric):
    case = make_case(dataset, "decided")
    label_here(reviewer_client, dataset, rubric, case, "fail")
    dispute_services.adjudicate(case=case, rubric=rubric, verdict="pass", by=lead)
    response = press_u(reviewer_client, dataset, rubric)
    assert Label.objects.filter(case=case, verdict="fail").exists()
    assert response.context["refusal"].startswith(f"Not taken back: a lead decided {case.external_id} (pass)")
    assert 'role="alert"' in response.content.decode()
    assert press_u(reviewer_client, dataset, rubric) is None  # the step is gone: u does not loop on it


def test_undo_refuses_a_label_changed_since_in_another_tab(reviewer_client, reviewer, dataset, rubric):
    case = make_case(dataset, "two-tabs")
    label_here(reviewer_client, dataset, rubric, case, "pass")
    offered = reviewer_client.get(queue_url(dataset, rubric), headers=HTMX).context["undo"]
    Label.objects.filter(pk=offered.pk).update(verdict="fail", updated_at=offered.updated_at + timedelta(seconds=5))
    response = reviewer_client.post(queue_url(dataset, rubric, "queue_undo"), {"label": offered.pk}, headers=HTMX)
    assert "changed since" in response.context["refusal"]
    assert Label.objects.get().verdict == "fail"


def test_a_pause_ends_the_sitting():
    session: dict = {}
    start = timezone.now()
    sitting_record(session, dataset_id=1, rubric_id=2, step=Step(label_id=1, given_at=start, created=True))
    within = start + SITTING_PAUSE - timedelta(seconds=1)
    assert [step.label_id for step in sitting_steps(session, dataset_id=1, rubric_id=2, now=within)] == [1]
    assert sitting_steps(session, dataset_id=1, rubric_id=2, now=start + SITTING_PAUSE + timedelta(seconds=1)) == []
    assert sitting_steps(session, dataset_id=1, rubric_id=3, now=within) == []  # another queue's sitting
    # A label after the pause starts a new sitting: the older step is out of reach.
    later = start + 2 * SITTING_PAUSE
    sitting_record(session, dataset_id=1, rubric_id=2, step=Step(label_id=7, given_at=later, created=True))
    assert [step.label_id for step in sitting_steps(session, dataset_id=1, rubric_id=2, now=later)] == [7]
