"""The installed CI command on an agent's answer built to break a JSON parser: the schema check fails it
with the reason, and an observe-stage rubric still decides nothing (before, a traceback and exit 1)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from judges.engine import JudgeConfig

GATE = Path(sys.executable).parent / "evalhub-gate"  # installed by [project.scripts]
DEEP_ANSWER = "[" * 200_000 + "]" * 200_000


def gate_config(tmp_path: Path, stage: str) -> str:
    judge = JudgeConfig.from_dict({
        "rubric": "structured", "criteria": "The answer is a JSON array.", "layers": ["contract"],
        "contract_checks": ["json_schema"], "json_schema": {"type": "array"},
    }).to_dict(include_hash=True)
    rubric = {"slug": "structured", "criteria": "The answer is a JSON array.", "stage": stage, "fail_closed": False,
              "judge": judge, "prices": {}, "calibration": {"run": 1, "n": 40, "repeats": 2, "agreement": 0.9},
              "promoted_by": "lena", "promoted_at": "2025-01-01T00:00:00+00:00"}
    path = tmp_path / "gates.json"
    path.write_text(json.dumps({"schema": "evalhub.gates/v1", "generated_at": "now", "rubrics": [rubric]}))
    return str(path)


@pytest.mark.parametrize(("stage", "exit_code"), [("observe", 0), ("gate", 1)])
def test_an_answer_nested_too_deeply_is_a_failed_check_not_a_traceback(tmp_path, stage, exit_code):
    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text(json.dumps({"external_id": "deep", "input": "List them.", "output": DEEP_ANSWER}) + "\n"
                       + json.dumps({"external_id": "fine", "input": "List them.", "output": "[1, 2]"}) + "\n")
    report = tmp_path / "report.json"
    done = subprocess.run(
        [str(GATE), "check", "--config", gate_config(tmp_path, stage), "--outputs", str(outputs), "--no-cache",
         "--json", str(report)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == exit_code, done.stdout + done.stderr
    [rubric] = json.loads(report.read_text())["rubrics"]
    assert (rubric["passed"], rubric["failed"], rubric["failed_cases"]) == (1, 1, ["deep"])
    if stage == "gate":  # the failure line says why
        assert "the answer is not JSON: nested too deeply to parse" in done.stdout
