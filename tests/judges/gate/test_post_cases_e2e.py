"""End to end, the loop: the installed `evalhub-gate check --post-cases` (its own process) against a live server.

What CI judged becomes cases of a living dataset and the judgments of a CI run per rubric; posting the
same ref again changes nothing; a reviewer labels a posted case from the queue and the CI run's
calibration report counts the label. A server error mid-post leaves that chunk unwritten and the command
says what was posted; a token that cannot post, or a scope that selects no rubric, is refused (exit 2)
before anything is judged. The judges: a deterministic contract rubric (no provider) and a behavioral one
on the scripted stand-in over HTTP, both at observe.
"""

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from evalhub.models import ApiToken, Role, Scope
from judges.calibration.selectors import run_figures
from judges.configs.services import judge_config_save
from judges.models import Judgment, RubricEvent, Run
from judges.runs.services import RunError, run_retry_not_evaluated
from labeling.models import Case, Dataset, Rubric, case_split
from tests.conftest import PASSWORD, make_user, store_project
from tests.judges.gate.test_pipeline_e2e import gate

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "gpt-4o-mini-2024-07-18"
HOSTILE_ID = "x|y <b>@octocat [link](https://e.vil)"


def observe(rubric: Rubric, config, lead) -> None:
    """At observe, the config named by an (empty) evidence run: the promotion rules are not this test's."""
    golden = Dataset.objects.get_or_create(project=rubric.project, slug="golden", defaults={"name": "Golden"})[0]
    evidence = Run.objects.create(config=config, dataset=golden, status=Run.Status.FINISHED, created_by=lead)
    RubricEvent.objects.create(rubric=rubric, kind=RubricEvent.Kind.PROMOTE, from_stage="draft", to_stage="observe",
                               run=evidence, figures={}, reason="observe", by=lead)
    Rubric.objects.filter(pk=rubric.pk).update(stage=Rubric.Stage.OBSERVE)


@pytest.fixture
def world(fake_provider):
    lead = make_user("lena", role=Role.LEAD)
    reviewer = make_user("rita")
    traffic = Dataset.objects.create(project=store_project(), slug="ci-traffic", name="CI traffic")
    traffic.reviewers.add(reviewer)
    fake_provider.control(rule={"kind": "answer_contains", "text": "30 days"})
    safety = Rubric.objects.create(project=store_project(), slug="safe-actions", name="No refund tool",
                                   criteria="Fail on a refund.")
    safety_config = judge_config_save(rubric=safety, by=lead, spec={
        "layers": ["contract"], "contract_checks": ["answer_present", "forbidden_tools"],
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
    for rubric, config in ((safety, safety_config), (policy, policy_config)):
        observe(rubric, config, lead)
    token = ApiToken.issue(project=store_project(), name="ci",
                           scopes=[Scope.GATES_READ, Scope.CASES_WRITE, Scope.RESULTS_WRITE],
                           created_by=lead)[1]
    return {"lead": lead, "reviewer": reviewer, "token": token, "fake": fake_provider, "policy": policy,
            "safety": safety}


def write_outputs(path: Path, n: int, *, refund: set[int] = frozenset(), hostile: bool = False) -> None:
    """Whole cases as the agent answered them: every one states 30 days; those in `refund` call the refund tool."""
    with open(path, "w") as fh:
        for i in range(n):
            calls = [{"name": "issue_refund", "argument": {}, "result": "ok"}] if i in refund else []
            external_id = HOSTILE_ID if hostile and i == 0 else f"case-{i:03}"
            fh.write(json.dumps({
                "external_id": external_id, "input": f"Can I return order {i}?",
                "output": "Yes: returns are accepted within 30 days of delivery.",
                "trace": {"toolCalls": calls}, "category": "tools" if i % 2 else "policy",
                "golden_answer": "Within 30 days.",
            }) + "\n")


def check(tmp_path: Path, server: str, token: str, *args: str, env: dict | None = None):
    """The installed command, with GitHub Actions' variables when `env` gives them."""
    return gate(tmp_path, "check", "--config", f"{server}/api/gates", "--outputs", "outputs.jsonl",
                "--no-cache", *args, token=token, extra_env=env)


def test_it_posts_the_judged_cases_as_ci_runs_once_and_a_reviewers_label_counts(
    live_server, world, tmp_path, client
):
    token, server = world["token"], live_server.url
    write_outputs(tmp_path / "outputs.jsonl", 6, refund={1}, hostile=True)
    summary = tmp_path / "summary.md"
    done = check(tmp_path, server, token, "--post-cases", "ci-traffic", "--ref", "feature/x@abc123",
                 "--repeats", "2", "--json", "results.json", "--junit", "junit.xml",
                 env={"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_ACTIONS": "true",
                      "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "acme/agent",
                      "GITHUB_RUN_ID": "77", "GITHUB_HEAD_REF": "feature/x"})
    assert done.returncode == 0, done.stdout + done.stderr  # observe records only: a failing case passes the check
    assert "posted 6 case(s) of safe-actions to dataset ci-traffic" in done.stdout
    assert "6 new, 0 changed, 0 already there" in done.stdout

    posted = {c.external_id: c for c in Case.objects.filter(dataset__slug="ci-traffic")}
    assert set(posted) == {f"feature/x@abc123/case-{i:03}" for i in range(1, 6)} | {f"feature/x@abc123/{HOSTILE_ID}"}
    case = posted["feature/x@abc123/case-001"]
    assert case.metadata["ci"] == {"ref": "feature/x@abc123", "branch": "feature/x", "external_id": "case-001",
                                   "run_url": "https://github.com/acme/agent/actions/runs/77"}
    assert case.golden_answer == "Within 30 days." and case.category == "tools"
    assert all(c.split == case_split(c.metadata["ci"]["external_id"]) for c in posted.values())

    runs = Run.objects.filter(source=Run.Source.CI, ref="feature/x@abc123").select_related("config__rubric")
    assert sorted(r.config.rubric.slug for r in runs) == ["return-policy", "safe-actions"]
    for run in runs:
        assert run.status == Run.Status.FINISHED and run.repeats == 2 and run.total == run.done == 12
    safety_run = runs.get(config__rubric__slug="safe-actions")
    assert Judgment.objects.get(run=safety_run, case=case, repeat=1).outcome == "fail"  # the refund tool

    # The JSON and JUnit per case and repeat; the step summary per stage, hostile text inert.
    results = json.loads((tmp_path / "results.json").read_text())
    safety_json = next(r for r in results["rubrics"] if r["slug"] == "safe-actions")
    refund_case = next(c for c in safety_json["cases"] if c["external_id"] == "case-001")
    assert refund_case["verdict"] == "fail" and refund_case["flipped"] is False
    assert [r["repeat"] for r in refund_case["repeats"]] == [1, 2]
    assert refund_case["repeats"][0]["failed_checks"] == ["forbidden_tools"]
    assert refund_case["repeats"][0]["layer"] == "contract"
    assert safety_json["categories"] == {"policy": {"passed": 3, "failed": 0, "not_evaluated": 0},
                                         "tools": {"passed": 2, "failed": 1, "not_evaluated": 0}}
    junit = ET.fromstring((tmp_path / "junit.xml").read_bytes())
    testcase = junit.find(".//testcase[@name='case-001'][@classname='evalhub.safe-actions']")
    props = {p.get("name"): p.get("value") for p in testcase.find("properties")}
    assert props["verdict"] == "fail" and json.loads(props["repeat.2"])["failed_checks"] == ["forbidden_tools"]
    markdown = summary.read_text()
    assert "#### observe" in markdown and "safe" in markdown
    assert "<b>" not in markdown and "](" not in markdown and "|y" not in markdown and "@octocat" not in markdown

    # The same ref again changes nothing.
    again = check(tmp_path, server, token, "--post-cases", "ci-traffic", "--ref", "feature/x@abc123",
                  "--repeats", "2")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "0 new, 0 changed, 6 already there" in again.stdout
    assert Case.objects.filter(dataset__slug="ci-traffic").count() == 6
    assert Judgment.objects.filter(run__in=runs).count() == 24 and Run.objects.filter(source="ci").count() == 2
    for run in runs:
        run.refresh_from_db()
        assert run.total == run.done == 12

    # A reviewer finds a posted case in the queue and labels it; the CI run's report counts the label.
    assert run_figures(run=safety_run)["n"] == 0
    client.login(username="rita", password=PASSWORD)
    page = client.get("/p/store/label/ci-traffic/safe-actions/").content.decode()
    case_id = int(re.search(r'name="case" value="(\d+)"', page).group(1))
    shown = Case.objects.get(pk=case_id)
    assert shown.external_id in posted
    response = client.post("/p/store/label/ci-traffic/safe-actions/label/", {
        "case": case_id, "content_hash": shown.content_hash, "verdict": "pass", "note": "",
    })
    assert response.status_code in (200, 302)
    assert run_figures(run=safety_run)["n"] == 1

    # The run page says what the run is; a CI run has nothing to re-run.
    client.login(username="lena", password=PASSWORD)
    page = client.get(f"/p/store/runs/{safety_run.pk}/").content.decode()
    assert "A CI run" in page and "feature/x@abc123" in page and "/retry/" not in page
    with pytest.raises(RunError):
        run_retry_not_evaluated(run=safety_run)


def test_it_compares_with_the_base_ref(live_server, world, tmp_path):
    token, server = world["token"], live_server.url
    write_outputs(tmp_path / "outputs.jsonl", 4, refund={2})
    assert check(tmp_path, server, token, "--post-cases", "ci-traffic", "--ref", "base1",
                 "--rubric", "safe-actions").returncode == 0
    write_outputs(tmp_path / "outputs.jsonl", 4, refund={1})  # case-001 breaks, case-002 is fixed
    done = check(tmp_path, server, token, "--post-cases", "ci-traffic", "--ref", "head1", "--base-ref", "base1",
                 "--rubric", "safe-actions", "--json", "results.json")
    assert done.returncode == 0, done.stdout + done.stderr
    against = json.loads((tmp_path / "results.json").read_text())["rubrics"][0]["against_base"]
    assert against == {"ref": "base1", "new_failures": ["case-001"], "new_passes": ["case-002"]}
    assert "NEWLY FAILING case-001" in done.stdout


def test_a_server_error_mid_post_leaves_its_chunk_unwritten_and_says_what_was_posted(
    live_server, world, tmp_path, monkeypatch
):
    from judges.runs import ci_cases

    token, server = world["token"], live_server.url
    write_outputs(tmp_path / "outputs.jsonl", 300)  # two chunks of at most 250
    real, calls = ci_cases.judgments_record, []

    def fails_the_second_time(**kwargs):
        calls.append(1)
        written = real(**kwargs)  # the chunk's cases and judgments are written, then the server fails
        if len(calls) == 2:
            raise RuntimeError("the database went away")
        return written

    monkeypatch.setattr(ci_cases, "judgments_record", fails_the_second_time)
    done = check(tmp_path, server, token, "--post-cases", "ci-traffic", "--ref", "r1", "--rubric", "safe-actions")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "chunk 2 of 2" in done.stderr and "HTTP 500" in done.stderr
    assert "250 case(s) of safe-actions were posted before it, in 1 chunk(s)" in done.stderr
    assert Case.objects.filter(dataset__slug="ci-traffic").count() == 250
    assert Judgment.objects.filter(run__ref="r1").count() == 250

    monkeypatch.setattr(ci_cases, "judgments_record", real)
    done = check(tmp_path, server, token, "--post-cases", "ci-traffic", "--ref", "r1", "--rubric", "safe-actions")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "50 new, 0 changed, 250 already there" in done.stdout
    assert Judgment.objects.filter(run__ref="r1").count() == 300


@pytest.mark.parametrize(("args", "scopes", "message"), [
    (("--post-cases", "ci-traffic", "--ref", "r1"), [Scope.GATES_READ, Scope.RESULTS_WRITE], "lacks cases:write"),
    (("--rubric", "no-such-rubric"), None, "the gate config has no rubric no-such-rubric"),
    (("--rubric", "return-policy", "--layers", "contract"), None, "selects no rubric"),
    (("--stage", "gate"), None, "selects no rubric"),
])
def test_it_refuses_before_judging(live_server, world, tmp_path, args, scopes, message):
    token = world["token"]
    if scopes is not None:
        token = ApiToken.issue(project=store_project(), name="narrow", scopes=scopes, created_by=world["lead"])[1]
    write_outputs(tmp_path / "outputs.jsonl", 3)
    done = check(tmp_path, live_server.url, token, *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert world["fake"].requests() == [] and not Case.objects.filter(dataset__slug="ci-traffic").exists()


def test_contract_layers_judge_only_the_deterministic_rubric(live_server, world, tmp_path):
    write_outputs(tmp_path / "outputs.jsonl", 3)
    done = check(tmp_path, live_server.url, world["token"], "--layers", "contract", "--json", "r.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [r["slug"] for r in json.loads((tmp_path / "r.json").read_text())["rubrics"]] == ["safe-actions"]
    assert world["fake"].requests() == []


def test_it_redacts_with_the_datasets_kinds_before_judging_and_posting(live_server, world, tmp_path):
    """The dataset redacts e-mail addresses: the installed command reads that from the server, so neither the
    judge's prompt nor the posted case ever holds the address, though the command was given no --redact."""
    Dataset.objects.filter(slug="ci-traffic").update(redact="email")
    email = "mia.jones@example.org"
    with open(tmp_path / "outputs.jsonl", "w") as fh:
        fh.write(json.dumps({"external_id": "case-000", "input": f"I am {email}: can I return this?",
                             "output": f"Yes {email}, within 30 days.", "golden_answer": "Within 30 days."}) + "\n")

    done = check(tmp_path, live_server.url, world["token"], "--post-cases", "ci-traffic", "--ref", "r1")

    assert done.returncode == 0, done.stdout + done.stderr
    prompts = [request["prompt"] for request in world["fake"].requests()]
    assert prompts and all(email not in prompt and "[EMAIL_1]" in prompt for prompt in prompts)
    case = Case.objects.get(dataset__slug="ci-traffic", external_id="r1/case-000")
    assert (case.input, case.output) == ("I am [EMAIL_1]: can I return this?", "Yes [EMAIL_1], within 30 days.")


def test_post_sends_each_case_with_its_repeats_and_a_body_over_the_bound_is_refused_whole(
    live_server, world, tmp_path, monkeypatch
):
    from judges.models import CiResult
    from judges.promotion import api as results_api

    token, server = world["token"], live_server.url
    write_outputs(tmp_path / "outputs.jsonl", 6, refund={1}, hostile=True)
    post = ("--post", f"{server}/api/ci-results", "--repeats", "2")
    done = check(tmp_path, server, token, *post, "--json", "results.json")
    assert done.returncode == 0, done.stdout + done.stderr
    written = {item["slug"]: item["cases"] for item in json.loads((tmp_path / "results.json").read_text())["rubrics"]}
    stored = {result.rubric.slug: result for result in CiResult.objects.select_related("rubric")}
    assert set(stored) == {"safe-actions", "return-policy"}
    for slug, result in stored.items():
        assert result.cases == written[slug]  # what --json writes, case by case and repeat by repeat
        assert len(result.cases) == result.total == 6 and all(len(c["repeats"]) == 2 for c in result.cases)
    refund = next(c for c in stored["safe-actions"].cases if c["external_id"] == "case-001")
    assert refund["verdict"] == "fail" and refund["repeats"][0]["failed_checks"] == ["forbidden_tools"]
    assert refund["repeats"][0]["layer"] == "contract"

    # A body over the server's bound: a clear error, exit 2, and nothing stored.
    monkeypatch.setattr(results_api, "CI_RESULTS_MAX_BYTES", 300)
    over = check(tmp_path, server, token, *post)
    assert over.returncode == 2, over.stdout + over.stderr
    assert "HTTP 413" in over.stderr and "over the limit of 300 bytes" in over.stderr
    assert "nothing was stored" in over.stderr
    assert CiResult.objects.count() == 2
