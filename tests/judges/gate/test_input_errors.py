"""Every input-side failure of the installed `evalhub-gate` is exit 2 with one line and no traceback.

Exit 1 tells a pipeline that a gate failed and the merge must be blocked; a pasted placeholder token, a bad
URL, a folder given as a file, a file in another encoding or an unusable variable is the pipeline's own
config error, never that. Each class of input runs the installed command in its own process, as CI does.
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from judges.engine import JudgeConfig

GATE = Path(sys.executable).parent / "evalhub-gate"  # installed by [project.scripts]
URL_ENV, KEY_ENV = "EVALHUB_JUDGE_X_URL", "EVALHUB_JUDGE_X_KEY"
CONTRACT = {"layers": ["contract"], "contract_checks": ["answer_present"]}
# A judge and its second opinion naming the same two variables: each is needed once.
BEHAVIORAL = {
    "layers": ["behavioral"], "provider": "openai-compatible", "model": "judge-1", "base_url_env": URL_ENV,
    "api_key_env": KEY_ENV, "secondary": {
        "role": "second_opinion", "provider": "openai-compatible", "model": "judge-2", "model_family": "other",
        "base_url_env": URL_ENV, "api_key_env": KEY_ENV, "when": {"mode": "always"}},
}


def closed_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"  # closed again: nothing listens


@pytest.fixture
def work(tmp_path) -> Path:
    """gates.json (contract), behavioral.json, outputs.jsonl, a folder and a file that is not UTF-8."""
    for name, spec in (("gates.json", CONTRACT), ("behavioral.json", BEHAVIORAL)):
        judge = JudgeConfig.from_dict({"rubric": "returns", "criteria": "Pass when…", **spec})
        judge = judge.to_dict(include_hash=True)
        rubric = {"slug": "returns", "stage": "gate", "judge": judge, "calibration": None}
        (tmp_path / name).write_text(json.dumps({"schema": "evalhub.gates/v1", "rubrics": [rubric]}))
    (tmp_path / "outputs.jsonl").write_text(json.dumps({"external_id": "c1", "input": "Q?", "output": "A."}) + "\n")
    # Saved before the checks refused them (a config is pinned with its hash): a pattern RE2 cannot take, and a
    # schema referring to a definition it lacks.
    valid = JudgeConfig.from_dict({"rubric": "returns", "criteria": "Pass when…", "layers": ["contract"],
                                   "contract_checks": ["must_match", "json_schema"], "must_match": ["a"],
                                   "json_schema": {"type": "object"}}).to_dict(include_hash=True)
    for name, change in (("backreference.json", {"must_match": ["(a)\\1"]}),
                         ("dangling.json", {"json_schema": {"type": "object", "properties": {
                             "order": {"$ref": "#/$defs/missing"}}}})):
        rubric = {"slug": "returns", "stage": "gate", "judge": {**valid, **change}, "calibration": None}
        (tmp_path / name).write_text(json.dumps({"schema": "evalhub.gates/v1", "rubrics": [rubric]}))
    (tmp_path / "folder").mkdir()
    (tmp_path / "latin1.json").write_bytes('{"schema": "évalhub"}'.encode("latin-1"))
    return tmp_path


def gate(work: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "EVALHUB_", "PYTHONIOENCODING"))}
    return subprocess.run([str(GATE), *args], cwd=work, env={**clean, **env}, capture_output=True, text=True,
                          timeout=60, check=False)


CHECK = ("check", "--outputs", "outputs.jsonl")
# id: (arguments, environment, what the one line must say)
INPUTS = {
    # The token: it goes into a header, so a character HTTP cannot carry was a UnicodeEncodeError traceback.
    "token-placeholder-in-env": (
        (*CHECK, "--config", "{closed}/api/gates"), {"EVALHUB_TOKEN": "evh_…"},
        "the token in $EVALHUB_TOKEN is not an API token"),
    "token-with-a-space-in-option": (
        (*CHECK, "--config", "{closed}/api/gates", "--token", "evh_secret part"), {},
        "the token in --token is not an API token"),
    "token-with-a-line-break-for-cases": (
        ("cases", "--server", "{closed}", "--dataset", "d", "--out", "cases.jsonl"), {"EVALHUB_TOKEN": "evh_x\nevh_y"},
        "the token in $EVALHUB_TOKEN is not an API token"),
    # URLs.
    "url-not-ascii": ((*CHECK, "--config", "https://evalhüb.example.com/api/gates"), {}, "--config: expected an http"),
    "url-with-a-space": ((*CHECK, "--config", "https://evalhub.example.com/api/ga tes"), {}, "--config: expected"),
    "url-port-not-a-number": (
        (*CHECK, "--config", "gates.json", "--post", "http://127.0.0.1:port/api/ci-results", "--token", "evh_x"), {},
        "--post: expected an http"),
    "url-without-scheme": (
        ("cases", "--server", "evalhub.example.com", "--dataset", "d", "--out", "cases.jsonl"), {},
        "--server: expected an http"),
    # Files: folders given as files, a file given as a folder, another encoding.
    "config-is-a-folder": ((*CHECK, "--config", "folder"), {}, "reading the gate config folder: Is a directory"),
    "outputs-is-a-folder": (("check", "--config", "gates.json", "--outputs", "folder"), {},
                            "reading the outputs folder: Is a directory"),
    "cases-is-a-folder": ((*CHECK, "--config", "gates.json", "--cases", "folder"), {},
                          "reading the cases folder: Is a directory"),
    "out-is-a-folder": (("cases", "--server", "{closed}", "--dataset", "d", "--out", "folder"), {},
                        "--out folder: is a folder"),
    "cache-dir-is-a-file": (
        (*CHECK, "--config", "behavioral.json", "--cache-dir", "outputs.jsonl"),
        {URL_ENV: "{closed}/v1", KEY_ENV: "k", "EVALHUB_CACHE_KEY": "a cache key of at least 16 bytes"},
        "--cache-dir outputs.jsonl: File exists"),
    # Config patterns run on RE2: one it cannot take is the config's error, named before any case.
    "must-match-backreference": ((*CHECK, "--config", "backreference.json"), {},
                                 "rubrics[0] (returns).judge.must_match: RE2 cannot take pattern 1, '(a)\\\\1'"),
    # A schema whose local reference cannot resolve would fail every case: a config error, not a failing agent.
    "json-schema-dangling-ref": ((*CHECK, "--config", "dangling.json"), {},
                                 "json_schema: the reference '#/$defs/missing' ($ref at /properties/order) does not "
                                 "resolve within the schema"),
    "config-not-utf8": ((*CHECK, "--config", "latin1.json"), {}, "reading the gate config latin1.json: not UTF-8"),
    "step-summary-is-a-folder": (
        (*CHECK, "--config", "gates.json"), {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": "folder"},
        "writing $GITHUB_STEP_SUMMARY folder: Is a directory"),
    # Variables.
    "judge-url-not-a-url": (
        (*CHECK, "--config", "behavioral.json"), {URL_ENV: "127.0.0.1:8765/v1", KEY_ENV: "k"},
        f"{URL_ENV} is not an http:// or https:// URL (rubric returns)"),
    "judge-key-not-ascii": (
        (*CHECK, "--config", "behavioral.json"), {URL_ENV: "{closed}/v1", KEY_ENV: "sk-proj-…"},
        f"{KEY_ENV} holds a space, a line break or a non-ASCII character"),
    "env-allow-not-a-name": (
        (*CHECK, "--config", "gates.json"), {"EVALHUB_JUDGE_ENV_ALLOW": "NOT A NAME"},
        "--allow-env / $EVALHUB_JUDGE_ENV_ALLOW: 'NOT A NAME' is not an environment variable name"),
}


@pytest.mark.parametrize("case", list(INPUTS))
def test_each_input_error_is_exit_2_with_one_line_and_no_traceback(work, case):
    args, env, says = INPUTS[case]
    closed = closed_url()
    done = gate(work, *(a.replace("{closed}", closed) for a in args),
                **{k: v.replace("{closed}", closed) for k, v in env.items()})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "Error:" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("evalhub-gate: error: "), done.stderr
    assert says in lines[0]
    for secret in ("secret part", "evh_y", "sk-proj"):
        assert secret not in done.stderr + done.stdout  # a token or key is never repeated back


def test_a_missing_variable_error_names_each_variable_once(work):
    done = gate(work, *CHECK, "--config", "behavioral.json")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line == (f"evalhub-gate: error: the judges need environment variables that are not set or not usable: "
                    f"{URL_ENV} is not set (rubric returns); {KEY_ENV} is not set (rubric returns)")


def test_a_console_that_cannot_show_a_character_still_gets_the_summary(work):
    done = gate(work, *CHECK, "--config", "gates.json", PYTHONIOENCODING="ascii")
    assert done.returncode == 0, done.stderr
    assert "1 cases \\xd7 1 repeat(s)" in done.stdout  # "×", escaped


def test_a_pattern_that_backtracks_for_ever_elsewhere_is_judged_at_once(work):
    # ^(a+)+$ against 35 a's and a "!" took a backtracking engine past 60 s; RE2 is linear in the answer.
    judge = JudgeConfig.from_dict({"rubric": "returns", "criteria": "Pass when…", "layers": ["contract"],
                                   "contract_checks": ["must_match", "must_not_match"], "must_match": ["^(a+)+$"],
                                   "must_not_match": ["(x+x+)+y"]}).to_dict(include_hash=True)
    rubric = {"slug": "returns", "stage": "gate", "judge": judge, "calibration": None}
    (work / "redos.json").write_text(json.dumps({"schema": "evalhub.gates/v1", "rubrics": [rubric]}))
    answers = ["a" * 35 + "!", "x" * 5000, "a" * 40]
    (work / "outputs.jsonl").write_text("".join(
        json.dumps({"external_id": f"c{i}", "input": "Q?", "output": a}) + "\n" for i, a in enumerate(answers)))

    done = gate(work, *CHECK, "--config", "redos.json")  # gate() gives up after 60 s: before, it hung

    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL returns c0" in done.stdout and "FAIL returns c1" in done.stdout
    assert "FAIL returns c2" not in done.stdout
