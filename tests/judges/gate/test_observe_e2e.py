"""Observe from day one, end to end: the installed `evalhub-gate` (its own process) against a live server and the
scripted stand-in. A new rubric enters observe on the promotion page with a config and no labels or run; the seeds'
golden set (no output) is the cases file; the agent answers in the flat reply shape; the check judges, the answers
fail, and observe records them without failing: exit 0, even under --require-calibrated."""

import io
import json

import pytest
from django.urls import reverse

from evalhub.models import ApiToken, Role, Scope
from judges.configs.services import judge_config_save
from judges.models import CiResult, Judgment, Run
from labeling.importing import Format
from labeling.importing.cases import cases_import
from labeling.models import Dataset, Label, Rubric
from tests.conftest import TEST_PROJECT, make_user, store_project
from tests.judges.gate.test_pipeline_e2e import gate  # the installed command as CI runs it

pytestmark = pytest.mark.django_db(transaction=True)

GOLDEN = [
    {"id": f"gs-{i}", "question": f"Can I return order {i} after 40 days?", "goldenAnswer": "No: within 30 days.",
     "expectedBehaviour": "Decline and cite the 30-day window.", "expectedTool": "lookup_order",
     "expectedToolArgument": {"order": i}, "expectedSource": "policy-returns"}
    for i in range(4)
]


def test_a_new_rubric_enters_observe_without_labels_and_the_check_records_its_failures(
    live_server, fake_provider, tmp_path, client
):
    lead = make_user("lena", role=Role.LEAD)
    dataset = Dataset.objects.create(project=store_project(), slug="golden", name="Golden set")
    stream = io.BytesIO("".join(json.dumps(row) + "\n" for row in GOLDEN).encode())
    cases_import(dataset=dataset, stream=stream, fmt=Format.JSONL)
    fake_provider.control(rule={"kind": "answer_contains", "text": "30 days"})
    rubric = Rubric.objects.create(project=store_project(), slug="return-window",
                                   name="Does the answer keep the return window?",
                                   criteria="Pass when the answer states the 30-day return window.")
    config = judge_config_save(rubric=rubric, by=lead, spec={
        "layers": ["behavioral"], "provider": "openai-compatible", "model": "gpt-4o-mini-2024-07-18",
        "base_url_env": "EVALHUB_JUDGE_OPENAI_URL", "api_key_env": "EVALHUB_JUDGE_API_KEY",
        "params": {"temperature": 0, "max_tokens": 200}, "timeout_s": 5, "max_attempts": 1,
    })
    # The lead's page: observe names the config; no label and no run exist.
    client.force_login(lead)
    response = client.post(reverse("judges:promotion_observe", args=[TEST_PROJECT, rubric.slug]),
                           {"action": "enter", "config": config.pk, "reason": "Start observing in CI."})
    assert response.status_code == 302
    assert not Label.objects.exists() and not Run.objects.exists()
    token = ApiToken.issue(project=store_project(), name="ci",
                           scopes=[Scope.CASES_READ, Scope.GATES_READ, Scope.RESULTS_WRITE],
                           created_by=lead)[1]
    server = live_server.url

    # The golden set, which has no answers yet, is what the pipeline's agent runs on.
    done = gate(tmp_path, "cases", "--server", server, "--dataset", "golden", "--out", "cases.jsonl", token=token)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [json.loads(line) for line in (tmp_path / "cases.jsonl").read_text().splitlines()]
    assert [c["external_id"] for c in lines] == [row["id"] for row in GOLDEN]
    # The agent answers in the flat reply shape, and misses the window every time.
    (tmp_path / "outputs.jsonl").write_text("".join(json.dumps({
        "id": c["external_id"], "answer": "Sure, returns are open for 90 days.", "retrievedSources": ["policy-returns"],
        "toolCalls": [{"name": "lookup_order", "argument": c["expected_tool_argument"], "result": "delivered"}],
    }) + "\n" for c in lines))

    calls_before = fake_provider.stats()["total"]
    done = gate(tmp_path, "check", "--config", f"{server}/api/gates", "--cases", "cases.jsonl", "--outputs",
                "outputs.jsonl", "--require-calibrated", "--no-cache", "--json", "results.json", "--post",
                f"{server}/api/ci-results", token=token)
    assert done.returncode == 0, done.stdout + done.stderr
    assert fake_provider.stats()["total"] - calls_before == len(GOLDEN)  # really judged, by the stand-in
    [result] = json.loads((tmp_path / "results.json").read_text())["rubrics"]
    assert (result["slug"], result["stage"], result["failed"], result["passed"]) == ("return-window", "observe", 4, 0)
    assert CiResult.objects.get(rubric=rubric).outcome == "recorded"
    assert not Judgment.objects.exists()  # CI results are kept apart from runs
