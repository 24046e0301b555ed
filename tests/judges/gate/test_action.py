"""The light install and the GitHub Action (action.yml), run as a runner runs them.

The module builds one venv with the action's own install step (`pip install` of the repository, no extras,
from the local pip cache: ~1 min, once per module, so `--dist loadfile` builds it once) and checks it holds none
of the server's packages. Then it runs the action's steps the way GitHub's runner does: action.yml is parsed,
each step's `if:` and `${{ }}` expressions resolved (the few forms the action uses; any other fails the test),
and each `run:` script run by bash with the variables a runner sets (GITHUB_OUTPUT, GITHUB_STEP_SUMMARY,
GITHUB_EVENT_PATH, RUNNER_TEMP, GITHUB_ACTION_PATH …). `uses:` steps (setup-python) are skipped: the test's
Python is the runner's. The gate config comes from a live server; the judge is the fake provider (a scripted
stand-in over HTTP, not a model); GitHub's REST API is the stand-in of forge_stand_in.py.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml
from django.conf import settings
from django.test import Client

from evalhub.models import ApiToken, Role, Scope
from judges.configs.services import judge_config_save
from judges.models import CiResult, RubricEvent, Run
from judges.runs.services import run_start
from labeling.models import Case, Dataset, Rubric, case_split, labeled_content_hash
from tests.conftest import make_user, store_project
from tests.judges.gate.forge_stand_in import GITHUB_TOKEN, ForgeServer

ROOT = Path(__file__).resolve().parents[3]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
STEPS = ACTION["runs"]["steps"]
# What the light install must not bring (importable module names): web framework, task queue, broker clients,
# database driver, dataframe library, web servers, the OTLP receiver's protobufs.
SERVER_MODULES = ("django", "celery", "kombu", "redis", "psycopg", "pandas", "gunicorn", "whitenoise", "axes",
                  "django_htmx", "dj_database_url", "google.protobuf", "opentelemetry.proto")
GOOD = "Yes: returns are accepted within 30 days of delivery."
BAD = "Sorry, we never take anything back."
_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")

pytestmark = pytest.mark.django_db(transaction=True)


class Runner:
    """A GitHub runner for this one composite action: one RUNNER_TEMP for the module (the install step's venv
    is made once, then its outputs are reused: `reuse_install`)."""

    def __init__(self, temp: Path, action_path: Path) -> None:
        self.temp, self.action_path = temp, action_path
        self.installed: dict[str, str] | None = None

    def run(self, inputs: dict[str, str], env: dict[str, str], workspace: Path, *, reuse_install: bool = True):
        """Run every step; the exit code (the first failing step's, else 0), the step outputs, the log."""
        values = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
        values.update(inputs)
        outputs: dict[str, dict[str, str]] = {}
        summary = workspace / "step-summary.md"
        log, code = [], 0
        for step in STEPS:
            step_id = step.get("id", "")
            if "if" in step and not self._condition(step["if"], values, outputs, env):
                outputs[step_id] = {}
                continue
            if "uses" in step:
                continue
            if step_id == "install" and reuse_install and self.installed is not None:
                outputs[step_id] = self.installed
                continue
            out_file = workspace / f"output-{step_id}"
            out_file.write_text("")
            step_env = {**env, "GITHUB_OUTPUT": str(out_file), "GITHUB_STEP_SUMMARY": str(summary),
                        "RUNNER_TEMP": str(self.temp), "GITHUB_ACTION_PATH": str(self.action_path),
                        "GITHUB_WORKSPACE": str(workspace)}
            step_env.update({k: self._render(v, values, outputs, env) for k, v in step.get("env", {}).items()})
            done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                                  cwd=workspace, env=step_env, capture_output=True, text=True, timeout=600,
                                  check=False)
            log.append(done.stdout + done.stderr)
            outputs[step_id] = dict(line.split("=", 1) for line in out_file.read_text().splitlines() if "=" in line)
            if step_id == "install" and done.returncode == 0:
                self.installed = outputs[step_id]
            if done.returncode:
                code = done.returncode
                break
        summary_text = summary.read_text() if summary.exists() else ""
        return code, outputs, "\n".join(log), summary_text

    def _value(self, expr: str, values, outputs, env) -> str:
        if expr.startswith("inputs."):
            return values[expr.removeprefix("inputs.")]
        if match := re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr):
            return outputs.get(match.group(1), {}).get(match.group(2), "")
        if expr == "github.token":
            return env.get("_GITHUB_JOB_TOKEN", "")
        raise AssertionError(f"action.yml uses an expression this runner does not know: {expr}")

    def _render(self, text: str, values, outputs, env) -> str:
        rendered = _EXPR.sub(lambda m: self._value(m.group(1), values, outputs, env), str(text))
        # An input's default may itself be an expression (github-token).
        return _EXPR.sub(lambda m: self._value(m.group(1), values, outputs, env), rendered)

    def _condition(self, condition: str, values, outputs, env) -> bool:
        match = re.fullmatch(r"([\w.-]+) == '([^']*)'", condition.strip())
        assert match, f"action.yml uses a condition this runner does not know: {condition}"
        return self._value(match.group(1), values, outputs, env) == match.group(2)


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    """The action's checkout (what `uses: owner/evalhub@v1` fetches: the packages and pyproject; copied so the
    install's build leaves nothing in the worktree) and a RUNNER_TEMP."""
    action_path = tmp_path_factory.mktemp("action")
    for name in ("pyproject.toml", "README.md", "action.yml"):
        shutil.copy(ROOT / name, action_path / name)
    for package in ("evalhub", "judges", "labeling"):
        shutil.copytree(ROOT / package, action_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    return Runner(tmp_path_factory.mktemp("runner-temp"), action_path)


def runner_env(forge=None, event: Path | None = None) -> dict[str, str]:
    """The runner's environment: the machine's (the judge's EVALHUB_JUDGE_* variables kept), this venv's
    Python first on PATH as setup-python would put one, and GitHub's variables."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "EVALHUB_", "VIRTUAL_ENV", "PYTHON")) or k.startswith("EVALHUB_JUDGE_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env.update({"GITHUB_ACTIONS": "true", "CI": "true", "GITHUB_REPOSITORY": "acme/agent",
                "GITHUB_SERVER_URL": "https://github.example", "GITHUB_RUN_ID": "4242", "GITHUB_SHA": "head-sha",
                "_GITHUB_JOB_TOKEN": GITHUB_TOKEN})
    if forge is not None:
        env["GITHUB_API_URL"] = forge.url
    if event is not None:
        env["GITHUB_EVENT_PATH"] = str(event)
    return env


@pytest.fixture(scope="module")
def light(runner, tmp_path_factory):
    """The light client, installed by the action's own install step."""
    workspace = tmp_path_factory.mktemp("install")
    env = runner_env()
    values = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    [install] = [step for step in STEPS if step.get("id") == "install"]
    out = workspace / "output"
    out.write_text("")
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", install["run"]], cwd=workspace,
                          env={**env, "GITHUB_OUTPUT": str(out), "RUNNER_TEMP": str(runner.temp),
                               "GITHUB_ACTION_PATH": str(runner.action_path)},
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    runner.installed = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert values["python-version"] >= "3.12"
    return Path(runner.installed["python"])


def test_the_light_install_brings_none_of_the_servers_packages(light):
    probe = ("import importlib.util, json, sys; "
             "print(json.dumps([m for m in sys.argv[1:] if importlib.util.find_spec(m.split('.')[0]) and "
             "importlib.util.find_spec(m)]))")
    done = subprocess.run([str(light), "-I", "-c", probe, *SERVER_MODULES], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []
    listed = json.loads(subprocess.run([str(light), "-m", "pip", "list", "--format", "json"], capture_output=True,
                                       text=True, check=True).stdout)
    names = {p["name"].lower() for p in listed} - {"pip", "setuptools", "evalhub"}
    assert len(names) <= 40, sorted(names)
    for args in (["--help"], ["check", "--help"]):
        help_text = subprocess.run([str(light.parent / "evalhub-gate"), *args], capture_output=True, text=True,
                                   check=False)
        assert help_text.returncode == 0 and help_text.stdout.startswith("usage: evalhub-gate"), help_text.stderr
    assert "--comment {github,gitlab}" in help_text.stdout
    # The gate's whole import graph, the comment module's included, loads without them.
    imported = subprocess.run([str(light), "-I", "-c", "import sys, judges.gate.cli, judges.gate.comment; "
                               "print(sorted({m.split('.')[0] for m in sys.modules}))"],
                              capture_output=True, text=True, check=True).stdout
    assert not {m.split(".")[0] for m in SERVER_MODULES if m != "google.protobuf"} & set(json.loads(
        imported.replace("'", '"')))


@pytest.fixture
def world(settings, fake_provider):
    """A behavioral rubric on the fake provider (passes an answer stating "30 days") promoted to gate, and a CI
    token of the project."""
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the evidence run works in-process
    lead = make_user("lena", role=Role.LEAD)
    dataset = Dataset.objects.create(project=store_project(), slug="store-support", name="Store support")
    Case.objects.bulk_create([
        Case(dataset=dataset, external_id=f"case-{i:03}", input="Can I return it?", output=GOOD, category="policy",
             split=case_split(f"case-{i:03}"),
             content_hash=labeled_content_hash(input="Can I return it?", output=GOOD, trace={}))
        for i in range(10)
    ])
    fake_provider.control(rule={"kind": "answer_contains", "text": "30 days"})
    rubric = Rubric.objects.create(project=store_project(), slug="return-policy", name="Return policy",
                                   criteria="Pass when the answer states the 30-day return window.")
    config = judge_config_save(rubric=rubric, by=lead, spec={
        "layers": ["behavioral"], "provider": "openai-compatible", "model": "gpt-4o-mini-2024-07-18",
        "base_url_env": "EVALHUB_JUDGE_OPENAI_URL", "api_key_env": "EVALHUB_JUDGE_API_KEY",
        "params": {"temperature": 0}, "timeout_s": 5, "max_attempts": 1,
    })
    run = run_start(config=config, dataset=dataset, repeats=1, concurrency=4, spend_cap_usd=None, by=lead)
    assert Run.objects.get(pk=run.pk).status == Run.Status.FINISHED
    # The evidence events a lead's promotions leave, written directly: this test is about CI, not promotion.
    for from_stage, to_stage in (("draft", "observe"), ("observe", "warn"), ("warn", "gate")):
        RubricEvent.objects.create(rubric=rubric, kind=RubricEvent.Kind.PROMOTE, from_stage=from_stage,
                                   to_stage=to_stage, run=run, figures={}, reason="CI test", by=lead)
    Rubric.objects.filter(pk=rubric.pk).update(stage=Rubric.Stage.GATE)
    token = ApiToken.issue(project=store_project(), name="ci",
                           scopes=[Scope.GATES_READ, Scope.RESULTS_WRITE, Scope.CASES_WRITE], created_by=lead)[1]
    return {"token": token, "rubric": rubric, "fake": fake_provider, "lead": lead}


def opened_as(user, url: str) -> tuple[int, str]:
    """GET an absolute URL of the live server with the user's session: the status and the page."""
    client = Client()
    client.force_login(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    request = urllib.request.Request(url, headers={"Cookie": cookie})
    with urllib.request.build_opener(NoRedirect).open(request, timeout=30) as response:
        return response.status, response.read().decode()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect (to the login page, say) is the answer itself, not followed."""

    def redirect_request(self, *args, **kwargs):
        return None


AGENT = """python - <<'EOF'
import json, os
answer = os.environ.get("AGENT_ANSWER", "")
with open(os.environ["EVALHUB_OUTPUTS"], "w") as out:
    for i in range(3):
        out.write(json.dumps({"external_id": f"pr-{i}", "input": "Can I return it?",
                              "output": answer if i == 2 else "Yes: returns are accepted within 30 days."}) + "\\n")
with open("agent-env.json", "w") as out:
    json.dump(sorted(os.environ), out)
EOF"""


def push(tmp_path: Path, sha: str, base: str) -> dict[str, str]:
    """A push to pull request #7: its head commit and its base's, as the runner's variables and event say."""
    event = tmp_path / f"event-{sha}.json"
    event.write_text(json.dumps({"pull_request": {"number": 7, "base": {"sha": base}}}))
    return {"GITHUB_EVENT_PATH": str(event), "GITHUB_SHA": sha}


def test_the_action_judges_writes_the_summary_and_keeps_one_comment_updated(light, runner, world, live_server,
                                                                           tmp_path):
    inputs = {"server": live_server.url, "token": world["token"], "agent-command": AGENT, "cache-key": "k" * 32,
              "post-cases": "store-support"}
    with ForgeServer() as forge:
        env = runner_env(forge)
        # The first push passes; its judged cases are posted as the CI run of sha-1.
        code, outputs, log, summary = runner.run(inputs, {**env, **push(tmp_path, "sha-1", "sha-0"),
                                                          "AGENT_ANSWER": GOOD}, tmp_path)
        assert code == 0 and outputs["gate"]["exit-code"] == "0", log
        assert "### evalhub-gate: pass (exit 0)" in summary
        [comment] = forge.comments[("acme/agent", 7)]
        # The rubric's row links to evalhub's record of this run (its CI result page, as the server's answer to
        # --post named it) and to the queue of the cases it posted for labelling (--post-cases).
        [first] = CiResult.objects.filter(rubric=world["rubric"])
        page = f"{live_server.url}/p/store/rubrics/return-policy/promotion/ci-results/{first.pk}/"
        queue = f"{live_server.url}/p/store/label/store-support/return-policy/"
        assert (f"| [return-policy]({page}) | gate | pass | 3 | 0 | 0 | - |" in comment["body"]
                and comment["body"].count(f"| [cases]({queue}) |") == 1), comment["body"]
        assert "not posted" not in comment["body"]
        assert f"CI result of return-policy: {page}" in log and f"cases of return-policy to label: {queue}" in log
        # Both resolve for the project's lead, over HTTP, as a reviewer following the link would.
        status, html = opened_as(world["lead"], page)
        assert status == 200 and 'commit <span class="mono">sha-1</span>' in html
        assert opened_as(world["lead"], queue)[0] == 200
        # The agent ran without a secret of the gate's.
        agent_env = set(json.loads((tmp_path / "agent-env.json").read_text()))
        assert not agent_env & {"EVALHUB_TOKEN", "EVALHUB_CACHE_KEY", "GITHUB_TOKEN"}

        # The next push breaks pr-2: the job fails, the same comment says so, against the base sha-1.
        (tmp_path / "step-summary.md").unlink()
        code, outputs, log, summary = runner.run(inputs, {**env, **push(tmp_path, "sha-2", "sha-1"),
                                                          "AGENT_ANSWER": BAD}, tmp_path)
        assert code == 1 and outputs["gate"]["exit-code"] == "1", log
        assert "::error title=evalhub gate return-policy::pr-2: fail" in log
        assert "### evalhub-gate: fail (exit 1)" in summary and "| return-policy | 2 | 1 | 0 | fail |" in summary
        assert world["token"] not in log + summary and GITHUB_TOKEN not in log
        [again] = forge.comments[("acme/agent", 7)]
        assert again["id"] == comment["id"] and "### evalhub-gate: fail (exit 1)" in again["body"]
        [second] = CiResult.objects.filter(rubric=world["rubric"]).exclude(pk=first.pk)
        page = f"{live_server.url}/p/store/rubrics/return-policy/promotion/ci-results/{second.pk}/"
        assert f"| [return-policy]({page}) | gate | fail | 2 | 1 | 0 | 1 |" in again["body"]
        status, html = opened_as(world["lead"], page)
        assert status == 200 and 'commit <span class="mono">sha-2</span>' in html
        assert "Passed at sha-1 and fail now: pr-2" in again["body"]
        assert [r.method for r in forge.writes()] == ["POST", "PATCH"]
        assert CiResult.objects.filter(rubric=world["rubric"]).count() == 2  # post-results: on by default

        # GitHub answers 403 (a fork's read-only token): a warning, and the gate's verdict stands.
        forge.fault = 403
        code, outputs, log, _ = runner.run(inputs, {**env, **push(tmp_path, "sha-3", "sha-1"),
                                                    "AGENT_ANSWER": GOOD}, tmp_path)
        assert code == 0 and "::warning title=evalhub comment not posted::" in log


def test_without_a_token_a_forks_pull_request_is_told_the_gate_did_not_run(runner, tmp_path, live_server):
    inputs = {"server": live_server.url, "token": "", "outputs": "outputs.jsonl"}
    code, outputs, log, summary = runner.run(inputs, runner_env(), tmp_path)
    assert code == 0, log
    assert "evalhub-gate did not run: no evalhub token (a pull request from a fork gets no secrets" in summary
    assert "::warning title=evalhub gate::" in log and set(outputs) >= {"gate"} and outputs["gate"] == {}
    code, _, log, _ = runner.run({**inputs, "fail-without-token": "true"}, runner_env(), tmp_path)
    assert code == 1 and "::error title=evalhub gate::evalhub-gate did not run" in log


def test_only_the_gate_step_gets_the_cache_key_and_the_github_token_and_scripts_hold_no_expression():
    by_id = {step.get("id"): step for step in STEPS}
    for step in STEPS:
        assert "${{" not in step.get("run", ""), f"step {step.get('id')}: inputs reach scripts through env only"
        env = step.get("env", {})
        if step.get("id") != "gate":
            assert "EVALHUB_CACHE_KEY" not in env and "GITHUB_TOKEN" not in env
    assert "EVALHUB_TOKEN" not in by_id["agent"].get("env", {})


PLUGIN_TEST = '''
from judges.gate.pytest_plugin import assert_judged


def test_return_policy(evalhub_judge):
    result = evalhub_judge({"input": "Can I return it?", "output": "Returns are accepted within 30 days."},
                           rubric="return-policy")
    assert result.verdict == "pass"
    assert_judged(result)
'''


def test_the_pytest_plugin_judges_in_the_light_install(light, world, live_server, tmp_path):
    # A team's test environment: the light client and pytest, nothing of the server's.
    done = subprocess.run([str(light), "-m", "pip", "install", "--quiet", "pytest"], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    (tmp_path / "test_agent.py").write_text(PLUGIN_TEST)
    env = {**runner_env(), "EVALHUB_GATE_CONFIG": f"{live_server.url}/api/gates", "EVALHUB_TOKEN": world["token"]}
    calls = world["fake"].stats()["total"]
    done = subprocess.run([str(light), "-I", "-m", "pytest", "-p", "no:cacheprovider", "test_agent.py",
                           "--evalhub-no-cache"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout and "evalhub" in done.stdout
    assert world["fake"].stats()["total"] == calls + 1
