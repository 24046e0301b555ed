"""The instrumentations teams install, as they send: a ShopNest agent (tests/labeling/otlp/agent.py) on the real
`openai` SDK against the scripted stand-in, instrumented by the real package, exported by the official OTLP/HTTP
exporters to the live receiver. Each trace must become a case with its question, answer, both tool calls in
the order made with their results, and the retrieved documents' text as context (docs/otlp.md's table)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evalhub.models import ApiToken, Scope
from labeling.models import Case, OtlpTrace
from tests.conftest import store_project
from tests.labeling.otlp.agent import ANSWER, DOCUMENTS, MODEL, QUESTION, expected_calls, script

ROOT = Path(__file__).resolve().parents[3]
# Older releases teams still run, each installed in a folder of its own, first on the agent's path (one
# environment holds one version of a package), once: the folder is kept between runs.
OLDER = {
    # opentelemetry-instrumentation-openai-v2 2.3b0, whose message content goes out as log records, with the
    # wrapt it was made for (wrapt 2 renamed the argument it passes); its other dependencies are the environment's.
    "openai-v2-events": ("--no-deps", "opentelemetry-instrumentation-openai-v2==2.3b0", "wrapt<2"),
    # OpenLLMetry 0.47.5 sends through opentelemetry._events, gone from the API since 1.44: so the whole
    # OpenTelemetry stack of its day (1.38.0 / 0.59b0, October 2025) with the dependencies it resolves to,
    # the official OTLP/HTTP exporter included. It runs on the environment's `openai`.
    "openllmetry-0.47": ("opentelemetry-instrumentation-openai==0.47.5", "opentelemetry-api==1.38.0",
                         "opentelemetry-sdk==1.38.0", "opentelemetry-exporter-otlp-proto-http==1.38.0",
                         "opentelemetry-instrumentation==0.59b0", "opentelemetry-semantic-conventions==0.59b0"),
}
# What pip says when it cannot reach the registry: only then is the test skipped. ("versions: none": the index
# in use lists none of a pinned release's versions, all on PyPI, so it is not PyPI or not reached.)
UNREACHABLE = ("NewConnectionError", "Failed to establish a new connection", "Temporary failure in name resolution",
               "Name or service not known", "ConnectTimeout", "ReadTimeout", "ProxyError", "Network is unreachable",
               "(from versions: none)")


def older_release_path(kind: str) -> str:
    """A folder holding the older release, installed once (again when its requirements change)."""
    target = ROOT / "var" / "test-packages" / kind
    marker = target / "installed"
    wanted = " ".join(OLDER[kind])
    if not marker.exists() or marker.read_text() != wanted:
        shutil.rmtree(target, ignore_errors=True)  # a half-made or outdated folder would be mixed in
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(target),
                               *OLDER[kind]], capture_output=True, text=True, timeout=600)
        if done.returncode:
            if any(sign in done.stderr for sign in UNREACHABLE):
                pytest.skip(f"the package registry is unreachable, so {wanted} could not be installed")
            pytest.fail(f"{wanted} could not be installed: {done.stderr[-2000:]}")
        marker.write_text(wanted)
    return str(target)


@pytest.fixture
def token(lead) -> str:
    return ApiToken.issue(project=store_project(), name="agent", scopes=[Scope.CASES_WRITE], created_by=lead)[1]


def run_agent(kind: str, *, live_server, fake_provider, token: str, dataset, runs: int) -> list[str]:
    """The agent in its own process, instrumented by `kind`; the trace ids it made."""
    fake_provider.control(model=MODEL, script=[turn for n in range(1001, 1001 + runs) for turn in script(n)])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if kind in OLDER:
        env["PYTHONPATH"] = f"{older_release_path(kind)}{os.pathsep}{ROOT}"
        # The agent must run the folder's releases, not the environment's newer ones of the same name.
        pinned = dict(requirement.split("==") for requirement in OLDER[kind] if "==" in requirement)
        found = subprocess.run([sys.executable, "-c", "import sys, importlib.metadata as m; "
                                "print(*(m.version(name) for name in sys.argv[1:]))", *pinned],
                               capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
        assert found.stdout.split() == list(pinned.values()), found.stderr[-3000:]
    done = subprocess.run(
        [sys.executable, "-m", "tests.labeling.otlp.agent", "--instrumentation", kind,
         "--openai-url", fake_provider.openai_base_url, "--traces-url", f"{live_server.url}/api/otlp/v1/traces",
         "--logs-url", f"{live_server.url}/api/otlp/v1/logs", "--token", token, "--dataset", dataset.slug,
         "--runs", str(runs)],
        capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["openinference-tools", "openinference", "openai-v2", "openai-v2-events",
                                  "openllmetry", "openllmetry-0.47"])
def test_each_instrumentations_traces_become_whole_cases(kind, live_server, fake_provider, dataset, token):
    runs = 12  # the issue's twelve traces per instrumentation
    trace_ids = run_agent(kind, live_server=live_server, fake_provider=fake_provider, token=token, dataset=dataset,
                          runs=runs)

    cases = {case.external_id: case for case in Case.objects.filter(dataset=dataset)}
    assert set(cases) == set(trace_ids), OtlpTrace.objects.values_list("trace_id", "problem")
    for n, trace_id in zip(range(1001, 1001 + runs), trace_ids, strict=True):
        case = cases[trace_id]
        assert case.input == QUESTION.format(n=n)
        assert case.output == ANSWER.format(n=n)
        assert case.trace["toolCalls"] == expected_calls(n)
        assert case.trace["retrievedSources"] == [doc_id for doc_id, _ in DOCUMENTS]
        assert case.trace["context"] == "\n\n".join(text for _, text in DOCUMENTS)
        assert case.metadata["agent_model"].startswith(MODEL)
    assert not OtlpTrace.objects.exists()
