"""A judge reads only allowed environment variables: one engine function decides, and the engine obeys it."""

import pytest

from judges.engine import env_name_refusals, judge_batch, judge_case, parse_env_allow

from .factories import ANTHROPIC_MODEL, judge_config, tool_case


@pytest.mark.parametrize(
    "name",
    [
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "EVALHUB_JUDGE_API_KEY",
        "EVALHUB_JUDGE_OPENAI_URL",
    ],
)
def test_the_providers_usual_names_and_evalhub_judge_names_are_allowed(name):
    assert env_name_refusals(judge_config(api_key_env=name)) == []


@pytest.mark.parametrize(
    "name",
    [
        "DJANGO_SECRET_KEY",
        "DATABASE_URL",
        "CELERY_BROKER_URL",
        "EVALHUB_DATA_DIR",
        "EVALHUB_JUDGE",  # no underscore after JUDGE: not the judge's prefix
        "GITHUB_TOKEN",
        "ACTIONS_RUNTIME_TOKEN",
        "RUNNER_TEMP",
        "CI_JOB_TOKEN",
        "github_token",  # some platforms ignore case
    ],
)
def test_the_apps_and_the_runners_names_are_never_allowed_even_when_listed(name):
    [message] = env_name_refusals(judge_config(api_key_env=name), extra_allowed=[name])
    assert message.startswith(f"api_key_env: {name if name == name.upper() else 'the variable it names'} is never")


def test_another_name_is_refused_unless_the_operator_allows_it():
    config = judge_config(base_url_env="LOCAL_LLM_URL", api_key_env="LOCAL_LLM_KEY")
    refusals = env_name_refusals(config)
    assert [m.split(":")[0] for m in refusals] == ["base_url_env", "api_key_env"]
    assert "LOCAL_LLM_KEY is not an allowed variable" in refusals[1]
    assert "EVALHUB_JUDGE_ENV_ALLOW" in refusals[1] and "--allow-env" in refusals[1]
    assert env_name_refusals(config, extra_allowed=["LOCAL_LLM_URL"]) == [refusals[1]]
    assert env_name_refusals(config, extra_allowed=("LOCAL_LLM_URL", "LOCAL_LLM_KEY")) == []


def test_the_secondarys_names_are_checked_too():
    secondary = {
        "role": "fallback",
        "provider": "anthropic",
        "model": ANTHROPIC_MODEL,
        "base_url_env": "EVALHUB_JUDGE_ANTHROPIC_URL",
        "api_key_env": "GITHUB_TOKEN",
    }
    [message] = env_name_refusals(judge_config(secondary=secondary))
    assert message.startswith("secondary.api_key_env: GITHUB_TOKEN is never allowed")


def test_a_key_pasted_where_a_name_belongs_is_never_echoed():
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    [message] = env_name_refusals(judge_config(api_key_env=token))
    assert token not in message and message.startswith("api_key_env: the variable it names is not an allowed")


def test_parse_env_allow():
    assert parse_env_allow(" LOCAL_KEY, ,OTHER_URL ") == ("LOCAL_KEY", "OTHER_URL")
    assert parse_env_allow("") == ()
    with pytest.raises(ValueError, match="'not a name'"):
        parse_env_allow("LOCAL_KEY,not a name")


@pytest.mark.parametrize("name", ["DJANGO_SECRET_KEY", "DATABASE_URL", "GITHUB_TOKEN"])
@pytest.mark.parametrize("field", ["api_key_env", "base_url_env"])
def test_the_engine_sends_nothing_for_a_config_naming_a_forbidden_variable(fake, env, name, field):
    secret_value = "the-value-of-" + name
    hostile_env = {**env, name: fake.openai_base_url if field == "base_url_env" else secret_value}
    config = judge_config(**{field: name})
    j = judge_case(tool_case(), config, 1, env=hostile_env)
    assert (j.outcome, j.error, j.provider_calls) == ("not_evaluated", "config error", 0)
    assert j.reason.startswith(f"config error: {field}: {name} is never allowed")
    # Even listed by the operator, and in a batch: nothing reaches the provider.
    judgments = judge_batch(
        [(tool_case(), 1), (tool_case(), 2)], config, concurrency=2, env=hostile_env, allowed_env=[name]
    )
    assert {j.error for j in judgments} == {"config error"}
    assert fake.requests() == [] and fake.stats()["total"] == 0


def test_the_engine_keeps_the_contract_checks_of_a_refused_config(fake, env):
    config = judge_config(layers=["contract", "behavioral"], contract_checks=["answer_present"], api_key_env="CI_TOKEN")
    j = judge_case(tool_case(), config, 1, env={**env, "CI_TOKEN": "x"})
    assert (j.outcome, j.error, j.layer) == ("not_evaluated", "config error", "behavioral")
    assert [c["name"] for c in j.checks] == ["answer_present"]
    failed = judge_case(tool_case(output=""), config, 1, env={**env, "CI_TOKEN": "x"})
    assert failed.outcome == "fail"  # a failed contract is the verdict, whatever comes later
    assert fake.stats()["total"] == 0


def test_a_name_the_operator_allows_is_read(fake, env):
    config = judge_config(api_key_env="LOCAL_LLM_KEY")
    local = {**env, "LOCAL_LLM_KEY": "sk-local"}
    assert judge_case(tool_case(), config, 1, env=local).error == "config error"
    assert fake.stats()["total"] == 0
    j = judge_case(tool_case(), config, 1, env=local, allowed_env=["LOCAL_LLM_KEY"])
    assert (j.outcome, j.provider_calls) == ("pass", 1)
