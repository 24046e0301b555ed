"""The installed CI command on untrusted input: an agent's answer built to break a JSON parser fails the
schema check with the reason, and an observe-stage rubric still decides nothing (before, a traceback and
exit 1); a schema that refers outside itself is refused, and nothing is fetched."""

import dataclasses
import json
import socket
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


def test_a_schema_that_refers_outside_itself_is_refused_and_never_fetched(tmp_path):
    # A gate config hashed with such a schema (as one made before they were refused would be): the
    # installed command refuses it (exit 2, naming the reference) and sends nothing to where it points.
    connections = []
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(0.2)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/schema"
        path = Path(gate_config(tmp_path, "gate"))
        config = json.loads(path.read_text())
        valid = JudgeConfig.from_dict(config["rubrics"][0]["judge"])
        config["rubrics"][0]["judge"] = dataclasses.replace(valid, json_schema={"$ref": url}).to_dict(
            include_hash=True
        )
        path.write_text(json.dumps(config))
        outputs = tmp_path / "outputs.jsonl"
        outputs.write_text(json.dumps({"external_id": "c1", "input": "List them.", "output": "[1]"}) + "\n")
        done = subprocess.run([str(GATE), "check", "--config", str(path), "--outputs", str(outputs), "--no-cache"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
        try:
            connections.append(listener.accept())
        except TimeoutError:
            pass
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"the reference '{url}' ($ref at /) leaves the schema" in done.stderr
    assert connections == []
