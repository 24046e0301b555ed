"""The CI command in-process: stages, exit codes, majority of repeats, reports, and config errors.

The judge behind it is the fake provider (a scripted stand-in over real HTTP): it passes an answer
that contains "30 days" and fails the rest. The end-to-end test runs the installed command instead.
"""

import dataclasses
import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from judges.engine import JudgeConfig, Judgment
from judges.gate import cli as gate_cli
from judges.gate.judging import case_verdict

MODEL = "gpt-4o-mini-2024-07-18"
PASS_RULE = {"kind": "answer_contains", "text": "30 days"}


def judge_spec(slug: str = "return-policy", **overrides) -> dict:
    spec = {
        "rubric": slug,
        "criteria": "Pass when the answer states the 30-day return window.",
        "layers": ["behavioral"],
        "provider": "openai-compatible",
        "model": MODEL,
        "params": {"temperature": 0, "max_tokens": 200},
        "base_url_env": "EVALHUB_JUDGE_OPENAI_URL",
        "api_key_env": "EVALHUB_JUDGE_API_KEY",
        "max_attempts": 1,  # a fault is final at once: these tests are about stages, not retries
    }
    spec.update(overrides)
    return JudgeConfig.from_dict(spec).to_dict(include_hash=True)


def gate_rubric(slug: str = "return-policy", stage: str = "gate", fail_closed: bool = False, **judge) -> dict:
    return {
        "slug": slug,
        "criteria": "Pass when the answer states the 30-day return window.",
        "stage": stage,
        "fail_closed": fail_closed,
        "judge": judge_spec(slug, **judge),
        "prices": {MODEL: {"input_per_mtok": 0.15, "output_per_mtok": 0.6}},
        "calibration": {"run": 1, "n": 40, "repeats": 2, "agreement": 0.9},
        "promoted_by": "lena",
        "promoted_at": "2025-01-01T00:00:00+00:00",
    }


def case(external_id: str, output: str) -> dict:
    return {"external_id": external_id, "input": "Can I return shoes?", "output": output, "category": "policy"}


GOOD = [case(f"ok-{i}", "Yes, returns are accepted within 30 days of delivery.") for i in range(3)]
BAD = case("bad-1", "No returns, ever.")


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("EVALHUB_TOKEN", raising=False)
    return tmp_path


def write_config(path, *rubrics) -> str:
    path.write_text(json.dumps({"schema": "evalhub.gates/v1", "generated_at": "now", "rubrics": list(rubrics)}))
    return str(path)


def write_outputs(path, cases) -> str:
    path.write_text("".join(json.dumps(c) + "\n" for c in cases))
    return str(path)


def run(workdir, rubrics, cases, *extra) -> int:
    config = write_config(workdir / "gates.json", *rubrics)
    outputs = write_outputs(workdir / "outputs.jsonl", cases)
    return gate_cli.main(["check", "--config", config, "--outputs", outputs, "--no-cache", *extra])


@pytest.fixture
def judge(fake_provider):
    fake_provider.control(rule=PASS_RULE)
    return fake_provider


def test_it_exits_0_when_every_gate_case_passes(workdir, judge, capsys):
    assert run(workdir, [gate_rubric()], GOOD) == 0
    out = capsys.readouterr().out
    assert "return-policy" in out and "exit 0 (pass)" in out
    assert judge.stats()["total"] == 3


def test_it_exits_1_when_a_gate_case_fails_and_names_it(workdir, judge, capsys):
    assert run(workdir, [gate_rubric()], [*GOOD, BAD]) == 1
    out = capsys.readouterr().out
    assert "FAIL return-policy bad-1" in out
    assert "exit 1 (fail)" in out


def test_it_exits_3_when_a_gate_case_cannot_be_judged(workdir, judge, capsys):
    judge.control(fault="500")
    assert run(workdir, [gate_rubric()], GOOD) == 3
    assert "NOT EVALUATED return-policy ok-0" in capsys.readouterr().out


def test_it_turns_not_evaluated_into_fail_when_fail_closed(workdir, judge, capsys):
    judge.control(fault="500")
    assert run(workdir, [gate_rubric(fail_closed=True)], GOOD) == 1
    assert "fail_closed: counts as fail" in capsys.readouterr().out


def test_it_prefers_1_over_3_when_one_rubric_fails_and_another_is_not_evaluated(workdir, judge):
    judge.control(model="other-model-2024-01-01", fault="500")
    rubrics = [gate_rubric(), gate_rubric("tone", model="other-model-2024-01-01")]
    assert run(workdir, rubrics, [*GOOD, BAD]) == 1


def test_it_never_fails_on_warn_and_writes_github_warnings(workdir, judge, capsys, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    summary = workdir / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert run(workdir, [gate_rubric(stage="warn")], [*GOOD, BAD]) == 0
    out = capsys.readouterr().out
    warnings = [line for line in out.splitlines() if line.startswith("::warning")]
    assert len(warnings) == 1
    assert warnings[0].startswith("::warning title=evalhub warn return-policy::bad-1: fail: ")
    markdown = summary.read_text()
    assert "#### warn" in markdown and "| return-policy | 3 | 1 | 0 | warning |" in markdown


def test_it_only_records_on_observe(workdir, judge, capsys, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    judge.control(rule={"kind": "always_fail"})
    assert run(workdir, [gate_rubric(stage="observe")], GOOD) == 0
    out = capsys.readouterr().out
    assert "::" not in out
    assert "recorded" in out


def test_it_keeps_untrusted_text_on_one_line(workdir, judge, capsys, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    sneaky = case("x\n::set-env name=A::1", "No.\n::error::forged")
    assert run(workdir, [gate_rubric(stage="warn")], [sneaky]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not any(line.startswith(("::set-env", "::error")) for line in lines)
    assert sum(line.startswith("::warning") for line in lines) == 1


def test_it_writes_junit_xml_per_rubric_and_case(workdir, judge):
    judge.control(model="broken-2024-01-01", fault="500")
    rubrics = [
        gate_rubric(),
        gate_rubric("watch", stage="observe"),
        gate_rubric("broken", model="broken-2024-01-01"),
    ]
    assert run(workdir, rubrics, [*GOOD, BAD], "--junit", "junit.xml") == 1
    root = ET.parse(workdir / "junit.xml").getroot()
    assert root.tag == "testsuites" and root.get("tests") == "12"
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    gate = suites["evalhub.return-policy"]
    assert (gate.get("tests"), gate.get("failures"), gate.get("skipped")) == ("4", "1", "0")
    failed = [tc.get("name") for tc in gate.iter("testcase") if tc.find("failure") is not None]
    assert failed == ["bad-1"]
    watch = suites["evalhub.watch"]
    assert watch.get("failures") == "0"
    assert "fail" in [tc.find("system-out").text.split(": ")[1] for tc in watch.iter("testcase")]
    assert suites["evalhub.broken"].get("skipped") == "4"


def test_it_judges_each_case_k_times_and_takes_the_majority(workdir, judge, capsys):
    assert run(workdir, [gate_rubric()], [*GOOD, BAD], "--repeats", "3") == 1
    assert judge.stats()["total"] == 12
    assert "3 of 3 repeats" in capsys.readouterr().out


def test_it_reuses_its_cache_folder(workdir, judge):
    config = write_config(workdir / "gates.json", gate_rubric())
    outputs = write_outputs(workdir / "outputs.jsonl", GOOD)
    args = ["check", "--config", config, "--outputs", outputs, "--cache-dir", str(workdir / "cache")]
    assert gate_cli.main(args) == 0
    assert gate_cli.main(args) == 0
    assert judge.stats()["total"] == 3  # the second run asked nothing


def test_it_runs_a_contract_only_judge_without_any_provider(workdir, monkeypatch):
    monkeypatch.delenv("EVALHUB_JUDGE_API_KEY", raising=False)
    contract = gate_rubric(layers=["contract"], contract_checks=["answer_present"], provider=None, model=None,
                           base_url_env=None, api_key_env=None, params={})
    assert run(workdir, [contract], [*GOOD, case("empty", "")]) == 1


def test_it_writes_the_results_json_it_would_post(workdir, judge, monkeypatch):
    monkeypatch.setenv("GITHUB_SHA", "abc123")
    assert run(workdir, [gate_rubric()], [*GOOD, BAD], "--json", "results.json") == 1
    payload = json.loads((workdir / "results.json").read_text())
    assert payload["schema"] == "evalhub.ci-results/v1"
    assert (payload["exit_code"], payload["outcome"], payload["commit"]) == (1, "fail", "abc123")
    [rubric] = payload["rubrics"]
    assert (rubric["passed"], rubric["failed"], rubric["not_evaluated"], rubric["total"]) == (3, 1, 0, 4)
    assert rubric["failed_cases"] == ["bad-1"]
    assert rubric["config_hash"] == judge_spec()["config_hash"]


# ---- the verdict of one case from its repeats (pure) ---------------------------------------------------


def j(outcome: str, contested: bool = False) -> Judgment:
    return Judgment("c", 1, outcome, reason=f"said {outcome}", contested=contested, secondary_outcome="fail")


@pytest.mark.parametrize(
    ("outcomes", "verdict"),
    [
        (["pass"], "pass"),
        (["fail"], "fail"),
        (["pass", "pass", "fail"], "pass"),
        (["pass", "fail"], "not_evaluated"),  # a tie
        (["pass", "not_evaluated", "not_evaluated"], "pass"),  # majority of the evaluated ones
        (["not_evaluated"], "not_evaluated"),
    ],
)
def test_it_takes_the_majority_of_evaluated_repeats(outcomes, verdict):
    assert case_verdict([j(o) for o in outcomes], gate=True)[0] == verdict


def test_it_counts_a_contested_judgment_as_not_evaluated_at_gate_stage_only():
    assert case_verdict([j("pass", contested=True)], gate=True)[0] == "not_evaluated"
    assert case_verdict([j("pass", contested=True)], gate=False)[0] == "pass"


@pytest.mark.parametrize("gate", [True, False])
def test_one_repeat_gives_the_verdict_and_reason_two_equal_repeats_give(gate):
    """One repeat is read without counting votes: the same verdict and reason as a case whose repeats agree
    (the reason without the "n of m repeats" the votes add)."""
    contested = Judgment("c", 1, "fail", reason="r", contested=True, secondary_outcome="pass")
    adjudicated = Judgment("c", 1, "pass", reason="the adjudicator's", contested=True, judge="adjudicator")
    singles = [j("pass"), j("fail"), contested, adjudicated, Judgment("c", 1, "not_evaluated", reason="timed out"),
               Judgment("c", 1, "not_evaluated", reason="timed out", error="timeout"),
               Judgment("c", 1, "not_evaluated", error="spend cap"), Judgment("c", 1, "not_evaluated")]
    for one in singles:
        verdict, reason = case_verdict([one, one], gate=gate)
        assert case_verdict([one], gate=gate) == (verdict, reason.removeprefix("2 of 2 repeats: ")), one


# ---- usage and config errors: exit 2, nothing judged ----------------------------------------------------


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda c: c.update(schema="evalhub.gates/v0"), "schema"),
        (lambda c: c["rubrics"][0].update(stage="draft"), "stage"),
        (lambda c: c["rubrics"][0]["judge"].update(policy="edited after calibration"), "config_hash"),
        (lambda c: c["rubrics"][0]["judge"].pop("config_hash"), "config_hash"),
        (lambda c: c["rubrics"][0]["judge"].update(provider="mystery"), "provider"),
        (lambda c: c["rubrics"][0].update(fail_closed="yes"), "fail_closed"),
        (lambda c: c["rubrics"][0]["prices"][MODEL].update(input_per_mtok="cheap"), "input_per_mtok"),
        (lambda c: c["rubrics"].append(c["rubrics"][0]), "twice"),
    ],
)
def test_it_exits_2_on_a_broken_config(workdir, judge, capsys, mutate, message):
    config = {"schema": "evalhub.gates/v1", "rubrics": [gate_rubric()]}
    mutate(config)
    (workdir / "gates.json").write_text(json.dumps(config))
    outputs = write_outputs(workdir / "outputs.jsonl", GOOD)
    assert gate_cli.main(["check", "--config", "gates.json", "--outputs", outputs]) == 2
    assert message in capsys.readouterr().err
    assert judge.stats()["total"] == 0


def test_it_exits_2_on_a_judge_whose_schema_refers_outside_itself(workdir, capsys):
    # A gate config made before such schemas were refused, hashed all the same: CI must not fetch the reference.
    valid = JudgeConfig.from_dict(judge_spec(layers=["contract", "behavioral"], contract_checks=["json_schema"],
                                             json_schema={"type": "object"}))
    remote = dataclasses.replace(valid, json_schema={"$ref": "http://127.0.0.1:9/schema"})
    rubric = gate_rubric() | {"judge": remote.to_dict(include_hash=True)}
    config = write_config(workdir / "gates.json", rubric)
    outputs = write_outputs(workdir / "outputs.jsonl", GOOD)

    assert gate_cli.main(["check", "--config", config, "--outputs", outputs]) == 2
    refused = ".judge.json_schema: the reference 'http://127.0.0.1:9/schema' ($ref at /) leaves the schema"
    assert refused in capsys.readouterr().err


def test_it_exits_2_on_a_config_that_is_not_json_or_not_there(workdir, capsys):
    (workdir / "gates.json").write_text("{not json")
    outputs = write_outputs(workdir / "outputs.jsonl", GOOD)
    assert gate_cli.main(["check", "--config", "gates.json", "--outputs", outputs]) == 2
    assert gate_cli.main(["check", "--config", "missing.json", "--outputs", outputs]) == 2
    assert gate_cli.main(["check", "--config", "http://127.0.0.1:9/api/gates", "--outputs", outputs]) == 2
    err = capsys.readouterr().err
    assert "not JSON" in err and "missing.json" in err and "cannot connect" in err


def test_it_exits_2_listing_every_bad_line_of_the_outputs(workdir, judge, capsys):
    config = write_config(workdir / "gates.json", gate_rubric())
    (workdir / "outputs.jsonl").write_text(
        json.dumps(GOOD[0]) + "\n{oops\n" + json.dumps({"external_id": "x"}) + "\n" + json.dumps(GOOD[0]) + "\n"
    )
    assert gate_cli.main(["check", "--config", config, "--outputs", "outputs.jsonl"]) == 2
    err = capsys.readouterr().err
    assert "line 2: is not valid JSON" in err
    assert "line 3: input: is required" in err
    assert "line 4: external_id 'ok-0' repeats line 1" in err
    assert judge.stats()["total"] == 0


def test_it_exits_2_when_a_judge_variable_is_unset_naming_it_not_its_value(workdir, judge, capsys, monkeypatch):
    monkeypatch.delenv("EVALHUB_JUDGE_API_KEY")
    assert run(workdir, [gate_rubric()], GOOD) == 2
    assert "EVALHUB_JUDGE_API_KEY is not set" in capsys.readouterr().err


def test_it_exits_2_on_usage_errors(workdir, capsys, monkeypatch):
    assert gate_cli.main([]) == 2
    assert gate_cli.main(["check", "--outputs", "x.jsonl"]) == 2  # --config missing
    assert gate_cli.main(["check", "--config", "c", "--outputs", "o", "--repeats", "0"]) == 2
    config = write_config(workdir / "gates.json", gate_rubric())
    outputs = write_outputs(workdir / "outputs.jsonl", GOOD)
    assert gate_cli.main(["check", "--config", config, "--outputs", outputs, "--post", "http://x/api/ci-results"]) == 2
    assert "--post needs a token" in capsys.readouterr().err


def test_it_imports_no_django():
    # CI runs the command without a server: importing it must not pull Django in.
    code = "import sys, judges.gate.cli; sys.exit(any(m.split('.')[0] == 'django' for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
