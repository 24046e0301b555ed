"""The config editor and its preview know the semantic layer: its fields, its errors on their field, the
references a case is compared with."""

import pytest
from django.urls import reverse

from judges.configs import services as config_services
from judges.models import JudgeConfig
from tests.conftest import TEST_PROJECT
from tests.judges.configs.test_views import form_data
from tests.judges.helpers import give_golden_answers, make_cases, semantic_spec

SEMANTIC_FIELDS = {
    "semantic_provider": "openai-compatible", "semantic_model": "text-embedding-3-small",
    "semantic_base_url_env": "EVALHUB_JUDGE_OPENAI_URL", "semantic_api_key_env": "EVALHUB_JUDGE_API_KEY",
    "semantic_dimensions": "", "semantic_pass_at": "0.85", "semantic_fail_below": "0.3",
}


def test_it_saves_the_semantic_layer_from_its_fields(lead_client, rubric):
    data = form_data(layers=["semantic", "behavioral"], **SEMANTIC_FIELDS)
    response = lead_client.post(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug]), data)
    assert response.status_code == 302
    spec = JudgeConfig.objects.get().spec
    assert spec["layers"] == ["semantic", "behavioral"]
    assert spec["semantic"] == {
        "provider": "openai-compatible", "model": "text-embedding-3-small", "model_family": None,
        "base_url_env": "EVALHUB_JUDGE_OPENAI_URL", "api_key_env": "EVALHUB_JUDGE_API_KEY", "dimensions": None,
        "pass_at": 0.85, "fail_below": 0.3,
    }


def test_without_the_layer_its_fields_are_not_saved(lead_client, rubric):
    lead_client.post(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug]), form_data(**SEMANTIC_FIELDS))
    assert JudgeConfig.objects.get().spec["semantic"] is None


@pytest.mark.parametrize(("overrides", "field"), [
    ({"semantic_fail_below": "0.9"}, "semantic_fail_below"),  # above pass_at
    ({"semantic_pass_at": ""}, "semantic_pass_at"),
    ({"semantic_model": ""}, "semantic_model"),
    ({"semantic_api_key_env": "AWS_SECRET_ACCESS_KEY"}, "semantic_api_key_env"),
])
def test_it_shows_an_engine_error_on_the_semantic_field_it_names(lead_client, rubric, overrides, field):
    data = form_data(layers=["semantic", "behavioral"], **{**SEMANTIC_FIELDS, **overrides})
    response = lead_client.post(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug]), data)
    assert response.status_code == 200
    assert field in response.context["form"].errors, response.context["form"].errors
    assert not JudgeConfig.objects.exists()


def test_the_editor_prefills_the_semantic_fields_from_the_newest_version(lead_client, rubric, lead):
    config_services.judge_config_save(rubric=rubric, spec=semantic_spec(pass_at=0.7), by=lead)
    form = lead_client.get(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug])).context["form"]
    assert (form.initial["semantic_model"], form.initial["semantic_pass_at"]) == ("text-embedding-3-small", 0.7)
    assert form.initial["layers"] == ["semantic"]


def test_the_preview_of_a_semantic_config_lists_the_references(lead_client, rubric, dataset, lead):
    cases = make_cases(dataset, 2)
    give_golden_answers(cases)
    cases[1].metadata = {"references": ["ORD-1 left the warehouse."]}
    cases[1].save(update_fields=["metadata"])
    config = config_services.judge_config_save(rubric=rubric, spec=semantic_spec(pass_at=0.7), by=lead)
    html = lead_client.get(reverse("judges:config_detail", args=[TEST_PROJECT, config.pk]),
                           {"preview_dataset": dataset.slug, "preview_case": cases[1].pk}).content.decode()
    assert 'data-testid="semantic-preview"' in html
    assert "ORD-1 shipped yesterday and arrives soon." in html and "ORD-1 left the warehouse." in html
    assert "Pass at 0.7" in html and "no judge" in html
    assert 'data-testid="prompt-user"' not in html  # a semantic-only config sends no prompt
