"""A run's work in real Celery workers: the concurrency cap holds across workers (read from the stand-in's
peak of calls in flight), and a cancel stops new calls within seconds while the calls in flight finish."""

import time

import pytest

from judges.configs import services as config_services
from judges.models import Judgment, Run
from judges.runs import services
from tests.judges.helpers import behavioral_spec, make_cases
from tests.judges.workers import broker_url, empty_broker, fresh, kill, queue_run_work, start_worker, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_it_never_exceeds_the_runs_cap_with_two_workers_on_it(tmp_path, dataset, rubric, lead, fake_provider,
                                                              settings):
    url = broker_url("redis")
    empty_broker(url)
    settings.EVALHUB_CHUNK_CASES = 4
    make_cases(dataset, 30)
    fake_provider.control(latency_ms=80, latency_sigma=0.6)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    # Windows of 1 s: the run goes back to the queue often, and either worker may take it.
    workers = [start_worker(tmp_path, name, broker=url, EVALHUB_RUN_WINDOW_SECONDS="1")
               for name in ("one", "two")]
    try:
        run = services.run_start(config=config, dataset=dataset, repeats=2, concurrency=3, spend_cap_usd=None,
                                 by=lead)
        for _ in range(4):  # duplicates (a sweep, a redelivery) reach both workers' processes at once
            queue_run_work(url, run.pk)
        wait_for(lambda: fresh(lambda: Run.objects.get(pk=run.pk).status) == Run.Status.FINISHED, 60,
                 "the run to finish")
    finally:
        for worker in workers:
            kill(worker)

    stats = fake_provider.stats()
    pairs = list(Judgment.objects.filter(run=run).values_list("case_id", "repeat"))
    assert len(pairs) == len(set(pairs)) == 60
    assert stats["max_in_flight"] == 3  # the cap was used to the full, and never more
    assert stats["total"] == 60 - Judgment.objects.filter(run=run, layer="contract").count()


def test_it_stops_starting_calls_within_seconds_of_a_cancel(tmp_path, dataset, rubric, lead, fake_provider,
                                                            settings):
    url = broker_url("redis")
    empty_broker(url)
    make_cases(dataset, 40)
    fake_provider.control(latency_ms=300)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    worker = start_worker(tmp_path, "worker", broker=url)
    try:
        run = services.run_start(config=config, dataset=dataset, repeats=2, concurrency=2, spend_cap_usd=None,
                                 by=lead)
        queue_run_work(url, run.pk)
        wait_for(lambda: fresh(lambda: Run.objects.get(pk=run.pk).done) >= 4, 60, "some judgments")
        services.run_cancel(run=run)
        # Bounded, not timed: a window that missed the cancel would work on for a minute.
        wait_for(lambda: fresh(lambda: Run.objects.get(pk=run.pk).lease_until) is None, 10,
                 "the worker to stop the run's work")
        wait_for(lambda: fake_provider.stats()["in_flight"] == 0, 5, "the calls in flight to end")
        calls = fake_provider.stats()["total"]
        time.sleep(1)
        assert fake_provider.stats()["total"] == calls  # no new call starts
    finally:
        kill(worker)

    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert run.done < run.total
    # The calls in flight at the cancel finished and were recorded: every call made has its judgment.
    behavioral = Judgment.objects.filter(run=run, layer="behavioral").count()
    assert calls == run.provider_calls == behavioral
