"""Bodies sent chunked with no Content-Length (as the OpenTelemetry JS exporter sends them) are read whole, with
the same size limit as any body, under the two servers evalhub documents: the real gunicorn (as
scripts/serve.sh runs it) and Django's runserver, each in its own process against the test database; and the
official JS exporter's traces, sent through Node where it is installed, become cases."""

import http.client
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from evalhub.models import ApiToken, Scope
from labeling.models import Case
from tests.conftest import store_project
from tests.evalhub.test_deploy_settings import served_environment
from tests.evalhub.test_serve import _database_url, _free_port
from tests.labeling.otlp.helpers import QUESTION, genai_trace, json_body, recording_tracer

URL = "/api/otlp/v1/traces?dataset=store-support"
LIMIT = 20_000  # EVALHUB_OTLP_MAX_BYTES of the servers below


@pytest.fixture(params=["gunicorn", "runserver"])
def web(request, transactional_db, tmp_path):
    """The server in its own process (threads, HTTP/1.1 keep-alive); yields (host, port)."""
    port = _free_port()
    env = served_environment(DATABASE_URL=_database_url(), EVALHUB_DATA_DIR=str(tmp_path),
                             EVALHUB_OTLP_MAX_BYTES=str(LIMIT), DJANGO_DEBUG="1")
    command = {
        "gunicorn": [sys.executable, "-m", "gunicorn", "evalhub.wsgi:application", "--bind", f"127.0.0.1:{port}",
                     "--worker-class", "gthread", "--workers", "1", "--threads", "2", "--no-control-socket"],
        "runserver": [sys.executable, "manage.py", "runserver", "--noreload", "--nostatic", f"127.0.0.1:{port}"],
    }[request.param]
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(command, cwd=settings.BASE_DIR, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        for _ in range(120):
            if process.poll() is not None:
                pytest.fail(f"{request.param} exited:\n{log.read_text()}")
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                connection.request("GET", "/accounts/login/")
                connection.getresponse().read()
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail(f"{request.param} did not answer:\n{log.read_text()}")
        yield "127.0.0.1", port
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture
def token(lead) -> str:
    return ApiToken.issue(project=store_project(), name="agent", scopes=[Scope.CASES_WRITE], created_by=lead)[1]


def chunks(body: bytes, size: int = 1000):
    for start in range(0, len(body), size):
        yield body[start:start + size]


def test_a_chunked_body_is_read_whole_and_the_connection_stays_in_step(web, dataset, token):
    tracer, exporter = recording_tracer()
    trace_id = genai_trace(tracer)
    body = json_body(exporter.get_finished_spans())
    assert len(body) > 2000  # several chunks
    connection = http.client.HTTPConnection(*web, timeout=30)

    connection.request("POST", URL, body=chunks(body), encode_chunked=True, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    answer = connection.getresponse()
    text = answer.read()
    assert answer.status == 200, text
    assert json.loads(text) == {}
    assert Case.objects.get(external_id=trace_id).input == QUESTION
    # The next request on the same connection is read as a request, not as the rest of the body.
    connection.request("GET", URL, headers={"Authorization": f"Bearer {token}"})
    second = connection.getresponse()
    assert second.status == 405, second.read()
    second.read()


def test_a_chunked_body_over_the_limit_is_refused_as_any_body(web, dataset, token):
    connection = http.client.HTTPConnection(*web, timeout=30)

    connection.request("POST", URL, body=chunks(b"\x00" * (LIMIT + 1)), encode_chunked=True, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/x-protobuf"})
    answer = connection.getresponse()

    assert answer.status == 413
    assert f"over the limit of {LIMIT:,} bytes".encode() in answer.read()
    assert not Case.objects.exists()


JS = Path(__file__).resolve().parent / "js"


def js_agent() -> Path:
    """The JS agent's folder with its packages (tests/labeling/otlp/js, installed by npm ci once)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node is not installed here: the JS exporter's test runs where it is (CI has Node 20)")
    target = Path(settings.BASE_DIR) / "var" / "test-packages" / "js"
    if not (target / "node_modules" / "@opentelemetry" / "exporter-trace-otlp-http").exists():
        target.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "package-lock.json", "agent.mjs"):
            shutil.copy(JS / name, target / name)
        done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=target, capture_output=True, text=True,
                              timeout=300)
        if done.returncode:
            pytest.skip(f"npm could not install the JS exporter: {done.stderr[-300:]}")
    shutil.copy(JS / "agent.mjs", target / "agent.mjs")
    return target


def test_the_official_js_exporters_chunked_json_becomes_a_case(web, dataset, token):
    folder = js_agent()
    host, port = web

    done = subprocess.run(["node", "agent.mjs", f"http://{host}:{port}/api/otlp/v1/traces", token, dataset.slug],
                          cwd=folder, capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stderr[-2000:]
    [trace_id] = json.loads(done.stdout.strip().splitlines()[-1])
    case = Case.objects.get(external_id=trace_id)
    assert case.output == "Order A-2001 had not shipped, so I cancelled it."
    # The two tool spans started in the same millisecond: in the order the model asked for them.
    assert [call["name"] for call in case.trace["toolCalls"]] == ["getOrderStatus", "cancelOrder"]
    assert case.trace["toolCalls"][0]["result"] == {"status": "processing"}
