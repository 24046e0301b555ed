"""The judge config editor's other judges: a lead sets a fallback, a second opinion (and when it is asked)
and an adjudicator, field by field; the same-family refusal and the other engine checks show on the field
at fault; an older `secondary` is shown as the one it names and saved in the new form."""

import pytest
from django.urls import reverse

from judges.configs import services as config_services
from judges.configs.forms import JudgeConfigForm
from judges.engine import JudgeConfig as EngineConfig
from judges.models import JudgeConfig, ModelPrice
from tests.conftest import TEST_PROJECT, store_project
from tests.judges.configs.test_views import form_data
from tests.judges.helpers import MODEL, behavioral_spec, make_cases

SECOND = "claude-haiku-4-5-20251001"
FALLBACK = "gpt-4.1-mini-2025-04-14"
ADJUDICATOR = "claude-opus-4-1-20250805"


def second_opinion(**fields) -> dict:
    return {
        "second_opinion_provider": "anthropic", "second_opinion_model": SECOND,
        "second_opinion_base_url_env": "EVALHUB_JUDGE_ANTHROPIC_URL",
        "second_opinion_api_key_env": "EVALHUB_JUDGE_API_KEY", "second_opinion_model_family": "",
        "second_opinion_params": "", "when_categories": "", "when_share": "", **fields,
    }


def save(client, rubric, **fields):
    return client.post(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug]), form_data(**fields))


@pytest.mark.parametrize(("when_fields", "when"), [
    ({}, [{"mode": "always"}]),
    ({"when_modes": ["safety", "sample"], "when_categories": "adversarial, safety ,", "when_share": "0.25"},
     [{"mode": "safety", "categories": ["adversarial", "safety"]}, {"mode": "sample", "share": 0.25}]),
])
def test_a_lead_sets_a_second_opinion_and_when_it_is_asked(lead_client, rubric, when_fields, when):
    response = save(lead_client, rubric, **second_opinion(**when_fields))
    assert response.status_code == 302, response.context["form"].errors
    spec = JudgeConfig.objects.get().spec
    second = spec["second_opinion"]
    assert (second["provider"], second["model"], second["when"]) == ("anthropic", SECOND, when)
    assert second["params"] == {}  # the judge's temperature and max_tokens, in the engine
    assert spec["secondary"] is None and "fallback" not in spec


def test_a_lead_sets_all_three_and_the_page_shows_each_with_a_weaker_adjudicator_warned(lead_client, rubric, lead):
    ModelPrice.objects.create(model=MODEL, input_per_mtok=2, output_per_mtok=8, updated_by=lead)
    ModelPrice.objects.create(model=ADJUDICATOR, input_per_mtok=0.1, output_per_mtok=0.4, updated_by=lead)
    response = save(lead_client, rubric, **second_opinion(
        fallback_provider="openai", fallback_model=FALLBACK, adjudicator_provider="anthropic",
        adjudicator_model=ADJUDICATOR, adjudicator_api_key_env="EVALHUB_JUDGE_API_KEY"))
    assert response.status_code == 302, response.context["form"].errors
    spec = JudgeConfig.objects.get().spec
    assert (spec["fallback"]["model"], spec["adjudicator"]["model"]) == (FALLBACK, ADJUDICATOR)
    page = lead_client.get(response.url).content.decode()
    for role, model in (("fallback", FALLBACK), ("second_opinion", SECOND), ("adjudicator", ADJUDICATOR)):
        assert f'data-testid="spec-{role}"' in page and model in page
    assert f"The adjudicator &#x27;{ADJUDICATOR}&#x27; costs less than &#x27;{MODEL}&#x27;" in page


def test_the_prompt_preview_says_which_judges_are_sent_the_prompt(lead_client, rubric, dataset):
    make_cases(dataset, 1)
    data = form_data(**second_opinion(when_modes=["borderline"], output_kind="scores", adjudicator_model=ADJUDICATOR,
                                      adjudicator_provider="anthropic"))
    response = lead_client.post(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug]),
                                {**data, "action": "preview", "preview_dataset": dataset.slug}, HTTP_HX_REQUEST="true")
    judges = response.context["preview"].judges
    assert [(who, model) for who, model, _ in judges] == [
        ("judge", MODEL), ("second opinion", SECOND), ("adjudicator", ADJUDICATOR)]
    assert "when: borderline" in judges[1][2] and 'data-testid="prompt-judges"' in response.content.decode()


def test_no_model_means_no_judge_whatever_else_is_filled(lead_client, rubric):
    save(lead_client, rubric, **second_opinion(second_opinion_model="", fallback_provider="openai"))
    spec = JudgeConfig.objects.get().spec
    assert "second_opinion" not in spec and "fallback" not in spec


@pytest.mark.parametrize("fields", [
    {"second_opinion_provider": "openai", "second_opinion_model": "gpt-4.1-2025-04-14"},  # another OpenAI model
    {"second_opinion_provider": "openai", "second_opinion_model": MODEL},  # the same model, deployed twice
    # a local model said to be of the judge's family
    {"second_opinion_provider": "openai-compatible", "second_opinion_model": "judge-local",
     "second_opinion_model_family": "openai", "second_opinion_base_url_env": "EVALHUB_JUDGE_LOCAL_URL"},
])
def test_it_refuses_a_second_opinion_of_the_judges_family_on_the_model_field(lead_client, rubric, fields):
    response = save(lead_client, rubric, **second_opinion(**fields))
    assert response.status_code == 200 and not JudgeConfig.objects.exists()
    [message] = response.context["form"].errors["second_opinion_model"]
    assert "must come from another model family than the primary (both are 'openai'" in message
    html = response.content.decode()
    assert "must come from another model family" in html and "both are &#x27;openai&#x27;" in html


@pytest.mark.parametrize(("fields", "field"), [
    ({"when_modes": ["sample"]}, "when_share"),  # a share is needed
    ({"when_modes": ["sample"], "when_share": "1.5"}, "when_share"),
    ({"when_modes": ["safety"]}, "when_categories"),  # at least one category
    ({"when_modes": ["borderline"]}, "when_modes"),  # a verdict judge has no scores
    ({"second_opinion_provider": ""}, "second_opinion_provider"),
    ({"second_opinion_params": '{"temperature": 9}'}, "second_opinion_params"),
    ({"second_opinion_api_key_env": "sk-live-0123456789"}, "second_opinion_api_key_env"),
    ({"second_opinion_provider": "openai-compatible", "second_opinion_model": "qwen2.5-72b-instruct",
      "second_opinion_base_url_env": ""}, "second_opinion_base_url_env"),
    ({"second_opinion_model": "", "adjudicator_provider": "openai", "adjudicator_model": MODEL}, "adjudicator_model"),
    ({"fallback_model": FALLBACK}, "fallback_provider"),
])
def test_it_shows_each_error_on_its_field(lead_client, rubric, fields, field):
    response = save(lead_client, rubric, **second_opinion(**fields))
    assert response.status_code == 200 and not JudgeConfig.objects.exists()
    assert field in response.context["form"].errors, response.context["form"].errors


def test_it_puts_the_behavioral_layer_rule_on_the_model(lead_client, rubric):
    contract_only = {"layers": ["contract"], "contract_checks": ["answer_present"], "provider": "", "model": "",
                     "base_url_env": "", "api_key_env": ""}
    response = save(lead_client, rubric, **contract_only, **second_opinion())
    assert "only a config with the behavioral layer" in response.context["form"].errors["second_opinion_model"][0]


def _posted_back(form) -> JudgeConfigForm:
    """The page's values posted back, as a browser would send them."""
    posted = JudgeConfigForm(data={name: _as_posted(form[name].value()) for name in form.fields},
                             project=store_project())
    posted.data = {k: v for k, v in posted.data.items() if v is not None}
    assert posted.is_valid(), posted.errors
    return posted


@pytest.mark.parametrize("when", [
    [{"mode": "always"}], [{"mode": "sample", "share": 0.2}, {"mode": "safety", "categories": ["adversarial"]}],
])
def test_the_editor_prefills_each_judge_so_that_saving_it_unchanged_makes_no_version(lead_client, rubric, lead, when):
    second = {"provider": "anthropic", "model": SECOND, "base_url_env": "EVALHUB_JUDGE_ANTHROPIC_URL",
              "api_key_env": "EVALHUB_JUDGE_API_KEY", "when": when}
    spec = behavioral_spec(second_opinion=second, fallback={"provider": "openai", "model": FALLBACK},
                           adjudicator={"provider": "anthropic", "model": ADJUDICATOR})
    config = config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)
    form = lead_client.get(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug])).context["form"]
    spec = {**_posted_back(form).to_spec(), "rubric": rubric.slug, "criteria": rubric.criteria}
    assert EngineConfig.from_dict(spec).config_hash == config.config_hash


@pytest.mark.parametrize(("secondary", "role", "when"), [
    ({"role": "second_opinion", "when": {"mode": "categories", "categories": ["adversarial"]}}, "second_opinion",
     [{"mode": "safety", "categories": ["adversarial"]}]),
    ({"role": "second_opinion", "when": {"mode": "sample", "share": 0.5}}, "second_opinion",
     [{"mode": "sample", "share": 0.5}]),
    ({"role": "fallback"}, "fallback", None),
])
def test_an_older_secondary_is_shown_as_the_one_it_names_and_saved_anew_as_a_new_version(
    lead_client, rubric, lead, secondary, role, when
):
    secondary = {**secondary, "provider": "anthropic", "model": SECOND, "api_key_env": "EVALHUB_JUDGE_API_KEY"}
    legacy = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(secondary=secondary), by=lead)
    form = lead_client.get(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug])).context["form"]
    assert form[f"{role}_model"].value() == SECOND
    spec = _posted_back(form).to_spec()
    assert spec["secondary"] is None and spec[role]["model"] == SECOND
    if when:
        assert spec[role]["when"] == when
    saved = config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)
    assert saved.version == legacy.version + 1 and saved.config_hash != legacy.config_hash


def _as_posted(value):
    if isinstance(value, list):
        return value
    return "" if value is None else str(value)
