"""requires_cli: the one table from gate config field to the evalhub-gate version that first reads it; an older
command meeting a field it does not know exits 2 naming the field and the version that knows it."""

import functools
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from judges.engine import JudgeConfig
from judges.gate import VERSION, cli, versions
from judges.gate import config as gate_config_module
from judges.gate.config import GATES_SCHEMA, gate_project, parse_gate_config
from judges.gate.messages import ConfigError
from judges.gate.versions import FIELD_VERSIONS, check_versions, requires_cli, version_key

GATE = Path(sys.executable).parent / "evalhub-gate"
SPEC = {"rubric": "safe", "criteria": "No secrets.", "layers": ["contract"], "contract_checks": ["no_secrets"]}


def config(**rubric_extra) -> dict:
    judge = JudgeConfig.from_dict(SPEC).to_dict(include_hash=True)
    rubric = {"slug": "safe", "criteria": "No secrets.", "stage": "observe", "fail_closed": False, "judge": judge,
              "prices": {}, "calibration": None, "recalibration_needed": False, "recalibration_reasons": [],
              "promoted_by": "lena", "promoted_at": "2026-01-01T00:00:00+00:00", **rubric_extra}
    data = {"schema": GATES_SCHEMA, "generated_at": "2026-01-01T00:00:00+00:00", "rubrics": [rubric]}
    return data | {"requires_cli": requires_cli(data | {"requires_cli": ""})}


def test_every_field_the_engine_writes_is_in_the_table():
    # A judge field added to the engine without a version would make the server's requires_cli raise.
    judge = JudgeConfig.from_dict(SPEC).to_dict(include_hash=True)
    assert {f"rubrics[].judge.{name}" for name in judge} <= set(FIELD_VERSIONS)


def test_no_field_needs_a_newer_command_than_this_package():
    assert max(FIELD_VERSIONS.values(), key=version_key) == VERSION
    pyproject = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "judges.gate.VERSION"}


def test_requires_cli_is_the_highest_version_among_the_fields_used():
    assert config()["requires_cli"] == "0.2.0"  # requires_cli itself is 0.2.0's
    assert config(gate_on="every_case")["requires_cli"] == "0.3.0"
    assert requires_cli({"schema": GATES_SCHEMA, "rubrics": []}) == "0.1.0"
    with pytest.raises(ValueError, match=r"rubrics\[\]\.gate_after"):
        requires_cli({"schema": GATES_SCHEMA, "rubrics": [{"slug": "x", "gate_after": "pass_rate"}]})


def test_a_judge_with_more_judges_ships_them_and_needs_0_5_0_one_without_keeps_its_shape():
    judge_of = {"provider": "anthropic", "api_key_env": "EVALHUB_JUDGE_API_KEY"}
    spec = {"rubric": "safe", "criteria": "No secrets.", "layers": ["behavioral"], "provider": "openai",
            "model": "gpt-4o-mini-2024-07-18", "second_opinion": {**judge_of, "model": "claude-haiku-4-5-20251001"},
            "adjudicator": {**judge_of, "model": "claude-opus-4-1-20250805"}}
    judge = JudgeConfig.from_dict(spec).to_dict(include_hash=True)
    data = config()
    data["rubrics"][0]["judge"] = judge
    data["requires_cli"] = requires_cli(data)
    assert data["requires_cli"] == "0.5.0" and judge["second_opinion"]["when"] == [{"mode": "always"}]
    with pytest.raises(ConfigError, match="needs evalhub-gate 0.5.0 or newer; this is 0.4.0"):
        check_versions(data, version="0.4.0")
    [rubric] = parse_gate_config(data)  # this command judges with them, hash and all
    assert rubric.judge.adjudicator.model == "claude-opus-4-1-20250805"
    without = JudgeConfig.from_dict({**spec, "second_opinion": None, "adjudicator": None}).to_dict()
    assert "second_opinion" not in without


def test_this_command_reads_what_its_table_knows():
    [rubric] = parse_gate_config(config())
    assert rubric.slug == "safe" and rubric.calibration is None


@pytest.mark.parametrize("where", ["top", "rubric", "judge"])
def test_an_unknown_field_is_refused_naming_it_and_the_version_that_knows_it(where):
    data = config()
    data["requires_cli"] = "0.9.0"
    target = {"top": data, "rubric": data["rubrics"][0], "judge": data["rubrics"][0]["judge"]}[where]
    target["gate_after"] = "pass_rate"
    path = {"top": "gate_after", "rubric": "rubrics[0].gate_after", "judge": "rubrics[0].judge.gate_after"}[where]
    with pytest.raises(ConfigError) as caught:
        parse_gate_config(data)
    message = caught.value.message
    assert message.startswith(f"{path}: a gate config field evalhub-gate {VERSION} does not know")
    assert "evalhub-gate 0.9.0 or newer knows it" in message


def test_a_newer_requires_cli_is_refused_even_when_every_field_is_known():
    with pytest.raises(ConfigError, match=rf"needs evalhub-gate 1\.0\.0 or newer; this is {VERSION}"):
        check_versions(config() | {"requires_cli": "1.0.0"})
    check_versions(config() | {"requires_cli": "0.10.0"}, version="0.10.0")  # compared as numbers, not text
    with pytest.raises(ConfigError, match="needs evalhub-gate 0.10.0"):
        check_versions(config() | {"requires_cli": "0.10.0"}, version="0.9.0")


@pytest.mark.parametrize("bad", ["latest", "1.0", 2, "1.0.0\n", "1.0.0\n::error::x"])
def test_a_requires_cli_that_is_not_a_version_is_a_config_error(bad):
    with pytest.raises(ConfigError, match="requires_cli: expected a version"):
        check_versions(config() | {"requires_cli": bad})


def test_a_server_without_requires_cli_still_gets_the_field_named():
    data = config()
    del data["requires_cli"]
    data["rubrics"][0]["gate_after"] = "pass_rate"
    with pytest.raises(ConfigError, match=r"rubrics\[0\]\.gate_after: .* a newer evalhub-gate may know it"):
        check_versions(data)


def test_the_installed_command_exits_2_naming_the_field_and_the_version(tmp_path):
    data = config() | {"requires_cli": "9.9.0"}
    data["rubrics"][0]["canary_judge"] = None
    (tmp_path / "gates.json").write_text(json.dumps(data))
    (tmp_path / "outputs.jsonl").write_text(json.dumps({"id": "a", "question": "q", "answer": "fine"}) + "\n")
    done = subprocess.run([str(GATE), "check", "--config", "gates.json", "--outputs", "outputs.jsonl"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert ("rubrics[0].canary_judge: a gate config field evalhub-gate "
            f"{VERSION} does not know; evalhub-gate 9.9.0 or newer knows it") in done.stderr
    version = subprocess.run([str(GATE), "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert version.stdout.strip() == f"evalhub-gate {VERSION}"


# ---- `project` (0.6.0): the gate config is one project's ----------------------------------------------------


def test_the_project_field_is_0_6_0s_and_this_command_reads_it():
    data = config()
    data["project"] = "store"
    data["requires_cli"] = requires_cli(data)
    assert data["requires_cli"] == "0.6.0" and FIELD_VERSIONS["project"] == "0.6.0"
    [rubric] = parse_gate_config(data)
    assert rubric.slug == "safe" and gate_project(data) == "store"
    assert gate_project(config()) is None  # a file exported before projects names none


@pytest.mark.parametrize("bad", ["", 7, None, ["store"]])
def test_a_project_that_is_no_slug_is_a_config_error(bad):
    data = config() | {"project": bad}
    if bad is None:  # null reads as a file of no project
        assert gate_project(data) is None
        return
    with pytest.raises(ConfigError, match="project: expected the project's slug"):
        parse_gate_config(data)


def test_an_older_command_exits_2_naming_project_and_the_version_that_knows_it(tmp_path, monkeypatch, capsys):
    # evalhub-gate 0.5.0 as it was: its table without `project`, its own version. The server's gate config
    # (requires_cli 0.6.0, with `project`) must stop it before it judges anything, saying plainly to upgrade.
    older = {path: version for path, version in FIELD_VERSIONS.items() if version_key(version) <= (0, 5, 0)}
    monkeypatch.setattr(versions, "FIELD_VERSIONS", older)
    monkeypatch.setattr(gate_config_module, "check_versions", functools.partial(check_versions, version="0.5.0"))
    data = config() | {"project": "store"}
    data["requires_cli"] = "0.6.0"  # what the server ships: the highest version among the fields used
    (tmp_path / "gates.json").write_text(json.dumps(data))
    (tmp_path / "outputs.jsonl").write_text(json.dumps({"external_id": "a", "input": "q", "output": "fine"}) + "\n")
    code = cli.main(["check", "--config", str(tmp_path / "gates.json"), "--outputs", str(tmp_path / "outputs.jsonl"),
                     "--no-cache"])
    err = capsys.readouterr().err
    assert code == 2
    assert ("project: a gate config field evalhub-gate 0.5.0 does not know; evalhub-gate 0.6.0 or newer knows it: "
            "upgrade the evalhub package where CI runs") in err
    # Its requires_cli alone says the same to a command whose table happens to know every field.
    with pytest.raises(ConfigError, match=r"needs evalhub-gate 0\.6\.0 or newer; this is 0\.5\.0: upgrade"):
        check_versions(config() | {"requires_cli": "0.6.0"}, version="0.5.0")


def test_the_posted_results_carry_the_gate_configs_project(tmp_path, capsys):
    data = config() | {"project": "store"}
    data["requires_cli"] = requires_cli(data)
    (tmp_path / "gates.json").write_text(json.dumps(data))
    (tmp_path / "outputs.jsonl").write_text(json.dumps({"external_id": "a", "input": "q", "output": "fine"}) + "\n")
    code = cli.main(["check", "--config", str(tmp_path / "gates.json"), "--outputs", str(tmp_path / "outputs.jsonl"),
                     "--no-cache", "--json", str(tmp_path / "results.json")])
    assert code == 0, capsys.readouterr()
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["project"] == "store" and list(results)[:2] == ["schema", "project"]
    del data["project"]
    data["requires_cli"] = requires_cli(data)
    (tmp_path / "gates.json").write_text(json.dumps(data))
    assert cli.main(["check", "--config", str(tmp_path / "gates.json"), "--outputs", str(tmp_path / "outputs.jsonl"),
                     "--no-cache", "--json", str(tmp_path / "results.json")]) == 0
    assert "project" not in json.loads((tmp_path / "results.json").read_text())  # none to send: the token decides
