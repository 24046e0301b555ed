"""The embedded default holds a team and a run at once: five reviewers label through a
production server (gunicorn, threads) while a real worker records a contract-only run, all on one
SQLite file with the filesystem broker. No "database is locked", no error response, every judgment
and every label recorded."""

import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.evalhub import embedded_site

pytestmark = pytest.mark.worker

ROOT = Path(__file__).resolve().parents[2]
CASES, REPEATS = 300, 2
CASE_FIELD = re.compile(r'name="case" value="(\d+)"')
HASH_FIELD = re.compile(r'name="content_hash" value="([0-9a-f]{64})"')


def embedded_env(data_dir: Path) -> dict:
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    return env | {"EVALHUB_DATA_DIR": str(data_dir), "DJANGO_SETTINGS_MODULE": "evalhub.settings",
                  "DJANGO_ALLOWED_HOSTS": "127.0.0.1", "DJANGO_DEBUG": "0", "EVALHUB_SWEEP_SECONDS": "5"}


def site(env: dict, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "tests.evalhub.embedded_site", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def start(command: list[str], env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def stop(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def answers(base: str) -> bool:
    try:
        return httpx.get(f"{base}/accounts/login/", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def signed_in(base: str, username: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=60)
    client.get("/accounts/login/")
    response = client.post("/accounts/login/", data={"username": username, "password": embedded_site.PASSWORD,
                                                    "csrfmiddlewaretoken": client.cookies["csrftoken"]})
    assert response.status_code == 302, f"{username} could not sign in"
    client.headers["X-CSRFToken"] = client.cookies["csrftoken"]
    return client


def test_five_reviewers_and_a_run_share_the_embedded_default_without_a_lock_error(tmp_path):
    env = embedded_env(tmp_path / "data")
    site(env, "setup", str(CASES))
    # The production server serves the hashed static files collectstatic writes (as scripts/serve.sh does).
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    database = sqlite3.connect(tmp_path / "data" / "evalhub.sqlite3", timeout=30)
    assert database.execute("PRAGMA journal_mode").fetchone() == ("wal",)

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    worker = start([sys.executable, "-m", "celery", "-A", "evalhub", "worker", "--beat", "--concurrency=2",
                    "--loglevel=INFO"], env, tmp_path / "worker.log")
    server = start([sys.executable, "-m", "gunicorn", "evalhub.wsgi:application", f"--bind=127.0.0.1:{port}",
                    "--workers=2", "--threads=4", "--no-control-socket"], env, tmp_path / "server.log")
    try:
        wait_for(lambda: "ready" in (tmp_path / "worker.log").read_text(), 60, "the worker")
        wait_for(lambda: answers(base), 60, "the server")
        clients = [signed_in(base, name) for name in embedded_site.REVIEWERS]
        run_over = threading.Event()
        statuses: list[int] = []
        labeled: list[str] = []

        def label(client: httpx.Client) -> None:
            queue = f"/p/{embedded_site.PROJECT}/label/{embedded_site.DATASET}/{embedded_site.RUBRIC}/"
            page = client.get(queue)
            statuses.append(page.status_code)
            # Label what is shown and take the next, for as long as the run goes (and at least 10 each).
            for n in range(CASES):
                case, digest = CASE_FIELD.search(page.text), HASH_FIELD.search(page.text)
                if case is None or (run_over.is_set() and n >= 10):
                    return
                page = client.post(f"{queue}label/", headers={"HX-Request": "true"},
                                   data={"case": case.group(1), "content_hash": digest.group(1), "verdict": "pass"})
                statuses.append(page.status_code)
                labeled.append(case.group(1))

        reviewers = [threading.Thread(target=label, args=(client,)) for client in clients]
        for thread in reviewers:
            thread.start()
        # The reviewers are labeling before the run is queued, so the whole run (queued, taken, recorded)
        # happens while they label, however loaded the machine (queued first, a busy machine once let a
        # contract-only run finish before the reviewers' first label).
        wait_for(lambda: len(labeled) >= 5, 60, "the reviewers to label")
        labeled_before = len(labeled)
        run_id = int(site(env, "run", str(REPEATS)))

        def run_status() -> str:
            return database.execute("SELECT status FROM judges_run WHERE id = ?", [run_id]).fetchone()[0]

        wait_for(lambda: run_status() == "finished", 120, "the run to finish")
        labeling_during_run = len(labeled) - labeled_before
        run_over.set()
        for thread in reviewers:
            thread.join(60)
    finally:
        stop(server)
        stop(worker)

    logs = (tmp_path / "worker.log").read_text() + (tmp_path / "server.log").read_text()
    assert "database is locked" not in logs
    assert "Traceback" not in logs
    assert set(statuses) == {200}
    assert labeling_during_run >= 10, "the reviewers hardly labeled while the run went: nothing was tested"
    judgments = database.execute("SELECT COUNT(*), COUNT(DISTINCT case_id || '/' || repeat) FROM judges_judgment "
                                 "WHERE run_id = ?", [run_id]).fetchone()
    assert judgments == (CASES * REPEATS, CASES * REPEATS)
    assert database.execute("SELECT done FROM judges_run WHERE id = ?", [run_id]).fetchone() == (CASES * REPEATS,)
    total, most = database.execute("SELECT SUM(n), MAX(n) FROM (SELECT COUNT(*) AS n FROM labeling_label "
                                   "GROUP BY case_id)").fetchone()
    assert total == len(labeled)  # every label posted is recorded
    assert most <= 2  # and no case got more labels than the rubric asks
