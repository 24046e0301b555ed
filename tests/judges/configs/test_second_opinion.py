"""The judge config editor's secondary judge: a lead sets a second opinion and when it is
asked, field by field; the same-family refusal and the other engine checks show on the field at fault."""

import pytest
from django.urls import reverse

from judges.configs import services as config_services
from judges.configs.forms import JudgeConfigForm
from judges.engine import JudgeConfig as EngineConfig
from judges.models import JudgeConfig
from tests.judges.configs.test_views import form_data
from tests.judges.helpers import MODEL, behavioral_spec

SECOND = "claude-haiku-4-5-20251001"


def second_opinion(**fields) -> dict:
    return {
        "secondary_role": "second_opinion", "secondary_provider": "anthropic", "secondary_model": SECOND,
        "secondary_base_url_env": "EVALHUB_JUDGE_ANTHROPIC_URL", "secondary_api_key_env": "EVALHUB_JUDGE_API_KEY",
        "secondary_model_family": "", "secondary_params": "", "when_mode": "always", "when_categories": "",
        "when_share": "", **fields,
    }


def save(client, rubric, **fields):
    return client.post(reverse("judges:config_create", args=[rubric.slug]), form_data(**fields))


@pytest.mark.parametrize(("when_fields", "when"), [
    ({}, {"mode": "always"}),
    ({"when_mode": "categories", "when_categories": "adversarial, safety ,"},
     {"mode": "categories", "categories": ["adversarial", "safety"]}),
    ({"when_mode": "sample", "when_share": "0.25"}, {"mode": "sample", "share": 0.25}),
])
def test_a_lead_sets_a_second_opinion_and_when_it_is_asked(lead_client, rubric, when_fields, when):
    response = save(lead_client, rubric, **second_opinion(**when_fields))
    assert response.status_code == 302, response.context["form"].errors
    secondary = JudgeConfig.objects.get().spec["secondary"]
    assert (secondary["role"], secondary["provider"], secondary["model"]) == ("second_opinion", "anthropic", SECOND)
    assert secondary["when"] == when
    assert secondary["params"] == {}  # the judge's temperature and max_tokens, in the engine


def test_borderline_is_for_a_scores_judge(lead_client, rubric):
    assert save(lead_client, rubric, output_kind="scores", **second_opinion(when_mode="borderline")).status_code == 302
    assert JudgeConfig.objects.get().spec["secondary"]["when"] == {"mode": "borderline"}


def test_a_fallback_has_no_when(lead_client, rubric):
    save(lead_client, rubric, **second_opinion(secondary_role="fallback", when_mode="sample", when_share="0.5"))
    assert JudgeConfig.objects.get().spec["secondary"]["when"] is None


def test_no_role_means_no_secondary_whatever_else_is_filled(lead_client, rubric):
    save(lead_client, rubric, **second_opinion(secondary_role=""))
    assert JudgeConfig.objects.get().spec["secondary"] is None


@pytest.mark.parametrize("fields", [
    {"secondary_provider": "openai", "secondary_model": "gpt-4.1-2025-04-14"},  # another OpenAI model
    {"secondary_provider": "openai", "secondary_model": MODEL},  # the same model, deployed twice
    # a local model said to be of the judge's family
    {"secondary_provider": "openai-compatible", "secondary_model": "judge-local", "secondary_model_family": "openai",
     "secondary_base_url_env": "EVALHUB_JUDGE_LOCAL_URL"},
])
def test_it_refuses_a_second_opinion_of_the_judges_family_on_the_model_field(lead_client, rubric, fields):
    response = save(lead_client, rubric, **second_opinion(**fields))
    assert response.status_code == 200 and not JudgeConfig.objects.exists()
    [message] = response.context["form"].errors["secondary_model"]
    assert "a second_opinion must come from another model family than the primary (both are 'openai'" in message
    assert "a second deployment of the same family is no second opinion" in message
    html = response.content.decode()
    assert "must come from another model family" in html and "both are &#x27;openai&#x27;" in html


@pytest.mark.parametrize(("fields", "field"), [
    ({"when_mode": "sample"}, "when_share"),  # a share is needed
    ({"when_mode": "sample", "when_share": "1.5"}, "when_share"),
    ({"when_mode": "categories"}, "when_categories"),  # at least one category
    ({"when_mode": "borderline"}, "when_mode"),  # a verdict judge has no scores
    ({"secondary_provider": ""}, "secondary_provider"),
    ({"secondary_model": ""}, "secondary_model"),
    ({"secondary_params": '{"temperature": 9}'}, "secondary_params"),
    ({"secondary_api_key_env": "sk-live-0123456789"}, "secondary_api_key_env"),
    ({"secondary_provider": "openai-compatible", "secondary_model": "qwen2.5-72b-instruct",
      "secondary_base_url_env": ""}, "secondary_base_url_env"),
])
def test_it_shows_each_secondary_error_on_its_field(lead_client, rubric, fields, field):
    response = save(lead_client, rubric, **second_opinion(**fields))
    assert response.status_code == 200 and not JudgeConfig.objects.exists()
    assert field in response.context["form"].errors, response.context["form"].errors


def test_it_puts_the_behavioral_layer_rule_on_the_role(lead_client, rubric):
    contract_only = {"layers": ["contract"], "contract_checks": ["answer_present"], "provider": "", "model": "",
                     "base_url_env": "", "api_key_env": ""}
    response = save(lead_client, rubric, **contract_only, **second_opinion())
    assert "only a config with the behavioral layer" in response.context["form"].errors["secondary_role"][0]


@pytest.mark.parametrize("when", [
    {"mode": "always"}, {"mode": "categories", "categories": ["adversarial", "safety"]},
    {"mode": "sample", "share": 0.2},
])
def test_the_editor_prefills_a_second_opinion_so_that_saving_it_unchanged_makes_no_version(
    lead_client, rubric, lead, when
):
    secondary = {"role": "second_opinion", "provider": "anthropic", "model": SECOND,
                 "base_url_env": "EVALHUB_JUDGE_ANTHROPIC_URL", "api_key_env": "EVALHUB_JUDGE_API_KEY", "when": when}
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(secondary=secondary), by=lead)
    form = lead_client.get(reverse("judges:config_create", args=[rubric.slug])).context["form"]
    assert (form.initial["secondary_role"], form.initial["when_mode"]) == ("second_opinion", when["mode"])
    # The page's values posted back, as a browser would send them.
    posted = JudgeConfigForm(data={name: _as_posted(form[name].value()) for name in form.fields})
    posted.data = {k: v for k, v in posted.data.items() if v is not None}
    assert posted.is_valid(), posted.errors
    spec = {**posted.to_spec(), "rubric": rubric.slug, "criteria": rubric.criteria}
    assert EngineConfig.from_dict(spec).config_hash == config.config_hash


def _as_posted(value):
    if isinstance(value, list):
        return value
    return "" if value is None else str(value)
