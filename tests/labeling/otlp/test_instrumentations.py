"""The instrumentations teams install, as they send: a ShopNest agent (tests/labeling/otlp/agent.py) on the real
`openai` SDK against the scripted stand-in, instrumented by the real package, exported by the official OTLP/HTTP
exporters to the live receiver. Each trace must become a case with its question, answer, both tool calls in
the order made with their results, and the retrieved documents' text as context (docs/otlp.md's table)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalhub.models import ApiToken, Scope
from labeling.models import Case, OtlpTrace
from tests.conftest import store_project
from tests.labeling.otlp.agent import ANSWER, DOCUMENTS, MODEL, QUESTION, expected_calls, script

ROOT = Path(__file__).resolve().parents[3]
# Older releases teams still run, each installed beside the dev extra's (one environment holds one version) in
# a folder of its own, first on the agent's path: opentelemetry-instrumentation-openai-v2 2.3b0, whose message
# content goes out as log records, with the wrapt it was made for (wrapt 2 renamed the argument it passes).
# (OpenLLMetry 0.47.5 cannot be run so: it needs an OpenTelemetry API older than the SDK's, with
# opentelemetry._events.)
OLDER = {
    "openai-v2-events": ("opentelemetry-instrumentation-openai-v2==2.3b0", "wrapt<2"),
}


def older_release_path(kind: str) -> str:
    """A folder holding the older release (its other dependencies are the environment's), installed once."""
    target = ROOT / "var" / "test-packages" / kind
    if not (target / "installed").exists():
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                               str(target), *OLDER[kind]], capture_output=True, text=True, timeout=300)
        if done.returncode:
            pytest.skip(f"{' '.join(OLDER[kind])} could not be installed: {done.stderr[-300:]}")
        (target / "installed").touch()
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
                                  "openllmetry"])
def test_each_instrumentations_traces_become_whole_cases(kind, live_server, fake_provider, dataset, token):
    runs = 2
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
