"""A judge config may name only allowed environment variables: refused when saved, and again in the
worker before any call (docs/security.md; judges.engine.env_name_refusals decides both times)."""

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse

from evalhub.settings import env_names
from judges.configs import services as config_services
from judges.engine import JudgeConfig as EngineConfig
from judges.models import JudgeConfig, Run
from judges.runs import services as run_services
from tests.conftest import TEST_PROJECT
from tests.judges.configs.test_views import form_data
from tests.judges.helpers import behavioral_spec, make_cases

FORBIDDEN = ["DJANGO_SECRET_KEY", "DATABASE_URL", "GITHUB_TOKEN"]


@pytest.mark.parametrize("name", FORBIDDEN)
@pytest.mark.parametrize("field", ["api_key_env", "base_url_env", "fallback_api_key_env", "adjudicator_base_url_env"])
def test_the_editor_refuses_a_forbidden_variable_on_its_field(lead_client, rubric, name, field):
    data = form_data(**{field: name})
    if field.startswith("fallback_"):
        data.update(fallback_provider="openai", fallback_model="gpt-4.1-2025-04-14")
    if field.startswith("adjudicator_"):
        data.update(adjudicator_provider="openai", adjudicator_model="gpt-4.1-2025-04-14",
                    second_opinion_provider="anthropic", second_opinion_model="claude-haiku-4-5-20251001")
    response = lead_client.post(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug]), data)

    assert response.status_code == 200
    [error] = response.context["form"].errors[field]
    assert f"{name} is never allowed" in error
    assert JudgeConfig.objects.count() == 0


def test_the_editor_puts_each_refused_variable_on_its_own_field(lead_client, rubric):
    data = form_data(base_url_env="LOCAL_LLM_URL", api_key_env="CELERY_BROKER_URL")
    response = lead_client.post(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug]), data)

    errors = response.context["form"].errors
    assert "LOCAL_LLM_URL is not an allowed variable" in errors["base_url_env"][0]
    assert "CELERY_BROKER_URL is never allowed" in errors["api_key_env"][0]


def test_the_operator_may_allow_more_names_but_never_the_apps_own(lead_client, rubric, lead, settings):
    spec = behavioral_spec(api_key_env="LOCAL_LLM_KEY")
    with pytest.raises(config_services.EnvNamesRefused):
        config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)
    settings.EVALHUB_JUDGE_ENV_ALLOW = ("LOCAL_LLM_KEY", "DJANGO_SECRET_KEY")
    assert config_services.judge_config_save(rubric=rubric, spec=spec, by=lead).spec["api_key_env"] == "LOCAL_LLM_KEY"
    with pytest.raises(config_services.EnvNamesRefused, match="DJANGO_SECRET_KEY is never allowed"):
        config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(api_key_env="DJANGO_SECRET_KEY"), by=lead)


def test_a_changed_key_variable_is_a_new_version(lead, rubric, settings):
    first = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    second = config_services.judge_config_save(
        rubric=rubric, spec=behavioral_spec(api_key_env="EVALHUB_JUDGE_OTHER_KEY"), by=lead
    )
    assert (first.version, second.version) == (1, 2) and first.config_hash != second.config_hash


@pytest.fixture
def eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.EVALHUB_CHUNK_CASES = 4


def stored_config(rubric, lead, **spec) -> JudgeConfig:
    """A config row as one saved before names were checked (or under an allow-list since shortened)."""
    engine_config = EngineConfig.from_dict({**behavioral_spec(**spec), "rubric": rubric.slug, "criteria": "c"})
    return JudgeConfig.objects.create(
        rubric=rubric, version=1, spec=engine_config.to_dict(), config_hash=engine_config.config_hash, created_by=lead
    )


@pytest.mark.parametrize("name", FORBIDDEN)
def test_the_worker_sends_nothing_for_a_stored_config_naming_a_forbidden_variable(
    eager, dataset, rubric, lead, fake_provider, monkeypatch, django_capture_on_commit_callbacks, name
):
    monkeypatch.setenv(name, "the-app's-own-secret")
    make_cases(dataset, 5)
    config = stored_config(rubric, lead, api_key_env=name)
    with django_capture_on_commit_callbacks(execute=True):
        run = run_services.run_start(
            config=config, dataset=dataset, repeats=1, concurrency=2, spend_cap_usd=None, by=lead
        )
    run.refresh_from_db()

    assert run.status == Run.Status.FINISHED and run.provider_calls == 0
    # No contract layer here: every judgment is a config error, none evaluated, nothing sent.
    assert set(run.judgments.values_list("outcome", "error")) == {("not_evaluated", "config error")}
    assert all(f"api_key_env: {name} is never allowed" in r for r in run.judgments.values_list("reason", flat=True))
    assert fake_provider.requests() == [] and fake_provider.stats()["total"] == 0


def test_the_worker_checks_against_todays_allow_list(
    eager, dataset, rubric, lead, fake_provider, monkeypatch, settings, django_capture_on_commit_callbacks
):
    monkeypatch.setenv("LOCAL_LLM_KEY", "sk-local")
    make_cases(dataset, 2)
    settings.EVALHUB_JUDGE_ENV_ALLOW = ("LOCAL_LLM_KEY",)
    spec = behavioral_spec(api_key_env="LOCAL_LLM_KEY")
    config = config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)
    settings.EVALHUB_JUDGE_ENV_ALLOW = ()  # the operator took it back
    start = {"config": config, "dataset": dataset, "repeats": 1, "concurrency": 1, "spend_cap_usd": None, "by": lead}
    with django_capture_on_commit_callbacks(execute=True):
        run = run_services.run_start(**start)
    assert set(run.judgments.values_list("error", flat=True)) == {"config error"}
    assert fake_provider.stats()["total"] == 0
    settings.EVALHUB_JUDGE_ENV_ALLOW = ("LOCAL_LLM_KEY",)
    with django_capture_on_commit_callbacks(execute=True):
        again = run_services.run_start(**start)
    assert set(again.judgments.values_list("outcome", flat=True)) == {"pass"}
    assert fake_provider.stats()["total"] == 2


def test_the_allow_list_setting_is_read_and_checked(monkeypatch):
    monkeypatch.setenv("EVALHUB_JUDGE_ENV_ALLOW", " LOCAL_LLM_KEY, ,LOCAL_LLM_URL ")
    assert env_names("EVALHUB_JUDGE_ENV_ALLOW") == ("LOCAL_LLM_KEY", "LOCAL_LLM_URL")
    monkeypatch.setenv("EVALHUB_JUDGE_ENV_ALLOW", "LOCAL_LLM_KEY,sk-live abc")
    with pytest.raises(ImproperlyConfigured, match="EVALHUB_JUDGE_ENV_ALLOW: 'sk-live abc'"):
        env_names("EVALHUB_JUDGE_ENV_ALLOW")
