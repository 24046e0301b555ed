"""The judge improvement pages: the start form's estimate, the job's page and its table, keep and discard,
cancel; leads only. The job itself is tested end to end in test_improve.py."""

from decimal import Decimal

import pytest
from django.urls import reverse

from judges.models import JudgeConfig, Proposal, RubricEvent
from judges.proposals import services
from tests.conftest import TEST_PROJECT

from .conftest import EDITOR, RULE, proposal


def test_the_start_form_shows_an_estimate_and_starting_runs_the_job(world, client, lead, reviewer, fake_provider,
                                                                   django_capture_on_commit_callbacks):
    url = reverse("judges:proposal_create", args=[TEST_PROJECT, world["run"].pk])
    client.force_login(reviewer)
    assert client.get(url).status_code in (302, 403)
    client.force_login(lead)
    page = client.get(url)
    assert page.status_code == 200 and 'data-testid="proposal-estimate"' in page.text
    report = client.get(reverse("judges:run_report", args=[TEST_PROJECT, world["run"].pk]))
    assert url in report.text  # "Propose improvements" on the report
    fake_provider.control(model=EDITOR, script=[{"proposals": [
        proposal("the unused rule", guidance=RULE, note="<b>ambiguous</b> criteria"),
        proposal("be polite", guidance="Reward a polite tone.")]}])

    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(url, {"candidates": 2, "editor_model": EDITOR, "seed": 0, "max_cost_usd": "",
                                    "action": "start"})

    done = Proposal.objects.get()
    assert started.url == reverse("judges:proposal_detail", args=[TEST_PROJECT, done.pk]) and done.status == "finished"
    page = client.get(started.url)
    assert 'data-testid="proposal-table"' in page.text and "+" + RULE in page.text
    assert "&lt;b&gt;ambiguous&lt;/b&gt;" in page.text  # the editor's text is escaped
    polled = client.get(started.url, headers={"HX-Request": "true"})
    assert polled.status_code == 286  # an ended job stops the polling
    rule = done.candidates.get(name="the unused rule")
    kept = client.post(reverse("judges:proposal_keep", args=[TEST_PROJECT, done.pk]),
                       {"candidate": rule.pk, "reason": "best"})
    assert kept.url == reverse("judges:config_detail", args=[TEST_PROJECT, rule.config_id])
    assert JudgeConfig.objects.get(pk=rule.config_id).proposal == ""
    again = client.post(reverse("judges:proposal_discard", args=[TEST_PROJECT, done.pk]), follow=True)
    assert "already decided" in again.text
    assert RubricEvent.objects.get(kind="keep").reason == "best"
    log = client.get(reverse("judges:audit_log", args=[TEST_PROJECT]))
    assert log.status_code == 200 and "proposal kept" in log.text and "judge improvement proposed" in log.text


@pytest.mark.parametrize("max_cost", [None, Decimal("1000")])
def test_cancel_stops_the_job_and_discards_its_candidates(world, client, lead, fake_provider, max_cost):
    # Queued, not run: the editor's answer arriving after a cancel would be dropped (services.proposal_propose).
    job = services.proposal_start(run=world["run"], by=lead, editor_model=EDITOR, max_cost_usd=max_cost)
    client.force_login(lead)

    client.post(reverse("judges:proposal_cancel", args=[TEST_PROJECT, job.pk]))

    job.refresh_from_db()
    assert job.status == "cancelled" and RubricEvent.objects.get(kind="proposal").changes["status"] == "cancelled"
    services.proposal_propose(proposal_id=job.pk)  # a late delivery of the task does nothing
    assert fake_provider.requests() == [r for r in fake_provider.requests() if r["model"] != EDITOR]


def test_a_proposal_another_job_made_already_is_reported_not_shared(world, lead, fake_provider,
                                                                    django_capture_on_commit_callbacks):
    fake_provider.control(model=EDITOR, script=[{"proposals": [proposal("the unused rule", guidance=RULE)]}])
    with django_capture_on_commit_callbacks(execute=True):
        first = services.proposal_start(run=world["run"], by=lead, editor_model=EDITOR, candidates=1)
    with django_capture_on_commit_callbacks(execute=True):
        second = services.proposal_start(run=world["run"], by=lead, editor_model=EDITOR, candidates=1)

    first.refresh_from_db()
    second.refresh_from_db()
    assert first.status == "finished" and second.status == "failed"
    assert "already proposed as v" in second.rejected[0]["why"]
    # The second job's failure discards nothing of the first's.
    assert first.candidates.get().config.proposal == "proposed"


# ---- projects ---------------------------------------------------------------------------------------------


def test_a_lead_of_another_project_gets_404_and_a_reviewer_403(world, client, lead, reviewer, other_lead,
                                                               fake_provider):
    job = services.proposal_start(run=world["run"], by=lead, editor_model=EDITOR)
    pages = [
        ("get", reverse("judges:proposal_create", args=[TEST_PROJECT, world["run"].pk])),
        ("get", reverse("judges:proposal_detail", args=[TEST_PROJECT, job.pk])),
        ("post", reverse("judges:proposal_cancel", args=[TEST_PROJECT, job.pk])),
        ("post", reverse("judges:proposal_keep", args=[TEST_PROJECT, job.pk])),
        ("post", reverse("judges:proposal_discard", args=[TEST_PROJECT, job.pk])),
    ]
    for user, status in ((other_lead, 404), (reviewer, 403)):
        client.force_login(user)
        for method, url in pages:
            assert getattr(client, method)(url).status_code == status, (user, url)
    job.refresh_from_db()
    assert job.status == "queued" and not job.decision


def test_another_projects_job_and_run_are_404_under_this_project(world, client, lead, other_project, other_lead,
                                                                 fake_provider):
    job = services.proposal_start(run=world["run"], by=lead, editor_model=EDITOR)
    client.force_login(other_lead)  # a lead of shopnest, asking for the store's job and run under shopnest
    assert client.get(reverse("judges:proposal_detail", args=["shopnest", job.pk])).status_code == 404
    assert client.get(reverse("judges:proposal_create", args=["shopnest", world["run"].pk])).status_code == 404


def test_only_a_lead_of_the_rubrics_project_starts_or_decides(world, lead, other_lead, fake_provider):
    with pytest.raises(services.ProposalError, match="Only a lead of return-policy's project"):
        services.proposal_start(run=world["run"], by=other_lead, editor_model=EDITOR)
    job = services.proposal_start(run=world["run"], by=lead, editor_model=EDITOR)
    with pytest.raises(services.ProposalError, match="Only a lead of this rubric's project"):
        services.proposal_cancel(proposal=job, by=other_lead)
    job.refresh_from_db()
    assert job.status == "queued"
