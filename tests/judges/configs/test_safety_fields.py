"""The editor offers the safety contracts field by field, and puts the engine's refusals on them."""

import pytest
from django.urls import reverse

from judges.models import JudgeConfig
from tests.conftest import TEST_PROJECT
from tests.judges.configs.test_views import form_data

SAFETY = {
    "layers": ["contract"], "provider": "", "model": "", "base_url_env": "", "api_key_env": "",
    "contract_checks": ["allowed_tools", "forbidden_tools", "max_tool_calls", "no_secrets"],
    "allowed_tools": "lookup_order\r\nrefund\r\n", "forbidden_tools": "delete_account",
    "max_tool_calls": "3", "secret_patterns": r"\bACME-[0-9]{6}\b",
}


def test_it_saves_the_safety_contracts_field_by_field(lead_client, rubric):
    response = lead_client.post(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug]), form_data(**SAFETY))

    assert response.status_code == 302
    spec = JudgeConfig.objects.get().spec
    assert spec["allowed_tools"] == ["lookup_order", "refund"] and spec["forbidden_tools"] == ["delete_account"]
    assert (spec["max_tool_calls"], spec["secret_patterns"]) == (3, [r"\bACME-[0-9]{6}\b"])
    page = lead_client.get(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug])).content.decode()
    assert 'name="max_tool_calls" value="3"' in page  # prefilled for the next version
    assert "lookup_order\nrefund</textarea>" in page


@pytest.mark.parametrize("overrides, field", [
    ({"allowed_tools": ""}, "allowed_tools"),
    ({"max_tool_calls": ""}, "max_tool_calls"),
    ({"max_tool_calls": "-1"}, "max_tool_calls"),
    ({"secret_patterns": "(unclosed"}, "secret_patterns"),
    ({"forbidden_tools": "refund"}, "forbidden_tools"),  # also allowed
])
def test_it_shows_a_safety_field_error_on_its_field(lead_client, rubric, overrides, field):
    url = reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug])
    response = lead_client.post(url, form_data(**{**SAFETY, **overrides}))

    assert response.status_code == 200
    assert field in response.context["form"].errors, response.context["form"].errors
    assert JudgeConfig.objects.count() == 0


def test_a_failed_save_says_what_failed_at_the_top_of_the_form_with_a_link_to_each_field(lead_client, rubric):
    url = reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug])
    for field, bad in (("max_tool_calls", "-1"), ("secret_patterns", "(unclosed")):
        body = lead_client.post(url, form_data(**{**SAFETY, field: bad})).content.decode()

        summary = body.index('data-testid="error-summary"')
        assert summary < body.index('name="layers"')  # above the form's first field, where the page opens
        listed = body[summary:body.index("</div>", summary)]
        assert "Not saved: 1 thing to fix." in listed
        assert f'href="#id_{field}"' in listed and f'id="id_{field}"' in body
