"""A real Celery worker SIGKILLed mid-run, and a new one started: the run finishes with exactly one
judgment per (case, repeat), none lost, counters true. Against Redis and against RabbitMQ."""

import time

import pytest

from judges.configs import services as config_services
from judges.models import Judgment, Run
from judges.runs import services
from tests.judges.helpers import behavioral_spec, make_cases, recounted_tallies, stored_tallies
from tests.judges.workers import broker_url, empty_broker, fresh, kill, queue_run_work, start_worker, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

CASES, REPEATS = 24, 2


@pytest.mark.parametrize("broker", ["redis", "amqp"])
def test_it_finishes_a_run_exactly_once_after_its_worker_is_killed(
    tmp_path, dataset, rubric, lead, fake_provider, settings, broker
):
    url = broker_url(broker)
    empty_broker(url)
    settings.EVALHUB_CHUNK_CASES = 4
    make_cases(dataset, CASES)
    fake_provider.control(latency_ms=150)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    # Windows of 2 s: the kill may land mid-window or between a window and the next.
    first = start_worker(tmp_path, "first", broker=url, EVALHUB_RUN_WINDOW_SECONDS="2")
    try:
        run = services.run_start(config=config, dataset=dataset, repeats=REPEATS, concurrency=2,
                                 spend_cap_usd=None, by=lead)
        queue_run_work(url, run.pk)
        total = CASES * REPEATS
        wait_for(lambda: fresh(lambda: Judgment.objects.filter(run=run).count()) >= 10, 60,
                 "the first worker to record some judgments")
    finally:
        kill(first)
    killed_at = fresh(lambda: Judgment.objects.filter(run=run).count())
    assert killed_at < total, "the run finished before the worker was killed: nothing was tested"
    time.sleep(1)
    assert fresh(lambda: Judgment.objects.filter(run=run).count()) == killed_at  # nothing is working on it now

    second = start_worker(tmp_path, "second", broker=url, EVALHUB_RUN_WINDOW_SECONDS="2")
    try:
        wait_for(lambda: fresh(lambda: Run.objects.get(pk=run.pk).status) == Run.Status.FINISHED, 120,
                 "the run to finish")
    finally:
        kill(second)

    run.refresh_from_db()
    pairs = list(Judgment.objects.filter(run=run).values_list("case_id", "repeat"))
    assert len(pairs) == len(set(pairs)) == total
    assert set(pairs) == {(case_id, r) for case_id in dataset.cases.values_list("pk", flat=True)
                          for r in range(1, REPEATS + 1)}
    assert run.done == total and run.not_evaluated == 0
    assert run.chunks.filter(done_at__isnull=True).count() == 0
    # The chunk in hand when the worker died was taken up again by the second.
    assert run.chunks.filter(attempts__gte=2).exists()
    assert run.lease_until is None
    assert stored_tallies(run) == recounted_tallies(run)  # the per-case counts too: none lost, none twice
