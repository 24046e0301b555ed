"""The agent's pass rate in CI (docs/gate.md, "The agent's pass rate"; docs/estimates.md): the judge's pass rate
corrected with the evidence's case counts (Rogan–Gladen), through the installed `evalhub-gate`, and the rate
gate's every exit path. The judge is a contract check (its verdicts are known without a model); the numbers are
worked by hand.

Ten outputs, two that pass (category "a") and eight that fail (category "b"), so p = 0.2. Evidence counts
tp 90, fn 10, fp 20, tn 80: TPR 0.9, FPR 0.2, J = 0.7, so theta = (0.2 - 0.2) / 0.7 = 0 and
    Var = [0.2 * 0.8 / 10 + 0 + 1 * 0.2 * 0.8 / 100] / 0.49 = 0.0359184,
    upper bound = 1.959964 * sqrt(0.0359184) = 1.959964 * 0.1895214 = 0.371455.
"""

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from judges.engine import JudgeConfig
from judges.gate import VERSION

GATE = Path(sys.executable).parent / "evalhub-gate"
SPEC = {"rubric": "returns", "criteria": "States the 30-day window.", "layers": ["contract"],
        "contract_checks": ["must_match"], "must_match": ["30 days"]}
COUNTS = {"tp": 90, "fn": 10, "fp": 20, "tn": 80}
UPPER = 0.371455


def run_gate(tmp_path, *, calibration, gate_on="pass_rate", minimum=0.5, fail_closed=False, repeats=1, stage="gate"):
    rubric = {"slug": "returns", "criteria": SPEC["criteria"], "stage": stage, "fail_closed": fail_closed,
              "judge": JudgeConfig.from_dict(SPEC).to_dict(include_hash=True), "prices": {},
              "calibration": calibration, "gate_on": gate_on, "min_agent_pass_rate": minimum,
              "promoted_by": "lena", "promoted_at": "2026-01-01T00:00:00+00:00"}
    config = {"schema": "evalhub.gates/v1", "generated_at": "now", "requires_cli": VERSION, "rubrics": [rubric]}
    (tmp_path / "gates.json").write_text(json.dumps(config))
    lines = [{"external_id": f"c{i}", "input": "Can I return shoes?", "category": "a" if i < 2 else "b",
              "output": "Returns within 30 days." if i < 2 else "No returns."} for i in range(10)]
    (tmp_path / "outputs.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "EVALHUB_"))}
    env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "summary.md")
    done = subprocess.run(
        [str(GATE), "check", "--config", "gates.json", "--outputs", "outputs.jsonl", "--no-cache", "--repeats",
         str(repeats), "--json", "results.json", "--junit", "junit.xml"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )
    assert "Traceback" not in done.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    return done, results["rubrics"][0]["pass_rate"]


def calibration(k=1, cases=COUNTS, single=COUNTS):
    return {"run": 7, "n": 200, "repeats": k, "cases": cases, "cases_single": single}


def test_the_corrected_rate_matches_the_hand_worked_figures_everywhere(tmp_path):
    done, rate = run_gate(tmp_path, calibration=calibration(), minimum=0.30)
    assert done.returncode == 0, done.stdout + done.stderr  # eight failing cases, yet the rate decides
    assert rate["status"] == "ok" and rate["estimate"] == 0.0 and rate["judge_pass_rate"] == pytest.approx(0.2)
    assert rate["ci95"] == pytest.approx([0.0, UPPER], abs=1e-6)
    assert (rate["counts"], rate["approximate"], rate["method"]) == ("cases", False, "delta")
    # Per category, with the rubric's counts: "a" all pass (p = 1: theta = 0.8 / 0.7, clipped), "b" none.
    assert rate["by_category"]["a"]["estimate"] == 1.0 and rate["by_category"]["b"]["estimate"] == 0.0
    assert "FAIL (reported; the pass rate decides) returns c5" in done.stdout
    assert "rate gate: pass: the upper 95 % bound 37.1 % is at or above the minimum 30.0 %" in done.stdout
    assert "agent's pass rate, returns: 0.0 % (95 % 0.0-37.1 %); judge's rate 20.0 %" in done.stdout
    properties = {p.get("name"): p.get("value") for p in ET.parse(tmp_path / "junit.xml").iter("property")}
    assert float(properties["pass_rate.ci95_high"]) == pytest.approx(UPPER, abs=1e-6)
    assert properties["pass_rate.status"] == "ok" and properties["pass_rate.b.estimate"] == "0.0"
    summary = (tmp_path / "summary.md").read_text()
    assert "#### the agent's pass rate" in summary
    assert "| returns | all | 0&#46;0 &#37; &#40;95 &#37; 0&#46;0-37&#46;1 &#37;&#41;" in summary


@pytest.mark.parametrize(
    ("name", "cases", "fail_closed", "minimum", "code", "says"),
    [
        ("below the minimum", COUNTS, False, 0.50, 1,
         "rate gate: fail: the upper 95 % bound 37.1 % is below the minimum 50.0 %"),
        ("no case counts", None, False, 0.50, 3, "renew it to get them"),
        ("no case counts, fail_closed", None, True, 0.50, 1, "rate gate: fail (fail_closed)"),
        ("undefined", {"tp": 50, "fn": 50, "fp": 50, "tn": 50}, False, 0.0, 3, "undefined: the evidence's TPR + TFR"),
        # J = 0.3, its lower bound 0.3 - 1.96 * 0.212 < 0.
        ("unbounded", {"tp": 6, "fn": 4, "fp": 3, "tn": 7}, False, 0.0, 3, "unbounded: the lower 95 % bound"),
    ],
)
def test_each_exit_path_of_the_rate_gate(tmp_path, name, cases, fail_closed, minimum, code, says):
    done, rate = run_gate(tmp_path, calibration=calibration(cases=cases, single=cases), fail_closed=fail_closed,
                          minimum=minimum)
    assert done.returncode == code, done.stdout + done.stderr
    assert says in done.stdout
    assert (rate["status"] == "ok") == (name == "below the minimum")


def test_the_nearer_counts_are_used_and_marked_approximate(tmp_path):
    single = {"tp": 80, "fn": 20, "fp": 10, "tn": 90}
    _, at_one = run_gate(tmp_path, calibration=calibration(k=3, single=single), gate_on="every_case", minimum=None)
    assert (at_one["counts"], at_one["approximate"]) == ("cases_single", False)
    assert at_one["true_pass_rate"] == pytest.approx(0.8)
    done, at_two = run_gate(tmp_path, calibration=calibration(k=3, single=single), gate_on="every_case",
                            minimum=None, repeats=2)
    # 2 is as near to 1 as to 3: the majority's counts, approximate, and said so.
    assert (at_two["counts"], at_two["approximate"]) == ("cases", True)
    assert "corrected with the evidence's cases (K=3), approximate: CI ran 2 repeats" in done.stdout
    assert done.returncode == 1  # gate on every case: the failing cases fail the check


def test_every_case_gating_is_unchanged_and_a_bad_minimum_is_a_config_error(tmp_path):
    done, _ = run_gate(tmp_path, calibration=calibration(), gate_on="every_case", minimum=None)
    assert done.returncode == 1 and "FAIL returns c5" in done.stdout
    config = json.loads((tmp_path / "gates.json").read_text())
    for minimum, gate_on, says in ((None, "pass_rate", "gate_on pass_rate needs the minimum rate"),
                                   (1.5, "pass_rate", "expected a fraction from 0 to 1"),
                                   (0.5, "sometimes", "gate_on: expected one of every_case, pass_rate")):
        config["rubrics"][0] |= {"gate_on": gate_on, "min_agent_pass_rate": minimum}
        (tmp_path / "gates.json").write_text(json.dumps(config))
        bad = subprocess.run([str(GATE), "check", "--config", "gates.json", "--outputs", "outputs.jsonl"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
        assert bad.returncode == 2 and says in bad.stderr, bad.stderr
