"""The price table page: the instance's, outside any project (docs/projects.md). The instance admin adds and edits
model prices (who changed them is recorded); a lead of any project reads it; reviewers do not see it."""

from decimal import Decimal

import pytest
from django.urls import reverse

from judges.configs import services as config_services
from judges.models import ModelPrice
from labeling.models import Rubric
from tests.conftest import make_user
from tests.judges.helpers import MODEL, behavioral_spec


@pytest.fixture
def admin_client(client, admin_user):
    client.force_login(admin_user)
    return client


def test_it_adds_a_price_recording_who(admin_client, admin_user):
    response = admin_client.post(reverse("judges:price_list"),
                                 {"model": f" {MODEL} ", "input_per_mtok": "0.15", "output_per_mtok": "0.6"})

    price = ModelPrice.objects.get()
    assert response.status_code == 302
    assert (price.model, price.input_per_mtok, price.output_per_mtok) == (MODEL, Decimal("0.15"), Decimal("0.6"))
    assert price.updated_by == admin_user


def test_it_edits_a_price_recording_who(client, lead):
    other = make_user("ida", role=None, is_superuser=True)
    price = ModelPrice.objects.create(model=MODEL, input_per_mtok=1, output_per_mtok=2, updated_by=lead)
    client.force_login(other)
    form = client.get(reverse("judges:price_edit", args=[price.pk]))
    assert form.status_code == 200 and form.context["project"] is None

    client.post(reverse("judges:price_edit", args=[price.pk]),
                {"model": MODEL, "input_per_mtok": "0.5", "output_per_mtok": "2"})

    price.refresh_from_db()
    assert (price.input_per_mtok, price.updated_by) == (Decimal("0.5"), other)


def test_it_refuses_a_second_price_for_the_same_model(admin_client, lead):
    ModelPrice.objects.create(model=MODEL, input_per_mtok=1, output_per_mtok=2, updated_by=lead)
    response = admin_client.post(reverse("judges:price_list"),
                                 {"model": MODEL, "input_per_mtok": "3", "output_per_mtok": "4"})
    assert response.status_code == 200 and "model" in response.context["form"].errors
    assert ModelPrice.objects.get().input_per_mtok == 1


def test_it_lists_prices_and_the_models_configs_name_without_one(admin_client, rubric, lead):
    ModelPrice.objects.create(model="claude-haiku-4-5-20251001", input_per_mtok=1, output_per_mtok=5,
                              updated_by=lead)
    config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)

    response = admin_client.get(reverse("judges:price_list"))

    page = response.content.decode()
    assert "claude-haiku-4-5-20251001" in page
    assert response.context["missing"] == [MODEL]
    assert "No price yet for" in page
    assert response.context["project"] is None  # instance-wide: no project's page, no project's links
    assert reverse("judges:price_edit", args=[ModelPrice.objects.get().pk]) in page


def test_a_lead_reads_the_table_without_editing_it(lead_client, rubric, lead):
    price = ModelPrice.objects.create(model="claude-haiku-4-5-20251001", input_per_mtok=1, output_per_mtok=5,
                                      updated_by=lead)
    config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)

    response = lead_client.get(reverse("judges:price_list"))

    page = response.content.decode()
    assert response.status_code == 200 and "claude-haiku-4-5-20251001" in page
    assert response.context["missing"] == [MODEL]
    assert response.context["form"] is None and "Add a model" not in page
    assert reverse("judges:price_edit", args=[price.pk]) not in page
    added = lead_client.post(reverse("judges:price_list"),
                             {"model": "m", "input_per_mtok": "1", "output_per_mtok": "1"})
    edited = lead_client.post(reverse("judges:price_edit", args=[price.pk]),
                              {"model": price.model, "input_per_mtok": "9", "output_per_mtok": "9"})
    assert (added.status_code, edited.status_code) == (403, 403)
    assert lead_client.get(reverse("judges:price_edit", args=[price.pk])).status_code == 403
    price.refresh_from_db()
    assert ModelPrice.objects.count() == 1 and price.input_per_mtok == 1


def test_a_lead_sees_only_their_projects_models_without_a_price(client, rubric, lead, other_project, other_lead):
    config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    theirs = Rubric.objects.create(project=other_project, slug="tone", name="Tone", criteria="Polite.")
    config_services.judge_config_save(rubric=theirs, spec=behavioral_spec(model="gpt-4.1-2025-04-14"), by=other_lead)

    client.force_login(other_lead)
    assert client.get(reverse("judges:price_list")).context["missing"] == ["gpt-4.1-2025-04-14"]
    client.force_login(lead)
    assert client.get(reverse("judges:price_list")).context["missing"] == [MODEL]


@pytest.mark.parametrize("method, name", [("get", "judges:price_list"), ("post", "judges:price_list")])
def test_it_forbids_reviewers(reviewer_client, method, name):
    data = {"model": MODEL, "input_per_mtok": "1", "output_per_mtok": "1"} if method == "post" else None
    assert getattr(reviewer_client, method)(reverse(name), data).status_code == 403
    assert not ModelPrice.objects.exists()


def test_it_forbids_a_member_of_nothing(client, db):
    client.force_login(make_user("nobody", role=None))
    assert client.get(reverse("judges:price_list")).status_code == 403


def test_it_forbids_reviewers_to_edit(reviewer_client, lead):
    price = ModelPrice.objects.create(model=MODEL, input_per_mtok=1, output_per_mtok=2, updated_by=lead)
    reviewer_client.post(reverse("judges:price_edit", args=[price.pk]),
                         {"model": MODEL, "input_per_mtok": "9", "output_per_mtok": "9"})
    price.refresh_from_db()
    assert price.input_per_mtok == 1
