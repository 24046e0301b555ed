"""The editor puts the engine's refusal of a pattern RE2 cannot take, or of a schema whose reference does not
resolve, on its field at save: such a config would fail (or hang on) every case it judges."""

import json

import pytest
from django.urls import reverse

from judges.models import JudgeConfig
from tests.conftest import TEST_PROJECT
from tests.judges.configs.test_views import form_data

CONTRACT = {"layers": ["contract"], "provider": "", "model": "", "base_url_env": "", "api_key_env": ""}


@pytest.mark.parametrize("fields, field, says", [
    ({"contract_checks": ["must_match"], "must_match": "(a)\\1"}, "must_match", "RE2 cannot take pattern 1"),
    ({"contract_checks": ["must_not_match"], "must_not_match": "refund(?!ed)"}, "must_not_match",
     "RE2 cannot take pattern 1"),
    ({"contract_checks": ["json_schema"],
      "json_schema": json.dumps({"type": "object", "properties": {"order": {"$ref": "#/$defs/order"}}})},
     "json_schema", "does not resolve within the schema"),
])
def test_it_refuses_the_config_on_the_field_at_save(lead_client, rubric, fields, field, says):
    url = reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug])
    response = lead_client.post(url, form_data(**{**CONTRACT, **fields}))

    assert response.status_code == 200
    errors = response.context["form"].errors
    assert field in errors and says in " ".join(errors[field]), errors
    assert JudgeConfig.objects.count() == 0


def test_a_pattern_re2_takes_is_saved(lead_client, rubric):
    url = reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug])
    response = lead_client.post(url, form_data(**CONTRACT, contract_checks=["must_match"], must_match="^(a+)+$"))

    assert response.status_code == 302
    assert JudgeConfig.objects.get().spec["must_match"] == ["^(a+)+$"]
