"""The price table page: leads list, add and edit model prices; who changed them is recorded."""

from decimal import Decimal

import pytest
from django.urls import reverse

from judges.configs import services as config_services
from judges.models import ModelPrice
from tests.conftest import make_user
from tests.judges.helpers import MODEL, behavioral_spec


def test_it_adds_a_price_recording_who(lead_client, lead):
    response = lead_client.post(reverse("judges:price_list"),
                                {"model": f" {MODEL} ", "input_per_mtok": "0.15", "output_per_mtok": "0.6"})

    price = ModelPrice.objects.get()
    assert response.status_code == 302
    assert (price.model, price.input_per_mtok, price.output_per_mtok) == (MODEL, Decimal("0.15"), Decimal("0.6"))
    assert price.updated_by == lead


def test_it_edits_a_price_recording_who(client, lead):
    other = make_user("leo", role="lead")
    price = ModelPrice.objects.create(model=MODEL, input_per_mtok=1, output_per_mtok=2, updated_by=lead)
    client.force_login(other)

    client.post(reverse("judges:price_edit", args=[price.pk]),
                {"model": MODEL, "input_per_mtok": "0.5", "output_per_mtok": "2"})

    price.refresh_from_db()
    assert (price.input_per_mtok, price.updated_by) == (Decimal("0.5"), other)


def test_it_refuses_a_second_price_for_the_same_model(lead_client, lead):
    ModelPrice.objects.create(model=MODEL, input_per_mtok=1, output_per_mtok=2, updated_by=lead)
    response = lead_client.post(reverse("judges:price_list"),
                                {"model": MODEL, "input_per_mtok": "3", "output_per_mtok": "4"})
    assert response.status_code == 200 and "model" in response.context["form"].errors
    assert ModelPrice.objects.get().input_per_mtok == 1


def test_it_lists_prices_and_the_models_configs_name_without_one(lead_client, rubric, lead):
    ModelPrice.objects.create(model="claude-haiku-4-5-20251001", input_per_mtok=1, output_per_mtok=5,
                              updated_by=lead)
    config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)

    response = lead_client.get(reverse("judges:price_list"))

    page = response.content.decode()
    assert "claude-haiku-4-5-20251001" in page
    assert response.context["missing"] == [MODEL]
    assert "No price yet for" in page


@pytest.mark.parametrize("method, name", [("get", "judges:price_list"), ("post", "judges:price_list")])
def test_it_forbids_reviewers(reviewer_client, method, name):
    data = {"model": MODEL, "input_per_mtok": "1", "output_per_mtok": "1"} if method == "post" else None
    assert getattr(reviewer_client, method)(reverse(name), data).status_code == 403
    assert not ModelPrice.objects.exists()


def test_it_forbids_reviewers_to_edit(reviewer_client, lead):
    price = ModelPrice.objects.create(model=MODEL, input_per_mtok=1, output_per_mtok=2, updated_by=lead)
    reviewer_client.post(reverse("judges:price_edit", args=[price.pk]),
                         {"model": MODEL, "input_per_mtok": "9", "output_per_mtok": "9"})
    price.refresh_from_db()
    assert price.input_per_mtok == 1
