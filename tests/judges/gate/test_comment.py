"""`evalhub-gate check --comment github|gitlab`: the installed command, its own process, against a scripted stand-in
of GitHub's issue comments and GitLab's merge request notes (tests/judges/gate/forge_stand_in.py, real HTTP).

One comment per rubric set, updated in place on each push; a comment that cannot be posted is a warning and
never changes the exit code. The rubrics are deterministic (contract checks: no model), with evidence case counts
so the comment carries a corrected pass rate with its interval.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from judges.engine import JudgeConfig
from judges.gate.posting import ci_result_pages
from judges.gate.rates import corrected_rate
from tests.judges.gate.forge_stand_in import GITHUB_TOKEN, GITLAB_TOKEN, GITLAB_USER, ForgeServer

GATE = Path(sys.executable).parent / "evalhub-gate"  # installed by [project.scripts]
COUNTS = {"tp": 30, "fn": 3, "fp": 2, "tn": 25}


def rubric(slug: str, stage: str) -> dict:
    judge = JudgeConfig.from_dict({
        "rubric": slug, "criteria": "The answer is a JSON array.", "layers": ["contract"],
        "contract_checks": ["json_schema"], "json_schema": {"type": "array"},
    }).to_dict(include_hash=True)
    return {"slug": slug, "criteria": "The answer is a JSON array.", "stage": stage, "fail_closed": False,
            "judge": judge, "prices": {},
            "calibration": {"run": 1, "n": 60, "repeats": 1, "agreement": 0.92, "true_pass_rate": 30 / 33,
                            "true_fail_rate": 25 / 27, "cases": COUNTS, "cases_single": COUNTS},
            "promoted_by": "lena", "promoted_at": "2025-01-01T00:00:00+00:00"}


@pytest.fixture
def forge():
    with ForgeServer() as forge:
        yield forge


@pytest.fixture
def pipeline(tmp_path):
    config = tmp_path / "gates.json"
    config.write_text(json.dumps({"schema": "evalhub.gates/v1", "generated_at": "now", "project": "store",
                                  "rubrics": [rubric("structured", "gate"), rubric("lists", "warn")]}))
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7, "base": {"sha": "base-sha"}}}))
    return {"config": config, "event": event, "dir": tmp_path}


def outputs(path: Path, answers: list[str]) -> Path:
    path.write_text("".join(json.dumps({"external_id": f"pr-{i}", "input": "List them.", "output": answer}) + "\n"
                            for i, answer in enumerate(answers)))
    return path


def github_env(forge, pipeline) -> dict[str, str]:
    return {"GITHUB_ACTIONS": "true", "GITHUB_TOKEN": GITHUB_TOKEN, "GITHUB_API_URL": forge.url,
            "GITHUB_REPOSITORY": "acme/agent", "GITHUB_EVENT_PATH": str(pipeline["event"]),
            "GITHUB_SERVER_URL": "https://github.example", "GITHUB_RUN_ID": "4242", "GITHUB_SHA": "head-sha"}


def gate(pipeline, answers: list[str], *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "EVALHUB_", "CI_"))}
    path = outputs(pipeline["dir"] / "outputs.jsonl", answers)
    return subprocess.run([str(GATE), "check", "--config", str(pipeline["config"]), "--outputs", str(path),
                           "--no-cache", *args], cwd=pipeline["dir"], env={**base, **env}, capture_output=True,
                          text=True, timeout=120, check=False)


def test_it_comments_once_and_updates_that_comment_on_the_next_push(forge, pipeline):
    env = github_env(forge, pipeline)
    # Twelve answers, two of them no JSON array (pr-10, pr-11): enough cases (10) for a corrected pass rate.
    done = gate(pipeline, ["[1]"] * 10 + ["nope", "nope"], "--comment", "github", env=env)
    assert done.returncode == 1, done.stdout + done.stderr  # the gate-stage rubric failed on pr-10 and pr-11
    assert "commented on pull request #7" in done.stdout and "warning" not in done.stderr
    [comment] = forge.comments[("acme/agent", 7)]
    body = comment["body"]
    assert body.startswith("<!-- evalhub-gate comment ") and "### evalhub-gate: fail (exit 1)" in body
    rows = {line.split(" | ")[0].strip("| "): line for line in body.splitlines() if line.startswith("| ")}
    assert "| structured | gate | fail | 10 | 2 | 0 | - |" in rows["structured"]
    assert "| lists | warn | warning | 10 | 2 | 0 | - |" in rows["lists"]
    # The corrected rate and its interval are the gate's own figures for 10 of 12 judged passing.
    figures = corrected_rate(passed=10, failed=2, counts=COUNTS,
                             calibration=rubric("structured", "gate")["calibration"])
    low, high = figures["ci95"]
    assert f"{figures['estimate'] * 100:.1f} % ({low * 100:.1f}–{high * 100:.1f} %)" in rows["structured"]
    assert "$0.0000" in rows["structured"] and "Cost: $0.0000, 0 calls" in body
    assert "[the pipeline run](https://github.example/acme/agent/actions/runs/4242)" in body
    # Without --post evalhub keeps no record of this run: said, and no row links anywhere else instead.
    assert "This run's results were not posted to evalhub (no `--post`): it has no page there." in body
    assert "](http" not in "".join(rows.values())
    assert "- pr-10\n- pr-11" in body
    first = [(r.method, r.path) for r in forge.requests]
    assert first == [("GET", "/repos/acme/agent/issues/7/comments"), ("POST", "/repos/acme/agent/issues/7/comments")]

    # The next push: the same comment, edited; no second one.
    forge.requests.clear()
    done = gate(pipeline, ["[1]", "[2]", "[3]"], "--comment", "github", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"updated comment {comment['id']} on pull request #7" in done.stdout
    [again] = forge.comments[("acme/agent", 7)]
    assert again["id"] == comment["id"] and "### evalhub-gate: pass (exit 0)" in again["body"]
    assert [(r.method, r.path) for r in forge.writes()] == [
        ("PATCH", f"/repos/acme/agent/issues/comments/{comment['id']}"),
    ]
    assert forge.requests[0].headers["authorization"] == f"Bearer {GITHUB_TOKEN}"


def test_another_rubric_set_keeps_a_comment_of_its_own_and_a_pasted_marker_is_left_alone(forge, pipeline):
    env = github_env(forge, pipeline)
    assert gate(pipeline, ["[1]"], "--comment", "github", "--rubric", "structured", env=env).returncode == 0
    # Someone pastes the gate's comment, marker and all, as their own: it is not the gate's to edit.
    [gates] = forge.comments.pop(("acme/agent", 7))
    pasted = forge.add(("acme/agent", 7), gates["body"], user={"login": "mallory", "type": "User"})
    forge.requests.clear()
    assert gate(pipeline, ["[1]"], "--comment", "github", "--rubric", "structured", env=env).returncode == 0
    assert gate(pipeline, ["[1]"], "--comment", "github", "--stage", "warn", env=env).returncode == 0
    assert gate(pipeline, ["nope"], "--comment", "github", "--rubric", "structured", env=env).returncode == 1
    pasted_copy, structured, lists = forge.comments[("acme/agent", 7)]
    assert pasted_copy == pasted
    assert [r.method for r in forge.writes()] == ["POST", "POST", "PATCH"]
    assert forge.writes()[-1].path.endswith(f"/comments/{structured['id']}")
    assert "fail (exit 1)" in structured["body"] and "pass (exit 0)" in lists["body"]
    assert structured["body"].split("\n", 1)[0] != lists["body"].split("\n", 1)[0]


@pytest.mark.parametrize("status", [403, 500])
@pytest.mark.parametrize(("answers", "code"), [(["[1]"], 0), (["nope"], 1)])
def test_a_comment_that_cannot_be_posted_is_a_warning_never_a_changed_exit_code(forge, pipeline, status, answers,
                                                                               code):
    forge.fault, forge.fault_methods = status, {"POST"}
    done = gate(pipeline, answers, "--comment", "github", "--json", "results.json", env=github_env(forge, pipeline))
    assert done.returncode == code, done.stdout + done.stderr
    assert ("evalhub-gate: warning: the pull request comment was not posted: "
            f"POST /repos/acme/agent/issues/7/comments: HTTP {status}") in done.stderr
    assert "::warning title=evalhub comment not posted::" in done.stdout
    assert GITHUB_TOKEN not in done.stdout + done.stderr
    assert ("acme/agent", 7) not in forge.comments
    assert json.loads((pipeline["dir"] / "results.json").read_text())["exit_code"] == code


def test_without_a_pull_request_or_a_token_there_is_no_comment_and_no_failure(forge, pipeline):
    push = {**github_env(forge, pipeline), "GITHUB_EVENT_PATH": str(pipeline["dir"] / "no-such-event.json")}
    done = gate(pipeline, ["[1]"], "--comment", "github", env=push)
    assert done.returncode == 0 and "not a pull request event: no comment" in done.stdout
    assert "warning" not in done.stderr
    no_token = {k: v for k, v in github_env(forge, pipeline).items() if k != "GITHUB_TOKEN"}
    done = gate(pipeline, ["[1]"], "--comment", "github", env=no_token)
    assert done.returncode == 0 and "comment was not posted: no $GITHUB_TOKEN" in done.stderr
    assert forge.requests == []


def gitlab_env(forge, **more: str) -> dict[str, str]:
    return {"GITLAB_CI": "true", "CI_API_V4_URL": f"{forge.url}/api/v4", "CI_PROJECT_ID": "12",
            "CI_MERGE_REQUEST_IID": "5", "CI_JOB_URL": "https://gitlab.example/acme/agent/-/jobs/99",
            "EVALHUB_GITLAB_TOKEN": GITLAB_TOKEN, **more}


def test_gitlab_merge_request_note_is_created_then_updated_in_place(forge, pipeline):
    done = gate(pipeline, ["nope"], "--comment", "gitlab", env=gitlab_env(forge))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "commented on merge request !5" in done.stdout
    [note] = forge.comments[("12", 5)]
    assert "### evalhub-gate: fail (exit 1)" in note["body"] and note["author"] == GITLAB_USER
    assert "[the pipeline run](https://gitlab.example/acme/agent/-/jobs/99)" in note["body"]
    # The same note by another user (marker and all) is not the gate's: a new one is written, then edited.
    forge.comments[("12", 5)] = [{**note, "author": {"id": 3, "username": "mallory"}}]
    assert gate(pipeline, ["[1]"], "--comment", "gitlab", env=gitlab_env(forge)).returncode == 0
    done = gate(pipeline, ["nope"], "--comment", "gitlab", env=gitlab_env(forge))
    pasted, ours = forge.comments[("12", 5)]
    assert done.returncode == 1 and f"updated note {ours['id']} on merge request !5" in done.stdout
    assert "fail (exit 1)" in ours["body"] and pasted["body"] == note["body"]
    assert [(r.method, r.path) for r in forge.writes()] == [
        ("POST", "/api/v4/projects/12/merge_requests/5/notes"),
        ("POST", "/api/v4/projects/12/merge_requests/5/notes"),
        ("PUT", f"/api/v4/projects/12/merge_requests/5/notes/{ours['id']}"),
    ]
    assert all(r.headers["private-token"] == GITLAB_TOKEN for r in forge.requests)


def test_gitlab_without_an_access_token_or_with_a_refused_one_is_a_warning(forge, pipeline):
    env = {k: v for k, v in gitlab_env(forge).items() if k != "EVALHUB_GITLAB_TOKEN"}
    done = gate(pipeline, ["nope"], "--comment", "gitlab", env={**env, "CI_JOB_TOKEN": "job-token"})
    assert done.returncode == 1
    assert "no $EVALHUB_GITLAB_TOKEN" in done.stderr and "CI_JOB_TOKEN cannot write merge request notes" in done.stderr
    assert forge.requests == []
    forge.fault, forge.fault_methods = 403, {"POST"}
    done = gate(pipeline, ["[1]"], "--comment", "gitlab", env=gitlab_env(forge))
    assert done.returncode == 0
    assert ("merge request comment was not posted: POST /api/v4/projects/12/merge_requests/5/notes: "
            "HTTP 403") in done.stderr
    # A pipeline that is not a merge request's: said, not warned.
    forge.fault = None
    done = gate(pipeline, ["[1]"], "--comment", "gitlab", env=gitlab_env(forge, CI_MERGE_REQUEST_IID=""))
    assert done.returncode == 0 and "not a merge request pipeline" in done.stdout and "warning" not in done.stderr


def test_it_finds_its_comment_past_the_first_page_of_a_long_discussion(forge, pipeline):
    env = github_env(forge, pipeline)
    for i in range(150):
        forge.add(("acme/agent", 7), f"review remark {i}", user={"login": "rita", "type": "User"})
    assert gate(pipeline, ["[1]"], "--comment", "github", env=env).returncode == 0
    assert gate(pipeline, ["nope"], "--comment", "github", env=env).returncode == 1
    comments = forge.comments[("acme/agent", 7)]
    assert len(comments) == 151 and "fail (exit 1)" in comments[-1]["body"]
    assert [r.method for r in forge.writes()] == ["POST", "PATCH"]
    assert [r.query["page"] for r in forge.requests if r.method == "GET"][-2:] == [["1"], ["2"]]


def test_case_ids_in_the_comment_are_inert_text(forge, pipeline):
    hostile = "x|<b>@octocat</b>](https://evil.example)"
    path = pipeline["dir"] / "hostile.jsonl"
    path.write_text(json.dumps({"external_id": hostile, "input": "List them.", "output": "nope"}) + "\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "EVALHUB_", "CI_"))}
    done = subprocess.run([str(GATE), "check", "--config", str(pipeline["config"]), "--outputs", str(path),
                           "--no-cache", "--comment", "github"], cwd=pipeline["dir"],
                          env={**base, **github_env(forge, pipeline)}, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    [comment] = forge.comments[("acme/agent", 7)]
    body = comment["body"]
    assert "<b>" not in body and "@octocat" not in body and "](https://evil" not in body and "x|" not in body
    assert "- x&#124;&#60;b&#62;&#64;\u200boctocat" in body


def test_an_answer_of_an_unexpected_shape_is_a_warning_too(forge, pipeline):
    env = github_env(forge, pipeline)
    assert gate(pipeline, ["[1]"], "--comment", "github", env=env).returncode == 0
    forge.comments[("acme/agent", 7)][0]["id"] = "not-a-number"
    done = gate(pipeline, ["nope"], "--comment", "github", env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "comment was not posted: unexpected ValueError" in done.stderr and "Traceback" not in done.stderr


def test_results_that_could_not_be_posted_are_said_so_and_the_comment_still_goes(forge, pipeline):
    # Nothing listens on port 9: the post fails, the gate says so (exit 2), and the comment names no evalhub page.
    done = gate(pipeline, ["[1]"], "--comment", "github", "--token", "t" * 40, "--post",
                "http://127.0.0.1:9/api/ci-results", env=github_env(forge, pipeline))
    assert done.returncode == 2, done.stdout + done.stderr
    [comment] = forge.comments[("acme/agent", 7)]
    assert ("This run's results could not be posted to evalhub (the job's log says why): it has no page there."
            in comment["body"])
    assert "| structured | gate | pass |" in comment["body"]


def test_the_pages_are_read_from_the_answer_and_an_older_servers_answer_names_none():
    answer = {"stored": [{"rubric": "structured", "id": 12, "outcome": "pass",
                          "url": "https://evalhub.example/p/store/rubrics/structured/promotion/ci-results/12/"},
                         {"rubric": "lists", "id": 13, "outcome": "warning"}, "junk", {"rubric": 7, "url": "x"}]}
    assert ci_result_pages(answer) == {
        "structured": "https://evalhub.example/p/store/rubrics/structured/promotion/ci-results/12/"}
    assert ci_result_pages({"stored": [{"rubric": "lists", "id": 13, "outcome": "warning"}]}) == {}
    assert ci_result_pages({}) == {} and ci_result_pages([]) == {} and ci_result_pages({"stored": 5}) == {}
