"""The demo's data from before projects, migrated into one project and back, on SQLite and PostgreSQL: every
run's calibration report and pass rate and the gate config read exactly as the code from before projects read
them (expected-figures.*.json.gz, written by figures.py on that code), after migrating forward, back and forward
again. The files were written again when the agent's pass rate changed (the unlabeled side became the cases not
labeled, and an estimate needs 30 labels) and runs gained `calls_not_recorded`: every other figure was checked
identical to the before-projects files then. The databases are the demo as `load_demo` left it before projects (demo-before-projects.*.gz)."""

import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from django.conf import settings

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
BEFORE_PROJECTS = [("judges", "0021"), ("labeling", "0017"), ("evalhub", "0001")]


def _run(env: dict, *args: str) -> str:
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _figures(env: dict) -> dict:
    return json.loads(_run(env, str(HERE / "figures.py")))


def _expected(backend: str) -> dict:
    with gzip.open(HERE / f"expected-figures.{backend}.json.gz", "rt") as f:
        return json.load(f)


ROLES_BEFORE = {"lena": "lead", "rita": "reviewer", "rob": "reviewer", "ria": "reviewer", "ada": "admin"}
ROLES_SQL = "SELECT username, role FROM evalhub_user"


def _forward_back_forward(env: dict, expected: dict, query) -> None:
    """Forward, back (the global roles come back), forward again: the figures as before projects each time."""
    _run(env, "manage.py", "migrate", "--noinput")
    assert _figures(env) == expected
    for app, migration in BEFORE_PROJECTS:
        _run(env, "manage.py", "migrate", app, migration, "--noinput")
    assert dict(query(ROLES_SQL)) == ROLES_BEFORE
    _run(env, "manage.py", "migrate", "--noinput")
    assert _figures(env) == expected


def _environment(**extra: str) -> dict:
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    return {**env, "EVALHUB_DEFAULT_PROJECT": "store-support", **extra}


def test_the_sqlite_demo_keeps_every_figure(tmp_path):
    with gzip.open(HERE / "demo-before-projects.sqlite3.gz") as packed, open(tmp_path / "evalhub.sqlite3", "wb") as db:
        shutil.copyfileobj(packed, db)
    env = _environment(EVALHUB_DATA_DIR=str(tmp_path))

    def query(sql: str) -> list:
        with sqlite3.connect(tmp_path / "evalhub.sqlite3") as db:
            return db.execute(sql).fetchall()

    _forward_back_forward(env, _expected("sqlite3"), query)

    with sqlite3.connect(tmp_path / "evalhub.sqlite3") as db:
        assert db.execute("SELECT slug FROM evalhub_project").fetchall() == [("store-support",)]
        roles = dict(db.execute("SELECT u.username, m.role FROM evalhub_membership m "
                                "JOIN evalhub_user u ON u.id = m.user_id").fetchall())
    assert roles == {"lena": "lead", "rita": "reviewer", "rob": "reviewer", "ria": "reviewer"}  # ada: the admin


@pytest.mark.skipif(shutil.which("psql") is None, reason="restoring the dump needs PostgreSQL's psql")
def test_the_postgresql_demo_keeps_every_figure():
    url = urlsplit(os.environ.get("DATABASE_URL") or settings.DATABASES["default"].get("TEST_URL", ""))
    if not url.scheme.startswith("postgres"):
        pytest.skip("the tests run on SQLite")
    name = f"evalhub_before_projects_{os.getpid()}"
    server = url._replace(path="/postgres").geturl()
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    database = url._replace(path=f"/{name}").geturl()
    try:
        with gzip.open(HERE / "demo-before-projects.postgresql.sql.gz") as dump:
            subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", database], input=dump.read(), check=True,
                           capture_output=True)
        env = _environment(DATABASE_URL=database, EVALHUB_DATA_DIR=str(ROOT / "var" / name))

        def query(sql: str) -> list:
            with psycopg.connect(database) as db:
                return db.execute(sql).fetchall()

        _forward_back_forward(env, _expected("postgresql"), query)

        with psycopg.connect(database) as db:
            assert db.execute("SELECT slug FROM evalhub_project").fetchall() == [("store-support",)]
            assert db.execute("SELECT count(*) FROM judges_cachedjudgment WHERE project_id IS NULL").fetchone() == (0,)
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
