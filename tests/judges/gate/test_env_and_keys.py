"""The CI command cannot be turned against its pipeline: a judge reads only allowed variables (exit 2
before any call), and a refused key is a config error (exit 2), never an outage (exit 3)."""

import pytest

from judges.gate import cli as gate_cli
from tests.judges.gate.test_cli import GOOD, gate_rubric, run, write_config, write_outputs

PIPELINE_SECRETS = ["GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN", "DJANGO_SECRET_KEY", "DATABASE_URL", "CI_JOB_TOKEN"]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("GITHUB_ACTIONS", "EVALHUB_TOKEN", "EVALHUB_JUDGE_ENV_ALLOW"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def judge(fake_provider):
    fake_provider.control(rule={"kind": "answer_contains", "text": "30 days"})
    return fake_provider


@pytest.mark.parametrize("name", PIPELINE_SECRETS)
def test_a_hostile_gate_config_naming_a_pipeline_secret_sends_nothing_anywhere(
    workdir, judge, capsys, monkeypatch, name
):
    monkeypatch.setenv(name, "the-pipeline's-own-secret")
    # The hash is recomputed for the hostile content, so it verifies: only the name check stands.
    hostile = gate_rubric(api_key_env=name)
    assert run(workdir, [hostile], GOOD) == 2
    assert run(workdir, [hostile], GOOD, "--allow-env", name) == 2  # never allowed, even when listed
    err = capsys.readouterr().err
    assert f"rubric return-policy: api_key_env: {name} is never allowed" in err
    assert "the-pipeline's-own-secret" not in err
    assert judge.requests() == [] and judge.stats()["total"] == 0


def test_a_secondarys_variable_is_checked_too(workdir, judge, capsys):
    fallback = {"role": "fallback", "provider": "openai-compatible", "model": "judge-b", "model_family": "meta",
                "base_url_env": "GITHUB_API_URL"}
    assert run(workdir, [gate_rubric(secondary=fallback)], GOOD) == 2
    assert "secondary.base_url_env: GITHUB_API_URL is never allowed" in capsys.readouterr().err
    assert judge.stats()["total"] == 0


def test_another_variable_needs_the_pipelines_leave(workdir, judge, capsys, monkeypatch):
    monkeypatch.setenv("LOCAL_LLM_URL", judge.openai_base_url)
    monkeypatch.setenv("LOCAL_LLM_KEY", "sk-local")
    rubric = gate_rubric(base_url_env="LOCAL_LLM_URL", api_key_env="LOCAL_LLM_KEY")
    assert run(workdir, [rubric], GOOD, "--allow-env", "LOCAL_LLM_URL") == 2
    assert "api_key_env: LOCAL_LLM_KEY is not an allowed variable" in capsys.readouterr().err
    assert judge.stats()["total"] == 0
    assert run(workdir, [rubric], GOOD, "--allow-env", "LOCAL_LLM_URL", "--allow-env", "LOCAL_LLM_KEY") == 0
    monkeypatch.setenv("EVALHUB_JUDGE_ENV_ALLOW", "LOCAL_LLM_URL, LOCAL_LLM_KEY")
    assert run(workdir, [rubric], GOOD) == 0
    assert judge.stats()["total"] == 6


def test_a_bad_allowed_name_is_a_usage_error(workdir, judge, capsys, monkeypatch):
    assert run(workdir, [gate_rubric()], GOOD, "--allow-env", "not a name") == 2
    monkeypatch.setenv("EVALHUB_JUDGE_ENV_ALLOW", "LOCAL_KEY,$(rm -rf)")
    assert run(workdir, [gate_rubric()], GOOD) == 2
    err = capsys.readouterr().err
    assert "'not a name' is not an environment variable name" in err and "'$(rm -rf)'" in err
    assert judge.stats()["total"] == 0


@pytest.mark.parametrize("stage", ["gate", "warn", "observe"])
@pytest.mark.parametrize("fault", ["401", "401_masked", "403"])
def test_a_refused_key_exits_2_whatever_the_stage(workdir, judge, capsys, stage, fault):
    judge.control(fault=fault)
    assert run(workdir, [gate_rubric(stage=stage)], GOOD, "--concurrency", "1") == 2
    captured = capsys.readouterr()
    assert "evalhub-gate: error: the key for rubric return-policy was refused: key refused: HTTP 4" in captured.err
    assert "(the key in EVALHUB_JUDGE_API_KEY)" in captured.err
    assert "sk-test-not-a-real-key" not in captured.out + captured.err
    assert "sk-test-" not in captured.out + captured.err and "-key" not in captured.err.split("was refused")[1]
    assert judge.stats()["total"] == 1  # asked once: the rest of the batch knows the key is refused


def test_an_outage_still_exits_3(workdir, judge):
    judge.control(fault="500")
    assert run(workdir, [gate_rubric()], GOOD) == 3


def test_the_help_names_allow_env(capsys):
    with pytest.raises(SystemExit):
        gate_cli.build_parser().parse_args(["check", "--help"])
    assert "--allow-env NAME" in capsys.readouterr().out


def test_the_check_happens_before_the_outputs_are_read(workdir, judge, capsys):
    config = write_config(workdir / "gates.json", gate_rubric(api_key_env="GITHUB_TOKEN"))
    write_outputs(workdir / "outputs.jsonl", GOOD)
    assert gate_cli.main(["check", "--config", config, "--outputs", "missing.jsonl"]) == 2
    assert "GITHUB_TOKEN is never allowed" in capsys.readouterr().err


def _installed_gate(workdir, env):
    import os
    import subprocess
    import sys
    from pathlib import Path

    gate = Path(sys.executable).parent / "evalhub-gate"
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "EVALHUB_", "OPENAI_", "ANTHROPIC_"))}
    return subprocess.run([str(gate), "check", "--config", "gates.json", "--outputs", "outputs.jsonl"], cwd=workdir,
                          env={**clean, **env}, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("judge_fields", [
    {"provider": "openai", "api_key_env": "OPENAI_API_KEY", "base_url_env": "EVALHUB_JUDGE_DEMO_URL"},
    {"provider": "openai", "api_key_env": None, "base_url_env": "EVALHUB_JUDGE_DEMO_URL"},  # OPENAI_API_KEY by default
    {"provider": "openai-compatible", "api_key_env": "ANTHROPIC_API_KEY", "base_url_env": "EVALHUB_JUDGE_DEMO_URL"},
], ids=["named", "by default", "another provider's key"])
def test_a_config_cannot_send_a_providers_key_to_a_host_it_chose(workdir, judge, judge_fields):
    write_config(workdir / "gates.json", gate_rubric(**judge_fields))
    write_outputs(workdir / "outputs.jsonl", GOOD)
    # The config's URL variable names another host: here the stand-in, which counts what reaches it.
    env = {"OPENAI_API_KEY": "sk-the-pipelines-openai-key", "ANTHROPIC_API_KEY": "sk-ant-the-pipelines-key",
           "EVALHUB_JUDGE_DEMO_URL": judge.openai_base_url}

    done = _installed_gate(workdir, env)

    assert done.returncode == 2, done.stdout + done.stderr  # before: exit 0, the key sent as a bearer token
    key = judge_fields["api_key_env"] or "OPENAI_API_KEY"
    assert (f"evalhub-gate: error: a judge would send a key to an endpoint it is not paired with: rubric "
            f"return-policy: {key} goes only to its provider's own endpoint or a base URL the pipeline pairs with it"
            in done.stderr), done.stderr
    assert "not to EVALHUB_JUDGE_DEMO_URL, which the config chose" in done.stderr
    assert judge.stats()["total"] == 0 and "sk-the" not in done.stderr + done.stdout


def test_a_pair_the_pipeline_makes_is_honoured_and_pins_its_key(workdir, judge):
    write_outputs(workdir / "outputs.jsonl", GOOD)
    env = {"OPENAI_API_KEY": "sk-the-pipelines-openai-key", "EVALHUB_JUDGE_DEMO_URL": judge.openai_base_url,
           "EVALHUB_JUDGE_OTHER_URL": judge.openai_base_url, "EVALHUB_JUDGE_API_KEY": "sk-judge",
           "EVALHUB_JUDGE_KEY_PAIRS": "OPENAI_API_KEY=EVALHUB_JUDGE_DEMO_URL, "
                                      "EVALHUB_JUDGE_API_KEY=EVALHUB_JUDGE_OTHER_URL"}
    write_config(workdir / "gates.json", gate_rubric(provider="openai", api_key_env="OPENAI_API_KEY",
                                                     base_url_env="EVALHUB_JUDGE_DEMO_URL"))
    assert _installed_gate(workdir, env).returncode == 0
    assert judge.stats()["total"] == len(GOOD)

    # EVALHUB_JUDGE_API_KEY is listed: pinned to its URL variable, it no longer goes where a config says.
    write_config(workdir / "gates.json", gate_rubric(base_url_env="EVALHUB_JUDGE_DEMO_URL"))
    pinned = _installed_gate(workdir, env)
    assert pinned.returncode == 2 and "EVALHUB_JUDGE_API_KEY goes only to" in pinned.stderr, pinned.stderr


def test_the_engine_refuses_the_pairing_too_in_the_app(judge):
    from judges.engine import judge_case
    from tests.judges.gate.test_cli import judge_spec

    config = judge_spec(provider="openai", api_key_env="OPENAI_API_KEY", base_url_env="EVALHUB_JUDGE_DEMO_URL")
    env = {"OPENAI_API_KEY": "sk-the-servers-key", "EVALHUB_JUDGE_DEMO_URL": judge.openai_base_url}

    j = judge_case(GOOD[0], config, 1, env=env)

    assert (j.outcome, j.error) == ("not_evaluated", "config error")
    assert "OPENAI_API_KEY goes only to its provider's own endpoint" in j.reason
    assert judge.stats()["total"] == 0
