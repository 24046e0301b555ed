"""Calls a killed worker made and never recorded are counted on the run and shown with its cost ("≥ N calls not
recorded"), never left out of the spend silently (docs/judging.md, "Cost").

A real Celery worker is SIGKILLed with calls in flight at the stand-in provider, which counts every call it is
sent; a second worker finishes the run, judging those cases again."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from judges.configs import services as config_services
from judges.models import Run
from judges.runs import services, worker
from judges.templatetags.report_tags import run_cost
from tests.conftest import TEST_PROJECT
from tests.judges.helpers import behavioral_spec, make_cases
from tests.judges.workers import broker_url, empty_broker, fresh, kill, queue_run_work, start_worker, wait_for

CASES, CONCURRENCY = 24, 4


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_killed_workers_calls_in_flight_are_counted_and_shown(tmp_path, dataset, rubric, lead, fake_provider,
                                                                 settings, client):
    url = broker_url("redis")
    empty_broker(url)
    settings.EVALHUB_CHUNK_CASES = 4
    make_cases(dataset, CASES)
    fake_provider.control(latency_ms=2500)  # long enough that a batch is still in flight when the worker dies
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    first = start_worker(tmp_path, "first", broker=url, EVALHUB_RUN_WINDOW_SECONDS="60")
    try:
        run = services.run_start(config=config, dataset=dataset, repeats=1, concurrency=CONCURRENCY,
                                 spend_cap_usd=None, by=lead)
        queue_run_work(url, run.pk)

        def in_flight_after_some_recorded() -> bool:
            row = fresh(lambda: Run.objects.get(pk=run.pk))
            return row.provider_calls >= CONCURRENCY and row.calls_expected - row.provider_calls >= CONCURRENCY

        wait_for(in_flight_after_some_recorded, 60, "a second batch of calls in flight, stored by a heartbeat")
    finally:
        kill(first)
    at_kill = fresh(lambda: Run.objects.get(pk=run.pk))
    made_not_recorded = len(fake_provider.requests()) - at_kill.provider_calls  # the truth, from the provider's side
    assert at_kill.calls_not_recorded == 0 and made_not_recorded >= CONCURRENCY

    second = start_worker(tmp_path, "second", broker=url, EVALHUB_RUN_WINDOW_SECONDS="60")
    try:
        fake_provider.control(latency_ms=0)
        wait_for(lambda: fresh(lambda: Run.objects.get(pk=run.pk).status) == Run.Status.FINISHED, 120,
                 "the run to finish")
    finally:
        kill(second)

    run.refresh_from_db()
    # What the last heartbeat stored, no more: a lower bound of what the provider served and the run never counted.
    assert run.calls_not_recorded == at_kill.calls_expected - at_kill.provider_calls
    assert CONCURRENCY <= run.calls_not_recorded <= made_not_recorded
    assert run.calls_not_recorded <= len(fake_provider.requests()) - run.provider_calls
    assert run.lease_token == "" and run.done == CASES
    client.force_login(lead)
    page = client.get(reverse("judges:run_detail", args=[TEST_PROJECT, run.pk])).content.decode()
    assert f"≥ {run.calls_not_recorded} calls not recorded" in page


def expired(run: Run, **fields) -> None:
    Run.objects.filter(pk=run.pk).update(lease_until=timezone.now() - timedelta(seconds=5), **fields)


@pytest.fixture
def run(db, dataset, rubric, lead) -> Run:
    make_cases(dataset, 4)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    return services.run_start(config=config, dataset=dataset, repeats=1, concurrency=2, spend_cap_usd=None, by=lead)


def test_taking_over_an_unreleased_lease_counts_what_its_holder_had_started(run):
    expired(run, status=Run.Status.RUNNING, lease_token="dead", provider_calls=7, calls_expected=10)

    assert worker.run_claim(run_id=run.pk) is not None

    run.refresh_from_db()
    assert (run.calls_not_recorded, run.calls_expected) == (3, 7)  # the new holder starts from what is counted


def test_a_released_lease_loses_nothing(run):
    # A holder releases its lease once every call it made is recorded; a stale figure of it counts for nothing.
    expired(run, lease_token="", provider_calls=7, calls_expected=10)

    assert worker.run_claim(run_id=run.pk) is not None

    run.refresh_from_db()
    assert run.calls_not_recorded == 0


def test_a_run_cancelled_before_its_worker_died_is_settled_by_the_sweep(run):
    expired(run, status=Run.Status.CANCELLED, lease_token="dead", provider_calls=2, calls_expected=5)
    live = Run.objects.create(config=run.config, dataset=run.dataset, created_by=run.created_by,
                              status=Run.Status.CANCELLED, lease_token="alive", calls_expected=9,
                              lease_until=timezone.now() + timedelta(seconds=30))

    assert worker.lost_leases_settle() == [run.pk]  # a lease still running is its holder's to release

    run.refresh_from_db()
    assert (run.calls_not_recorded, run.lease_token, run.lease_until) == (3, "", None)
    assert worker.lost_leases_settle() == []  # once
    live.refresh_from_db()
    assert live.calls_not_recorded == 0


@pytest.mark.parametrize(("fields", "shown"), [
    ({"provider_calls": 10, "cost_usd": Decimal("0.42"), "calls_not_recorded": 14}, "$0.42 + ≥ 14 calls not recorded"),
    ({"provider_calls": 10, "cost_usd": Decimal("0.42"), "calls_not_recorded": 1}, "$0.42 + ≥ 1 call not recorded"),
    ({"provider_calls": 0, "calls_not_recorded": 2}, "$0 + ≥ 2 calls not recorded"),
    ({"provider_calls": 3, "cost_usd": Decimal(0), "unknown_cost_judgments": 3, "calls_not_recorded": 2},
     "unknown (model not priced) + ≥ 2 calls not recorded"),
    ({"provider_calls": 0}, "$0 (no calls)"),
])
def test_the_cost_says_the_calls_not_recorded(fields, shown):
    assert run_cost(Run(**fields)) == shown
