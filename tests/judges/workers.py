"""Real Celery worker processes for the tests whose behaviour depends on them (leases, kills, caps, cancel).

Each worker reads the test database and a broker of the test's choosing: the Redis one scripts/test.sh
sets (TEST_CELERY_BROKER_URL), or RabbitMQ (TEST_AMQP_BROKER_URL, by default the local server's guest
account on the default vhost).
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import redis
from amqp.exceptions import NotFound
from django.conf import settings
from django.db import connection
from kombu import Connection

from evalhub.celery import app
from judges.runs.services import RUN_WORK_TASK

ROOT = Path(__file__).resolve().parents[2]
AMQP_URL = os.environ.get("TEST_AMQP_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")
QUEUE = "celery"


def broker_url(kind: str) -> str:
    if kind == "redis":
        if not settings.CELERY_BROKER_URL.startswith("redis"):
            raise AssertionError("These tests need CELERY_BROKER_URL=redis://… (scripts/test.sh sets it).")
        return settings.CELERY_BROKER_URL
    return AMQP_URL


def empty_broker(url: str) -> None:
    """No message of an earlier test left to deliver."""
    if url.startswith("redis"):
        redis.Redis.from_url(url).flushdb()
        return
    with Connection(url, connect_timeout=5) as conn:
        try:
            conn.default_channel.queue_purge(QUEUE)
        except NotFound:
            pass  # no worker has declared the queue yet


def queue_run_work(url: str, run_id: int) -> None:
    """Queue a run's work on `url`, whichever broker this test process's own app publishes to."""
    with app.connection_for_write(url) as conn:
        app.send_task(RUN_WORK_TASK, args=(run_id,), connection=conn)


def start_worker(tmp_path: Path, name: str, *, broker: str, concurrency: int = 2, **env: str) -> subprocess.Popen:
    """A worker with beat (its sweep picks up runs whose lease ran out), in its own process group."""
    db = settings.DATABASES["default"]
    environ = {
        **os.environ,
        # The worker must read the test database this test writes to.
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "CELERY_BROKER_URL": broker,
        "EVALHUB_DATA_DIR": str(tmp_path / name),  # its own beat schedule file
        "EVALHUB_RUN_LEASE_SECONDS": "3",
        "EVALHUB_SWEEP_SECONDS": "2",
        # The variables a test config names come with os.environ (the fake_provider fixture sets them).
        **env,
    }
    environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 - the worker owns it until it is killed
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "evalhub", "worker", "--beat", f"--concurrency={concurrency}",
         "-Q", QUEUE, f"--hostname={name}@%h", "--loglevel=INFO"],
        cwd=ROOT, env=environ, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )


def kill(worker: subprocess.Popen) -> None:
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait()


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def fresh(query):
    """A query's answer read anew: the connection closed first, so no snapshot hides the workers' writes."""
    connection.close()
    return query()
