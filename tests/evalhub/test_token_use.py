"""A token's last_used_at is written at most once a minute and never waited for (evalhub/access.py): on SQLite
every write takes the one write lock, which a busy writer may hold for long."""

import sqlite3
import subprocess
import sys
import time
from datetime import timedelta

import httpx
import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from evalhub.models import ApiToken, Scope
from tests.conftest import store_project
from tests.labeling.otlp.served import gunicorn

_MAKE_TOKEN = """
from evalhub.models import ApiToken, Membership, Project, Role, Scope, User
project = Project.objects.create(slug="team", name="Team")
lead = User.objects.create(username="lead")
Membership.objects.create(project=project, user=lead, role=Role.LEAD)
print(ApiToken.issue(project=project, name="ci", scopes=[Scope.CASES_READ], created_by=lead)[1])
"""


@pytest.mark.django_db
def test_it_notes_a_tokens_use_once_a_minute(client, lead):
    raw = ApiToken.issue(project=store_project(), name="ci", scopes=[Scope.CASES_READ], created_by=lead)[1]
    headers = {"Authorization": f"Bearer {raw}"}

    def writes() -> list[str]:
        with CaptureQueriesContext(connection) as queries:
            assert client.get("/api/token", headers=headers).status_code == 200
        return [q["sql"] for q in queries if q["sql"].startswith("UPDATE")]

    assert len(writes()) == 1  # the first use is noted
    assert writes() == []  # within the minute: no write at all
    ApiToken.objects.update(last_used_at=timezone.now() - timedelta(seconds=61))
    assert len(writes()) == 1


def test_a_token_request_does_not_wait_for_sqlites_write_lock(tmp_path):
    data = tmp_path / "data"
    env = {"DATABASE_URL": "", "CELERY_BROKER_URL": "", "EVALHUB_DATA_DIR": str(data),
           "DJANGO_SETTINGS_MODULE": "evalhub.settings"}
    manage = [sys.executable, "manage.py"]
    environment = {**{k: v for k, v in __import__("os").environ.items()}, **env}
    subprocess.run([*manage, "migrate", "-v0"], cwd=settings.BASE_DIR, env=environment, check=True, timeout=300)
    token = subprocess.run([*manage, "shell", "-c", _MAKE_TOKEN], cwd=settings.BASE_DIR, env=environment, check=True,
                           capture_output=True, text=True, timeout=120).stdout.strip().splitlines()[-1]
    with gunicorn(tmp_path, **env) as served:
        writer = sqlite3.connect(data / "evalhub.sqlite3", isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")  # another writer holds the lock (a receive, a run's batch)
        try:
            began = time.monotonic()
            held = httpx.get(f"{served.base}/api/token", headers={"Authorization": f"Bearer {token}"}, timeout=60)
            waited = time.monotonic() - began
        finally:
            writer.execute("ROLLBACK")
        free = httpx.get(f"{served.base}/api/token", headers={"Authorization": f"Bearer {token}"}, timeout=60)

    assert held.status_code == 200, held.text  # was: 30 s of waiting, then 500 "database is locked"
    assert waited < 10  # SQLite's busy timeout is 30 s: the request did not wait it out
    assert free.status_code == 200
    noted = sqlite3.connect(data / "evalhub.sqlite3").execute("SELECT last_used_at FROM evalhub_apitoken").fetchone()
    assert noted[0] is not None  # noted once the lock was free
