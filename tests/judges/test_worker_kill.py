"""A real Celery worker (Redis broker) SIGKILLed mid-run, and a new one started: the run finishes
with exactly one judgment per (case, repeat), none lost, counters true."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection

from judges.configs import services as config_services
from judges.models import Judgment, Run
from judges.runs import services
from labeling.models import Case, case_split, labeled_content_hash

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
CASES, REPEATS = 24, 2


def start_worker(tmp_path: Path, name: str, fake_provider) -> subprocess.Popen:
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        # The worker must read the test database this test writes to, and the same broker.
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "EVALHUB_DATA_DIR": str(tmp_path / name),
        "EVALHUB_CHUNK_LEASE_SECONDS": "3",
        "EVALHUB_SWEEP_SECONDS": "2",
        "EVALHUB_JUDGE_OPENAI_URL": fake_provider.openai_base_url,
        "EVALHUB_JUDGE_API_KEY": "sk-test-not-a-real-key",
    }
    log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 - the worker owns it until killed
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "evalhub", "worker", "--beat", "--concurrency=2",
         f"--hostname={name}@%h", "--loglevel=INFO"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def judged(run: Run) -> int:
    connection.close()  # a fresh read each poll, outside any open snapshot
    return Judgment.objects.filter(run=run).count()


@pytest.fixture
def empty_broker():
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()


def test_it_finishes_a_run_exactly_once_after_its_worker_is_killed(
    tmp_path, dataset, rubric, lead, fake_provider, empty_broker, settings
):
    if not settings.CELERY_BROKER_URL.startswith("redis"):
        pytest.fail("This test needs CELERY_BROKER_URL=redis://… (scripts/test.sh sets it).")
    settings.EVALHUB_CHUNK_CASES = 4
    Case.objects.bulk_create(
        Case(dataset=dataset, external_id=f"k{i:02}", input=f"Where is order {i}?", output=f"Order {i} ships.",
             split=case_split(f"k{i:02}"),
             content_hash=labeled_content_hash(input=f"Where is order {i}?", output=f"Order {i} ships.", trace={}))
        for i in range(CASES)
    )
    fake_provider.control(latency_ms=150)
    config = config_services.judge_config_save(
        rubric=rubric, by=lead,
        spec={"layers": ["behavioral"], "provider": "openai", "model": "gpt-4o-mini-2024-07-18",
              "base_url_env": "EVALHUB_JUDGE_OPENAI_URL", "api_key_env": "EVALHUB_JUDGE_API_KEY", "timeout_s": 5},
    )
    first = start_worker(tmp_path, "first", fake_provider)
    try:
        run = services.run_start(config=config, dataset=dataset, repeats=REPEATS, concurrency=2,
                                 spend_cap_usd=None, by=lead)
        total = CASES * REPEATS
        wait_for(lambda: judged(run) >= 10, 60, "the first worker to record some judgments")
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    killed_at = judged(run)
    assert killed_at < total, "the run finished before the worker was killed: nothing was tested"
    time.sleep(1)
    assert judged(run) == killed_at  # nothing is working on it now

    second = start_worker(tmp_path, "second", fake_provider)
    try:
        wait_for(lambda: Run.objects.get(pk=run.pk).status == Run.Status.FINISHED, 120, "the run to finish")
    finally:
        os.killpg(second.pid, signal.SIGKILL)
        second.wait()

    run.refresh_from_db()
    pairs = list(Judgment.objects.filter(run=run).values_list("case_id", "repeat"))
    assert len(pairs) == len(set(pairs)) == total
    assert set(pairs) == {(case_id, r) for case_id in dataset.cases.values_list("pk", flat=True)
                          for r in range(1, REPEATS + 1)}
    assert run.done == total and run.not_evaluated == 0
    assert run.chunks.filter(done_at__isnull=True).count() == 0
    # The killed chunk was claimed twice: once by each worker.
    assert run.chunks.filter(attempts__gte=2).exists()
