"""While the database cannot be reached, an API answers JSON 503 with Retry-After (never Django's HTML 500), and
the CI command reads it as "server unavailable" (evalhub/outage.py)."""

import subprocess
import sys
from pathlib import Path

import httpx
from django.db import OperationalError
from django.test import RequestFactory
from kombu.exceptions import OperationalError as BrokerError

from evalhub.outage import outage_of, server_error
from tests.labeling.otlp.served import free_port, gunicorn

TOKEN = "evh_" + "x" * 43  # never checked: the database that would know it cannot be reached


def test_an_api_answers_json_503_and_the_gate_says_server_unavailable_while_postgresql_is_down(tmp_path):
    closed = free_port()  # nothing listens there: PostgreSQL is down
    with gunicorn(tmp_path, DATABASE_URL=f"postgres://postgres@127.0.0.1:{closed}/evalhub") as served:
        gates = httpx.get(f"{served.base}/api/gates", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        otlp = httpx.post(f"{served.base}/api/otlp/v1/traces?dataset=d", content=b"",
                          headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/x-protobuf"},
                          timeout=30)
        gate = subprocess.run(
            [str(Path(sys.executable).parent / "evalhub-gate"), "cases", "--server", served.base, "--dataset", "d",
             "--out", str(tmp_path / "cases.jsonl"), "--token", TOKEN],
            capture_output=True, text=True, timeout=120)

    for response in (gates, otlp):
        assert response.status_code == 503 and response.headers["Retry-After"] == "30"
        assert response.headers["Content-Type"] == "application/json"
        assert response.json()["error"].startswith("The server is unavailable: the database cannot be reached.")
    assert gate.returncode == 2
    assert "HTTP 503, server unavailable (its database or broker is down); nothing was stored, try again in 30 s" in (
        gate.stderr), gate.stderr


def test_another_failure_of_an_api_is_json_500():
    # The handler as Django calls it, while a failure that is no outage is being handled.
    try:
        raise ValueError("a bug")
    except ValueError:
        response = server_error(RequestFactory().get("/api/gates"))
    assert response.status_code == 500 and response["Content-Type"] == "application/json"
    assert "Retry-After" not in response


def test_an_outage_is_the_database_or_the_broker():
    assert outage_of(OperationalError("could not connect")) == "the database"
    assert outage_of(BrokerError("Error 111 connecting to redis")) == "the task broker"
    assert outage_of(ValueError("a bug")) is None
