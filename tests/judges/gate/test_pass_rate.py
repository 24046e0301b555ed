"""The agent's pass rate in CI (docs/gate.md, "The agent's pass rate"; docs/estimates.md): the judge's pass rate
corrected with the evidence's case counts (Rogan–Gladen), through the installed `evalhub-gate`, and the rate
gate's every exit path. The judge is a contract check (its verdicts are known without a model); the numbers are
worked by hand.

Ten outputs, two that pass (category "a") and eight that fail (category "b"), so p = 0.2. Evidence counts
tp 90, fn 10, fp 20, tn 80: TPR 0.9, FPR 0.2, J = 0.7, so theta = (0.2 - 0.2) / 0.7 = 0. The interval is Lang &
Reiczigel's (z^2 = 3.841459):
    p' = (2 + z^2/2) / (10 + z^2) = 3.920729 / 13.841459 = 0.283260,
    TPR' = 91 / 102 = 0.892157, TFR' = 81 / 102 = 0.794118, J' = 0.686275,
    theta' = (0.283260 + 0.794118 - 1) / 0.686275 = 0.112750,
    TPR'(1-TPR')/102 = 0.000943265, TFR'(1-TFR')/102 = 0.001602890,
    se = sqrt(0.283260 * 0.716740 / 13.841459 + 0.112750^2 * 0.000943265 + 0.887250^2 * 0.001602890) / 0.686275
       = sqrt(0.0146680 + 0.0000120 + 0.0012618) / 0.686275 = 0.183979,
    d = 2 z^2 (0.112750 * 0.000943265 - 0.887250 * 0.001602890) = -0.010109,
    upper bound = 0.112750 - 0.010109 + 1.959964 * 0.183979 = 0.463233 (the lower, -0.258, is clipped to 0).
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
UPPER = 0.463233


def run_gate(tmp_path, *, calibration, gate_on="pass_rate", minimum=0.5, fail_closed=False, repeats=1, stage="gate",
             cases=10):
    rubric = {"slug": "returns", "criteria": SPEC["criteria"], "stage": stage, "fail_closed": fail_closed,
              "judge": JudgeConfig.from_dict(SPEC).to_dict(include_hash=True), "prices": {},
              "calibration": calibration, "gate_on": gate_on, "min_agent_pass_rate": minimum,
              "promoted_by": "lena", "promoted_at": "2026-01-01T00:00:00+00:00"}
    config = {"schema": "evalhub.gates/v1", "generated_at": "now", "requires_cli": VERSION, "rubrics": [rubric]}
    (tmp_path / "gates.json").write_text(json.dumps(config))
    lines = [{"external_id": f"c{i}", "input": "Can I return shoes?", "category": "a" if i < 2 else "b",
              "output": "Returns within 30 days." if i < 2 else "No returns."} for i in range(cases)]
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
    assert (rate["counts"], rate["approximate"], rate["method"]) == ("cases", False, "lang-reiczigel")
    # Per category: 2 and 8 cases, fewer than the correction needs (10): no figure, and said so.
    assert [rate["by_category"][c]["status"] for c in "ab"] == ["too_few_cases", "too_few_cases"]
    assert rate["by_category"]["a"]["estimate"] is None
    assert "    a: not made: too few cases (2 evaluated; the correction needs at least 10)" in done.stdout
    assert "FAIL (reported; the pass rate decides) returns c5" in done.stdout
    assert "rate gate: pass: the upper 95 % bound 46.3 % is at or above the minimum 30.0 %" in done.stdout
    assert "agent's pass rate, returns: 0.0 % (95 % 0.0-46.3 %); judge's rate 20.0 %" in done.stdout
    properties = {p.get("name"): p.get("value") for p in ET.parse(tmp_path / "junit.xml").iter("property")}
    assert float(properties["pass_rate.ci95_high"]) == pytest.approx(UPPER, abs=1e-6)
    assert properties["pass_rate.status"] == "ok" and properties["pass_rate.b.status"] == "too_few_cases"
    summary = (tmp_path / "summary.md").read_text()
    assert "#### the agent's pass rate" in summary
    assert "| returns | all | 0&#46;0 &#37; &#40;95 &#37; 0&#46;0-46&#46;3 &#37;&#41;" in summary


@pytest.mark.parametrize(
    ("name", "cases", "fail_closed", "minimum", "code", "says"),
    [
        ("below the minimum", COUNTS, False, 0.50, 1,
         "rate gate: fail: the upper 95 % bound 46.3 % is below the minimum 50.0 %"),
        ("no case counts", None, False, 0.50, 3,
         "rate gate: not evaluated: correction not made (the evidence was promoted before case counts were kept"),
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


@pytest.mark.parametrize(("fail_closed", "code", "says"), [
    (False, 3, "rate gate: not evaluated: correction not made (too few cases (1 evaluated; the correction needs "
               "at least 10)), so the rate gate is not evaluated"),
    (True, 1, "rate gate: fail (fail_closed): correction not made (too few cases"),
])
def test_one_case_is_too_few_for_a_rate_and_the_rate_gate_abstains(tmp_path, fail_closed, code, says):
    # Before: one failing case read "0.0 % (95 % 0.0-0.0 %)" and the gate decided on it.
    done, rate = run_gate(tmp_path, calibration=calibration(), fail_closed=fail_closed, cases=1)
    assert done.returncode == code, done.stdout + done.stderr
    assert says in done.stdout
    assert (rate["status"], rate["estimate"], rate["ci95"]) == ("too_few_cases", None, None)
    assert "0.0 % (95 % 0.0-0.0 %)" not in done.stdout


def test_a_rubric_with_no_evidence_says_so_not_that_its_evidence_is_old(tmp_path):
    done, rate = run_gate(tmp_path, calibration=None, stage="observe", gate_on="every_case", minimum=None)
    assert done.returncode == 0, done.stdout + done.stderr
    assert rate["status"] == "no_evidence"
    assert "agent's pass rate, returns: not made: no evidence yet" in done.stdout
    assert "renew it to get them" not in done.stdout


def test_each_junit_failure_message_carries_its_cases_reason(tmp_path):
    # Before: every failure's message was "judge verdict: fail", the reason only in the body.
    run_gate(tmp_path, calibration=calibration(), gate_on="every_case", minimum=None)
    failures = {case.get("name"): case.find("failure") for case in ET.parse(tmp_path / "junit.xml").iter("testcase")}
    message = failures["c5"].get("message")
    assert message.startswith("judge verdict: fail: ") and len(message) > len("judge verdict: fail: ")
    assert failures["c5"].text.strip() in message
    assert failures["c0"] is None


@pytest.mark.parametrize(("scope", "code", "says"), [
    ((), 0, "nothing to gate: the gate config has no rubric yet"),
    (("--rubric", "retruns"), 2, "--rubric: the gate config has no rubric retruns"),
])
def test_a_gate_config_with_no_rubric_is_nothing_to_gate_unless_a_scope_names_one(tmp_path, scope, code, says):
    # Before: a team that added the check before promoting anything got exit 2, "the scope selects no rubric".
    config = {"schema": "evalhub.gates/v1", "generated_at": "now", "requires_cli": VERSION, "rubrics": []}
    (tmp_path / "gates.json").write_text(json.dumps(config))
    (tmp_path / "outputs.jsonl").write_text(json.dumps({"external_id": "c1", "input": "q", "output": "a"}) + "\n")
    done = subprocess.run([str(GATE), "check", "--config", "gates.json", "--outputs", "outputs.jsonl", *scope],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == code, done.stdout + done.stderr
    assert says in done.stderr
