"""End to end, as a pipeline runs it: the installed `evalhub-gate` (its own process) against a live server.

It fetches a sampled cases file (`evalhub-gate cases`, a cases:read token), a scripted agent answers
each case, and `evalhub-gate check --cases … --outputs …` judges the answers against the server's gate
config: a deterministic safety rubric (contract checks only: it needs no provider and no labels) and
a behavioral rubric on the fake provider (a scripted stand-in over HTTP that passes an answer stating
"30 days"). A spend cap runs out part-way through the behavioral rubric: exit 3, and 1 once the rubric
is fail_closed. The budget is in the JSON and the JUnit; the results are posted and shown on the
rubric's promotion page.
"""

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from decimal import Decimal
from pathlib import Path

import pytest

from evalhub.models import ApiToken, Role, Scope
from judges.configs.services import judge_config_save
from judges.models import CiResult, ModelPrice, RubricEvent, Run
from judges.promotion.services import rubric_promote, rubric_thresholds_change
from judges.runs.services import run_start
from labeling.models import Case, Dataset, Rubric, case_split, labeled_content_hash
from tests.conftest import make_user, store_project

pytestmark = pytest.mark.django_db(transaction=True)

GATE = Path(sys.executable).parent / "evalhub-gate"  # installed by [project.scripts]
MODEL = "gpt-4o-mini-2024-07-18"


@pytest.fixture
def eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the evidence runs work in-process: no broker, no worker


def promote_without_labels(rubric: Rubric, run: Run, lead) -> None:
    """A deterministic safety rubric gated with no labels, through the audited services a lead's pages call."""
    rubric_thresholds_change(rubric=rubric, reason="a safety contract: no labels needed", by=lead,
                             require_human_evidence=False)
    for stage in ("observe", "warn", "gate"):
        rubric_promote(rubric=rubric, to_stage=stage, run=run, reason="CI end-to-end test", by=lead)


def promote_to_gate(rubric: Rubric, run: Run, lead) -> None:
    """The evidence events a lead's promotions leave, written directly: an LLM judge needs 30 labeled
    cases to be promoted, and this test is about CI, not the promotion rules."""
    for from_stage, to_stage in (("draft", "observe"), ("observe", "warn"), ("warn", "gate")):
        RubricEvent.objects.create(rubric=rubric, kind=RubricEvent.Kind.PROMOTE, from_stage=from_stage,
                                   to_stage=to_stage, run=run, figures={}, reason="CI end-to-end test", by=lead)
    Rubric.objects.filter(pk=rubric.pk).update(stage=Rubric.Stage.GATE)


@pytest.fixture
def world(eager, fake_provider):
    lead = make_user("lena", role=Role.LEAD)
    dataset = Dataset.objects.create(project=store_project(), slug="store-support", name="Store support")
    cases = []
    for i in range(40):
        external_id, question = f"case-{i:03}", f"Can I return order {i}?"
        output = "Yes: returns are accepted within 30 days of delivery."
        cases.append(Case(
            dataset=dataset, external_id=external_id, input=question, output=output, category="policy",
            golden_answer="Within 30 days.", split=case_split(external_id),
            content_hash=labeled_content_hash(input=question, output=output, trace={}),
        ))
    Case.objects.bulk_create(cases)
    fake_provider.control(rule={"kind": "answer_contains", "text": "30 days"})
    # Only output tokens cost, at $1,000 a million: a call reserves its 200 max_tokens ($0.20) and then
    # costs what the stand-in's answer used (~$0.03), so a $0.25 cap lets two calls through one by one.
    ModelPrice.objects.create(model=MODEL, input_per_mtok=Decimal(0), output_per_mtok=Decimal(1000), updated_by=lead)

    safety = Rubric.objects.create(project=store_project(), slug="safe-actions",
                                   name="No refund tool, no credential in the answer",
                                   criteria="Fail when the agent issues a refund or leaks a credential.")
    safety_config = judge_config_save(rubric=safety, by=lead, spec={
        "layers": ["contract"], "contract_checks": ["answer_present", "forbidden_tools", "no_secrets"],
        "forbidden_tools": ["issue_refund"],
    })
    policy = Rubric.objects.create(project=store_project(), slug="return-policy",
                                   name="Does the answer follow the return policy?",
                                   criteria="Pass when the answer states the 30-day return window.")
    policy_config = judge_config_save(rubric=policy, by=lead, spec={
        "layers": ["behavioral"], "provider": "openai-compatible", "model": MODEL,
        "base_url_env": "EVALHUB_JUDGE_OPENAI_URL", "api_key_env": "EVALHUB_JUDGE_API_KEY",
        "params": {"temperature": 0, "max_tokens": 200}, "timeout_s": 5, "max_attempts": 1,
    })
    for rubric, config, promote in ((safety, safety_config, promote_without_labels),
                                    (policy, policy_config, promote_to_gate)):
        run = run_start(config=config, dataset=dataset, repeats=1, concurrency=4, spend_cap_usd=None, by=lead)
        run.refresh_from_db()
        assert run.status == Run.Status.FINISHED
        promote(rubric, run, lead)
    token = ApiToken.issue(project=store_project(), name="ci",
                           scopes=[Scope.CASES_READ, Scope.GATES_READ, Scope.RESULTS_WRITE],
                           created_by=lead)[1]
    return {"lead": lead, "token": token, "fake": fake_provider, "policy": policy}


def gate(workdir: Path, *args: str, token: str, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    """The installed command as CI runs it: its own process, the token in EVALHUB_TOKEN."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "EVALHUB_")) or k.startswith("EVALHUB_JUDGE_")}
    env["EVALHUB_TOKEN"] = token
    env.update(extra_env or {})
    return subprocess.run([str(GATE), *args], cwd=workdir, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def scripted_agent(cases_file: Path, outputs_file: Path) -> None:
    """The pipeline's agent: answers each case's input, and looks an order up only where a tool is expected."""
    with open(cases_file) as cases, open(outputs_file, "w") as outputs:
        for line in cases:
            case = json.loads(line)
            tool = case.get("expected_tool")
            calls = [{"name": tool, "argument": {}, "result": "ok"}] if tool else []
            outputs.write(json.dumps({
                "external_id": case["external_id"],
                "output": f"{case['input']} Yes: returns are accepted within 30 days of delivery.",
                "trace": {"toolCalls": calls},
                "metadata": {"agent_model": "scripted-agent"},
            }) + "\n")


def test_a_pipeline_fetches_cases_runs_its_agent_and_is_gated_within_its_budget(live_server, world, tmp_path, client):
    assert GATE.exists(), "pip install -e . installs the evalhub-gate console script"
    token, fake = world["token"], world["fake"]
    server = live_server.url

    # A stable sample: the same seed gives the same ten cases.
    fetch = ["cases", "--server", server, "--dataset", "store-support", "--sample", "10", "--seed", "pr-suite-v1"]
    done = gate(tmp_path, *fetch, "--out", "cases.jsonl", token=token)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "wrote 10 case(s) of dataset store-support" in done.stdout
    assert gate(tmp_path, *fetch, "--out", "again.jsonl", token=token).returncode == 0
    lines = [json.loads(line) for line in (tmp_path / "cases.jsonl").read_text().splitlines()]
    assert [c["external_id"] for c in lines] == [
        json.loads(line)["external_id"] for line in (tmp_path / "again.jsonl").read_text().splitlines()
    ]
    assert len(lines) == 10 and not any("output" in c for c in lines)  # the agent writes the answers

    scripted_agent(tmp_path / "cases.jsonl", tmp_path / "outputs.jsonl")

    # The spend cap runs out part-way: the safety rubric costs nothing and passes all ten; the
    # behavioral one is judged on two cases and the rest is not evaluated: exit 3.
    calls_before = fake.stats()["total"]  # the evidence run's
    check = ["check", "--config", f"{server}/api/gates", "--cases", "cases.jsonl", "--outputs", "outputs.jsonl",
             "--max-cost-usd", "0.25", "--concurrency", "1", "--no-cache", "--post", f"{server}/api/ci-results"]
    done = gate(tmp_path, *check, "--json", "results.json", "--junit", "junit.xml", token=token)
    assert done.returncode == 3, done.stdout + done.stderr
    assert token not in done.stdout + done.stderr
    assert "NOT EVALUATED return-policy" in done.stdout and "spend cap" in done.stdout
    assert "evalhub-gate: exit 3 (not evaluated)" in done.stdout
    assert fake.stats()["total"] - calls_before == 2

    payload = json.loads((tmp_path / "results.json").read_text())
    rubrics = {r["slug"]: r for r in payload["rubrics"]}
    safety, policy = rubrics["safe-actions"], rubrics["return-policy"]
    assert (safety["passed"], safety["calls"], safety["cost_usd"]) == (10, 0, 0.0)
    assert (policy["passed"], policy["not_evaluated"], policy["calls"]) == (2, 8, 2)
    assert 0 < policy["cost_usd"] <= 0.25 and policy["output_tokens"] > 0
    assert payload["totals"]["calls"] == 2 and payload["max_cost_usd"] == 0.25
    suites = {s.get("name"): s for s in ET.parse(tmp_path / "junit.xml").iter("testsuite")}
    properties = {p.get("name"): p.get("value") for p in suites["evalhub.return-policy"].iter("property")}
    assert properties["calls"] == "2" and float(properties["cost_usd"]) == pytest.approx(policy["cost_usd"])
    assert suites["evalhub.return-policy"].get("skipped") == "8"

    # Under fail_closed, what the cap left unjudged counts as failed: exit 1.
    Rubric.objects.filter(pk=world["policy"].pk).update(fail_closed=True)
    done = gate(tmp_path, *check, token=token)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL return-policy" in done.stdout and "(fail_closed: counts as fail): spend cap" in done.stdout

    # Both runs were posted, and the rubric's promotion page shows them.
    assert list(CiResult.objects.filter(rubric=world["policy"]).order_by("id").values_list("outcome", flat=True)) == [
        "not_evaluated", "fail",
    ]
    client.force_login(world["lead"])
    page = client.get(f"/p/store/rubrics/{world['policy'].slug}/promotion/").content.decode()
    assert "2 CI runs" in page and "4 passed" in page and "16 not evaluated" in page
