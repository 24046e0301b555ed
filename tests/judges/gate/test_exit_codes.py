"""The CI command's exit-code contract, which pipelines rely on, as one table (docs/gate.md, "Exit codes").

stage × fail_closed × outcome × report: observe records and warn reports, neither decides; at gate a
failed case is 1, one that could not be judged is 3, or 1 under `fail_closed` (which counts only at
gate); a report (--junit, --json, --post) that cannot be made is exit 2 only when nothing failed: a
failed gate stays 1. No stand-in: a contract check passes or fails the answer, and a judge at an address
where nothing listens cannot answer (connection refused, one attempt).
"""

import itertools
import json
import socket

import pytest

from judges.engine import JudgeConfig
from judges.gate import cli as gate_cli

MODEL = "gpt-4o-mini-2024-07-18"
CRITERIA = "Pass when the answer states the 30-day return window."
ANSWERS = {"pass": "Returns are accepted within 30 days.", "fail": "No returns, ever."}


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # closed again: a call is refused at once


def judge_spec(outcome: str) -> dict:
    spec = {"rubric": "returns", "criteria": CRITERIA, "layers": ["contract"], "contract_checks": ["must_match"],
            "must_match": ["30 days"]}
    if outcome == "not_evaluated":
        # The contract passes, so the verdict is the judge's, and the judge cannot be reached.
        spec |= {"layers": ["contract", "behavioral"], "provider": "openai-compatible", "model": MODEL,
                 "base_url_env": "EVALHUB_JUDGE_DEAD_URL", "api_key_env": "EVALHUB_JUDGE_API_KEY", "max_attempts": 1}
    return JudgeConfig.from_dict(spec).to_dict(include_hash=True)


def write_check_files(tmp_path, *, stage: str, fail_closed: bool, outcome: str) -> tuple[str, str]:
    rubric = {"slug": "returns", "criteria": CRITERIA, "stage": stage, "fail_closed": fail_closed,
              "judge": judge_spec(outcome), "prices": {MODEL: {"input_per_mtok": 0.15, "output_per_mtok": 0.6}},
              "calibration": {"run": 1, "n": 40, "repeats": 2, "agreement": 0.9},
              "promoted_by": "lena", "promoted_at": "2025-01-01T00:00:00+00:00"}
    config = tmp_path / "gates.json"
    config.write_text(json.dumps({"schema": "evalhub.gates/v1", "generated_at": "now", "rubrics": [rubric]}))
    answer = ANSWERS["fail" if outcome == "fail" else "pass"]
    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text(json.dumps({"external_id": "c1", "input": "Can I return shoes?", "output": answer}) + "\n")
    return str(config), str(outputs)


def expected_exit(stage: str, fail_closed: bool, outcome: str, report: str) -> int:
    judged = 0
    if stage == "gate":
        judged = {"pass": 0, "fail": 1, "not_evaluated": 1 if fail_closed else 3}[outcome]
    if report != "none" and judged != 1:
        return 2  # the pipeline must see a report it asked for and did not get
    return judged


# The reports that cannot be made: a file where a folder is, a post to an address where nothing listens.
REPORTS = {
    "none": lambda tmp_path: [],
    "junit": lambda tmp_path: ["--junit", str(tmp_path)],
    "json": lambda tmp_path: ["--json", str(tmp_path / "missing-folder" / "results.json")],
    "post": lambda tmp_path: ["--post", closed_port_url().replace("/v1", "/api/ci-results"), "--token", "evh_x"],
}
TABLE = list(itertools.product(["observe", "warn", "gate"], [False, True], ["pass", "fail", "not_evaluated"],
                               list(REPORTS)))


@pytest.mark.parametrize(("stage", "fail_closed", "outcome", "report"), TABLE,
                         ids=["-".join(map(str, row)) for row in TABLE])
def test_the_exit_code_for_every_stage_fail_closed_outcome_and_report(
    tmp_path, monkeypatch, capsys, stage, fail_closed, outcome, report
):
    monkeypatch.chdir(tmp_path)
    for name in ("GITHUB_ACTIONS", "EVALHUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EVALHUB_JUDGE_DEAD_URL", closed_port_url())
    monkeypatch.setenv("EVALHUB_JUDGE_API_KEY", "sk-test-not-a-real-key")
    config, outputs = write_check_files(tmp_path, stage=stage, fail_closed=fail_closed, outcome=outcome)

    code = gate_cli.main(["check", "--config", config, "--outputs", outputs, "--no-cache", *REPORTS[report](tmp_path)])

    assert code == expected_exit(stage, fail_closed, outcome, report)
    out, err = capsys.readouterr()
    # The case really had the outcome this row is about: the summary names a case that did not pass.
    if stage != "observe":
        tag = {"pass": None, "fail": "FAIL" if stage == "gate" else "WARN",
               "not_evaluated": "FAIL" if stage == "gate" and fail_closed else "NOT EVALUATED"}[outcome]
        assert (f"{tag} returns c1" in out) if tag else ("returns c1" not in out)
    if report != "none":
        assert "evalhub-gate: error:" in err  # the broken report is said, whatever the exit code
