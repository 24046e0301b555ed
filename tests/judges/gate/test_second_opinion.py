"""The CI command with a second opinion (docs/gate.md, "Stages in CI"): at gate stage a contested judgment counts as
not evaluated, so a human looks before it can pass or block a merge: exit 3, or 1 when fail_closed.

In-process through `judges.gate.cli.main`, against the fake provider with one rule per model: the primary
(OpenAI) passes an answer that states "30 days", the second opinion (Anthropic) is scripted per test.
"""

import json

import pytest

from judges.gate import cli as gate_cli
from tests.judges.gate.test_cli import BAD, GOOD, MODEL, PASS_RULE, gate_rubric, run

SECOND = "claude-haiku-4-5-20251001"
SECOND_OPINION = {
    "role": "second_opinion", "provider": "anthropic", "model": SECOND, "base_url_env": "EVALHUB_JUDGE_ANTHROPIC_URL",
    "api_key_env": "EVALHUB_JUDGE_API_KEY", "when": {"mode": "always"},
}


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("EVALHUB_TOKEN", raising=False)
    return tmp_path


@pytest.fixture
def judges(fake_provider):
    fake_provider.control(model=MODEL, rule=PASS_RULE)
    return fake_provider


def second(stage: str = "gate", fail_closed: bool = False, **when) -> dict:
    return gate_rubric(stage=stage, fail_closed=fail_closed,
                       secondary={**SECOND_OPINION, "when": when or {"mode": "always"}})


def test_a_contested_gate_case_is_not_evaluated_and_exits_3(workdir, judges, capsys):
    judges.control(model=SECOND, rule={"kind": "always_fail"})
    assert run(workdir, [second()], GOOD[:1]) == 3
    out = capsys.readouterr().out
    assert "NOT EVALUATED return-policy ok-0: contested: the second opinion said fail (a human must look)" in out
    assert "exit 3 (not evaluated)" in out
    assert judges.stats()["by_model"] == {MODEL: 1, SECOND: 1}


def test_a_contested_fail_does_not_block_either_a_human_decides(workdir, judges, capsys):
    # The primary fails the bad answer, the second opinion passes it: not a failure, not evaluated.
    assert run(workdir, [second()], [*GOOD, BAD]) == 3
    out = capsys.readouterr().out
    assert "FAIL" not in out and "NOT EVALUATED return-policy bad-1: contested: the second opinion said pass" in out


def test_fail_closed_turns_a_contested_gate_case_into_a_failure(workdir, judges, capsys):
    judges.control(model=SECOND, rule={"kind": "always_fail"})
    assert run(workdir, [second(fail_closed=True)], GOOD[:1]) == 1
    assert "FAIL return-policy ok-0 (fail_closed: counts as fail): contested" in capsys.readouterr().out


def test_agreeing_judges_pass_the_gate(workdir, judges):
    judges.control(model=SECOND, rule=PASS_RULE)
    assert run(workdir, [second()], GOOD) == 0
    assert judges.stats()["by_model"] == {MODEL: 3, SECOND: 3}  # the second opinion was asked every time


@pytest.mark.parametrize("stage", ["warn", "observe"])
def test_below_gate_stage_the_primary_verdict_stands(workdir, judges, stage):
    judges.control(model=SECOND, rule={"kind": "always_fail"})
    json_path = workdir / "results.json"
    assert run(workdir, [second(stage=stage)], GOOD, "--json", str(json_path)) == 0
    [rubric] = json.loads(json_path.read_text())["rubrics"]
    assert (rubric["passed"], rubric["not_evaluated"]) == (3, 0)


def test_only_the_cases_the_second_opinion_is_asked_on_can_be_contested(workdir, judges):
    judges.control(model=SECOND, rule={"kind": "always_fail"})
    cases = [{**case, "category": "safety" if i == 0 else "policy"} for i, case in enumerate(GOOD)]
    json_path = workdir / "results.json"
    rubric = second(mode="categories", categories=["safety"])
    assert run(workdir, [rubric], cases, "--json", str(json_path)) == 3
    [result] = json.loads(json_path.read_text())["rubrics"]
    assert (result["passed"], result["not_evaluated"], result["not_evaluated_cases"]) == (2, 1, ["ok-0"])
    assert judges.stats()["by_model"] == {MODEL: 3, SECOND: 1}


def test_a_cached_contested_judgment_stays_contested_and_calls_nobody(workdir, judges):
    judges.control(model=SECOND, rule={"kind": "always_fail"})
    config = gate_cli_config(workdir, second())
    outputs = workdir / "outputs.jsonl"
    outputs.write_text("".join(json.dumps(c) + "\n" for c in GOOD))
    argv = ["check", "--config", config, "--outputs", str(outputs), "--cache-dir", str(workdir / "cache")]
    assert gate_cli.main(argv) == 3
    calls = judges.stats()["total"]
    assert calls == 6
    assert gate_cli.main(argv) == 3
    assert judges.stats()["total"] == calls


def gate_cli_config(workdir, *rubrics) -> str:
    path = workdir / "gates.json"
    path.write_text(json.dumps({"schema": "evalhub.gates/v1", "generated_at": "now", "rubrics": list(rubrics)}))
    return str(path)


# ---- the new form: an adjudicator decides, the budget counts each judge, the sample draws per ref ----------

ADJUDICATOR = "claude-opus-4-1-20250805"


def judge_of(model: str) -> dict:
    return {"provider": "anthropic", "model": model, "base_url_env": "EVALHUB_JUDGE_ANTHROPIC_URL",
            "api_key_env": "EVALHUB_JUDGE_API_KEY"}


def escalating(*when: dict, adjudicator: bool = True) -> dict:
    rubric = gate_rubric(second_opinion={**judge_of(SECOND), "when": list(when) or [{"mode": "always"}]},
                         **({"adjudicator": judge_of(ADJUDICATOR)} if adjudicator else {}))
    rubric["prices"] |= {SECOND: {"input_per_mtok": 1.0, "output_per_mtok": 5.0},
                         ADJUDICATOR: {"input_per_mtok": 15.0, "output_per_mtok": 75.0}}
    return rubric


@pytest.mark.parametrize(("adjudicator_rule", "code", "passed", "failed"), [
    ({"kind": "always_pass"}, 0, 3, 0), ({"kind": "always_fail"}, 1, 0, 3)])
def test_an_adjudicated_gate_case_is_evaluated_and_the_budget_counts_each_judge(
    workdir, judges, capsys, adjudicator_rule, code, passed, failed
):
    judges.control(model=SECOND, rule={"kind": "always_fail"})
    judges.control(model=ADJUDICATOR, rule=adjudicator_rule)
    json_path = workdir / "results.json"
    assert run(workdir, [escalating()], GOOD, "--json", str(json_path)) == code
    [result] = json.loads(json_path.read_text())["rubrics"]
    assert (result["passed"], result["failed"], result["not_evaluated"]) == (passed, failed, 0)
    budget = result  # the budget fields sit on each rubric
    assert (budget["contested"], budget["adjudicated"]) == (3, 3)
    assert budget["calls_by_judge"] == {"primary": 3, "second_opinion": 3, "adjudicator": 3}
    assert budget["cost_by_judge"]["adjudicator"] > budget["cost_by_judge"]["second_opinion"] > 0
    assert "primary 3 ($" in capsys.readouterr().out  # the budget table's "calls by judge" column


def test_without_an_adjudicator_a_contested_case_is_not_evaluated_as_before(workdir, judges):
    judges.control(model=SECOND, rule={"kind": "always_fail"})
    assert run(workdir, [escalating(adjudicator=False)], GOOD[:1]) == 3
    assert judges.stats()["by_model"] == {MODEL: 1, SECOND: 1}


def test_the_rotating_sample_draws_per_ref_and_holds_its_share(workdir, judges, monkeypatch):
    cases = [{**GOOD[0], "external_id": f"ok-{i}", "output": f"Returns within 30 days (answer {i:02})."}
             for i in range(10)]
    drawn = []
    for ref in ("sha-a", "sha-b", "sha-a"):
        monkeypatch.setenv("GITHUB_SHA", ref)
        judges.reset()
        judges.control(model=MODEL, rule=PASS_RULE)
        assert run(workdir, [escalating({"mode": "sample", "share": 0.3}, adjudicator=False)], cases) == 0
        prompts = [r["prompt"] for r in judges.requests() if r["model"] == SECOND]
        drawn.append({i for i in range(10) for p in prompts if f"answer {i:02}" in p})
    assert [len(d) for d in drawn] == [3, 3, 3]  # ⌈0.3 · 10⌉ each time
    assert drawn[0] == drawn[2] != drawn[1]  # its own cases per ref, the same again for the same ref
