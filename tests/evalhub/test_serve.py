"""scripts/serve.sh, the production way to serve: gunicorn, a Celery worker and beat, against the test database.

The rows this test writes are committed (transactional_db), so the server in its own processes sees them.
"""

import os
import re
import signal
import socket
import subprocess
import time
from contextlib import closing

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connection

from evalhub.models import Membership, Role, User
from labeling.models import Verdict
from tests.conftest import PASSWORD
from tests.evalhub.test_deploy_settings import served_environment
from tests.judges.report_factories import label, make_cases, make_config, make_run

pytestmark = pytest.mark.worker


def _free_port() -> int:
    with closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _database_url() -> str:
    db = connection.settings_dict  # the test database pytest-django made
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def server(transactional_db, tmp_path):
    """scripts/serve.sh in its own process group; yields its base URL and stops it (SIGTERM) afterwards."""
    port = _free_port()
    env = served_environment(
        DATABASE_URL=_database_url(), EVALHUB_DATA_DIR=str(tmp_path), EVALHUB_BIND=f"127.0.0.1:{port}",
        WEB_CONCURRENCY="1", EVALHUB_WORKER_CONCURRENCY="1",
        DJANGO_DEBUG="1",  # serve.sh must override it
    )
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(["bash", "scripts/serve.sh"], cwd=settings.BASE_DIR, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):  # migrate, collectstatic and start-up: a minute on a busy machine
            if process.poll() is not None:
                pytest.fail(f"serve.sh exited with {process.returncode}:\n{log.read_text()}")
            try:
                httpx.get(f"{base}/accounts/login/", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.5)
        else:
            pytest.fail(f"serve.sh did not answer on {base}:\n{log.read_text()}")
        yield base, process, log
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _user_with_a_real_hash(username: str, role: str, project) -> User:
    # The server uses Django's default hashers; the tests' fast MD5 hasher is not among them.
    user = User.objects.create(username=username,
                               password=PBKDF2PasswordHasher().encode(PASSWORD, "serve-test-salt"))
    Membership.objects.create(project=project, user=user, role=role)
    return user


def _log_in(client: httpx.Client, base: str, username: str) -> None:
    page = client.get(f"{base}/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    response = client.post(f"{base}/accounts/login/", data={
        "username": username, "password": PASSWORD, "csrfmiddlewaretoken": token, "next": "/"})
    assert response.status_code == 302, response.text[:500]


def test_it_serves_the_labeling_and_report_pages(server, project, dataset, rubric, reviewer):
    base, process, log = server
    lead = _user_with_a_real_hash("lena", Role.LEAD, project)
    cases = make_cases(dataset, [(f"c{i}", "policy") for i in range(4)])
    for case in cases[:3]:  # c3 is left for the lead's queue
        label(case, rubric, reviewer, Verdict.PASS)
    run = make_run(make_config(rubric, lead), dataset, lead, {case: ["pass", "pass"] for case in cases})

    with httpx.Client(timeout=30) as client:
        _log_in(client, base, "lena")
        queue = client.get(f"{base}/p/{project.slug}/label/{dataset.slug}/{rubric.slug}/")
        assert queue.status_code == 200 and "Question c3?" in queue.text
        report = client.get(f"{base}/p/{project.slug}/runs/{run.pk}/report/")
        assert report.status_code == 200 and f"Calibration report <span class=\"muted\">run {run.pk}" in report.text

        # WhiteNoise serves the collected, content-hashed stylesheet, cached for good.
        css = re.search(r'href="(/static/css/app\.[0-9a-f]{12}\.css)"', report.text)
        assert css, "the stylesheet's name carries no hash: collectstatic did not run"
        stylesheet = client.get(base + css.group(1))
        assert stylesheet.status_code == 200 and stylesheet.headers["content-type"].startswith("text/css")
        assert stylesheet.text.startswith("/* evalhub")
        assert "immutable" in stylesheet.headers["cache-control"]

        missing = client.get(f"{base}/no/such/page/")  # DEBUG off: the styled page, no traceback
        assert missing.status_code == 404 and "There is nothing here" in missing.text

    # Three processes: gunicorn, the worker and beat, all stopped with the script.
    children = subprocess.run(["pgrep", "-g", str(process.pid), "-a"], capture_output=True, text=True).stdout
    # Celery retitles its processes where setproctitle is installed ("[celeryd: …] -A evalhub worker …"):
    # the arguments stay.
    assert "gunicorn" in children and "-A evalhub worker" in children and "-A evalhub beat" in children
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) != 0  # stopped by the signal
    assert subprocess.run(["pgrep", "-g", str(process.pid)], capture_output=True).returncode == 1, log.read_text()
