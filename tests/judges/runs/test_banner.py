"""Banners about queued work that follow it (judges.runs.banners): the message a start leaves turns into the
run's live state, and no banner says "queued" once the run has finished.

No worker here: a run stays queued until the test does its work in-process (judges.runs.worker.
run_work_here, a contract-only config: no provider). tests/browser/test_run_banner_browser.py watches a
banner change with a real worker.
"""

import uuid

import pytest
from django.urls import reverse

from judges.configs import services as config_services
from judges.models import DriftCheck, Run
from judges.runs import services, worker
from judges.runs.banners import live_run_ids, parse_run_ids
from tests.conftest import TEST_PROJECT
from tests.judges.helpers import CONTRACT_SPEC, make_cases

HTMX = {"HX-Request": "true"}


def banner_url(*runs: Run) -> str:
    return reverse("judges:run_banner", args=[TEST_PROJECT]) + "?runs=" + ",".join(str(run.pk) for run in runs)


@pytest.fixture
def config(rubric, lead):
    return config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)


def start(client, config) -> tuple[Run, str]:
    """Start a run from the form (no worker: it stays queued); the run and the page the start lands on."""
    data = {"dataset": "store-support", "repeats": 1, "concurrency": 2, "spend_cap_usd": "",
            "start_token": uuid.uuid4()}
    response = client.post(reverse("judges:run_create", args=[TEST_PROJECT, config.pk]), data, follow=True)
    return Run.objects.get(), response.content.decode()


def test_the_started_message_follows_the_run_until_it_has_finished(lead_client, dataset, config):
    make_cases(dataset, 5)
    run, page = start(lead_client, config)

    # The page the start lands on: the message, polling the run's state.
    assert f"Run {run.pk} started from this form: 5 judgments." in page
    assert f'hx-get="{banner_url(run)}" hx-trigger="every 2s"' in page

    queued = lead_client.get(banner_url(run), headers=HTMX)
    assert queued.status_code == 200  # polled on
    assert "is queued: it starts when a worker picks it up." in queued.content.decode()
    assert 'hx-trigger="every 2s"' in queued.content.decode()

    worker.run_work_here(run_id=run.pk)

    done = lead_client.get(banner_url(run), headers=HTMX)
    html = done.content.decode()
    assert done.status_code == 286  # htmx stops polling
    assert "finished: 5 judgments" in html
    assert f'href="{reverse("judges:run_report", args=[TEST_PROJECT, run.pk])}">its calibration report</a>' in html
    assert "queued" not in html and "hx-get" not in html


def test_a_rerun_of_the_not_evaluated_follows_the_run_too(lead_client, dataset, config):
    make_cases(dataset, 3)
    run, _ = start(lead_client, config)
    worker.run_work_here(run_id=run.pk)
    Run.objects.filter(pk=run.pk).update(not_evaluated=1)
    run.judgments.filter(pk=run.judgments.first().pk).update(outcome="not_evaluated")

    page = lead_client.post(reverse("judges:run_retry", args=[TEST_PROJECT, run.pk]), follow=True).content.decode()

    assert f"Run {run.pk} queued again for its 1 not-evaluated judgment(s)." in page
    assert f'hx-get="{banner_url(run)}"' in page


def test_it_says_how_a_cancelled_run_ended(lead_client, dataset, config):
    make_cases(dataset, 3)
    run, _ = start(lead_client, config)
    services.run_cancel(run=run)

    response = lead_client.get(banner_url(run), headers=HTMX)

    assert response.status_code == 286
    assert "was cancelled at 0 / 3 judgments." in response.content.decode()


def test_it_names_a_probe_and_a_drift_check_and_where_their_figures_are(lead_client, rubric, dataset, config,
                                                                        lead):
    parent = Run.objects.create(config=config, dataset=dataset, created_by=lead, status="finished")
    probe = Run.objects.create(config=config, dataset=dataset, created_by=lead, parent=parent, probe="verbosity",
                               status="finished", total=4)
    drift = Run.objects.create(config=config, dataset=dataset, created_by=lead, parent=parent, status="running",
                               total=4, done=1)
    DriftCheck.objects.create(rubric=rubric, evidence_run=parent, run=drift)

    running = lead_client.get(banner_url(probe, drift), headers=HTMX)

    html = running.content.decode()
    assert running.status_code == 200  # the drift check is still at work: polled on
    assert f"Bias probe “verbosity” (run {probe.pk})" in html and "see what it moved" in html
    assert f'href="{reverse("judges:run_report", args=[TEST_PROJECT, parent.pk])}#probes"' in html
    assert f"Drift check of return-policy (run {drift.pk})" in html and "is running: 1 / 4 judgments." in html

    Run.objects.filter(pk=drift.pk).update(status="finished", done=4)
    finished = lead_client.get(banner_url(probe, drift), headers=HTMX).content.decode()
    rubric_page = reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])
    figures = f'href="{rubric_page}?drift_run={drift.pk}#drift"'
    assert f"{figures}>see its figures</a>." in finished


@pytest.mark.parametrize("runs", ["", "abc", "1,x", "-1", "²", "9" * 30, ",".join(["1"] * 11), "424242"])
def test_a_bad_list_of_runs_gets_no_banner_and_no_error(lead_client, runs):
    response = lead_client.get(reverse("judges:run_banner", args=[TEST_PROJECT]), {"runs": runs}, headers=HTMX)
    assert response.status_code == 286  # nothing to follow: the banner goes, polling stops
    assert response.content.decode().strip() == ""


def test_the_banner_is_for_leads_only(reviewer_client, dataset, config, lead):
    run = Run.objects.create(config=config, dataset=dataset, created_by=lead)
    assert reviewer_client.get(banner_url(run), headers=HTMX).status_code == 403


def test_an_ordinary_message_follows_no_run():
    assert live_run_ids("") == [] and live_run_ids("success") == []
    assert live_run_ids("live-runs-12-13") == [12, 13]
    assert parse_run_ids("12,12,13") == [12, 13]


def test_queued_probes_and_drift_checks_leave_a_banner_that_follows_them(lead_client, rubric, dataset, lead,
                                                                         reviewer):
    from judges.promotion.services import rubric_promote
    from tests.judges.promotion_factories import evidence_run

    run = evidence_run(rubric, dataset, lead, reviewer)
    probes = lead_client.post(reverse("judges:probes_start", args=[TEST_PROJECT, run.pk]),
                              {"kinds": ["verbosity", "injection"]}, follow=True).content.decode()
    started = Run.objects.filter(parent=run).order_by("pk")
    assert "Probes queued: verbosity" in probes and f'hx-get="{banner_url(*started)}"' in probes

    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason="Calibrated.", by=lead)
    drift = lead_client.post(reverse("judges:promotion_drift", args=[TEST_PROJECT, rubric.slug]),
                             follow=True).content.decode()
    check = DriftCheck.objects.get()
    assert f"Drift check of {rubric.slug} started" in drift and f'hx-get="{banner_url(check.run)}"' in drift
    figures = lead_client.get(reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug]),
                              {"drift_run": check.run.pk})
    assert figures.status_code == 200  # the finished banner's link: the page, loaded afresh
