import pytest
from django.urls import reverse

from labeling.models import Rubric

pytestmark = pytest.mark.django_db

FORM = {"slug": "tone", "name": "Is the tone polite?", "criteria": "Pass when polite.", "labels_per_case": 2}
PROMOTION_FIELDS = ["stage", "fail_closed", "min_cases", "min_repeats", "agreement_floor", "agreement_ceiling",
                    "min_true_pass_rate", "min_true_fail_rate", "max_flip_rate", "min_coverage"]


def test_it_creates_a_draft_rubric(lead_client):
    response = lead_client.post(reverse("labeling:rubric_create"), FORM)

    assert response.status_code == 302 and response["Location"] == reverse("labeling:rubric_list")
    rubric = Rubric.objects.get(slug="tone")
    assert (rubric.name, rubric.criteria, rubric.labels_per_case, rubric.stage) == (
        "Is the tone polite?", "Pass when polite.", 2, "draft",
    )


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"slug": "return-policy"}, "slug"),  # taken by the fixture
        ({"slug": "not a slug"}, "slug"),
        ({"slug": "new"}, "slug"),  # would shadow /rubrics/new/
        ({"name": ""}, "name"),
        ({"criteria": ""}, "criteria"),
        ({"labels_per_case": 0}, "labels_per_case"),
        ({"labels_per_case": 11}, "labels_per_case"),
    ],
)
def test_it_refuses_a_bad_rubric(lead_client, rubric, changes, field):
    response = lead_client.post(reverse("labeling:rubric_create"), {**FORM, **changes})

    assert response.status_code == 200
    assert list(response.context["form"].errors) == [field]
    assert Rubric.objects.count() == 1
    body = response.content.decode()  # the summary above the fields links to the one that failed
    assert body.index('data-testid="error-summary"') < body.index('name="name"')
    assert f'<a href="#id_{field}">' in body


def test_the_forms_do_not_offer_stage_thresholds_or_fail_closed(lead_client, rubric):
    for url in (reverse("labeling:rubric_create"), reverse("labeling:rubric_edit", args=[rubric.slug])):
        body = lead_client.get(url).content.decode()
        assert 'name="criteria"' in body
        for name in PROMOTION_FIELDS:
            assert f'name="{name}"' not in body
    assert 'name="slug"' not in lead_client.get(reverse("labeling:rubric_edit", args=[rubric.slug])).content.decode()


def test_it_edits_name_criteria_and_labels_per_case_only(lead_client, rubric):
    before = Rubric.objects.get(pk=rubric.pk)
    sneaky = {name: "1" for name in PROMOTION_FIELDS} | {"stage": "gate", "fail_closed": "on", "slug": "renamed"}

    response = lead_client.post(
        reverse("labeling:rubric_edit", args=[rubric.slug]),
        {**sneaky, "name": "Follows policy?", "criteria": "New words.", "labels_per_case": 3},
    )

    assert response.status_code == 302
    after = Rubric.objects.get(pk=rubric.pk)
    assert (after.slug, after.name, after.criteria, after.labels_per_case) == (
        "return-policy", "Follows policy?", "New words.", 3,
    )
    assert [getattr(after, name) for name in PROMOTION_FIELDS] == [getattr(before, name) for name in PROMOTION_FIELDS]
    assert after.updated_at > before.updated_at


def test_it_lists_rubrics_with_their_stage_and_label_count(lead_client, rubric):
    body = lead_client.get(reverse("labeling:rubric_list")).content.decode()
    assert rubric.name in body and reverse("labeling:rubric_edit", args=[rubric.slug]) in body
    assert "stage-draft" in body


@pytest.mark.parametrize("n", [1, 5, 20])
def test_the_rubric_list_query_count_does_not_grow(lead_client, django_assert_num_queries, n):
    Rubric.objects.bulk_create(Rubric(slug=f"r{i}", name=f"Q{i}?", criteria="c") for i in range(n))
    # session + user, then one query for the rubrics with their label counts
    with django_assert_num_queries(3):
        response = lead_client.get(reverse("labeling:rubric_list"))
    assert response.content.decode().count("/edit/") == n


def test_an_unknown_rubric_is_404(lead_client):
    assert lead_client.get(reverse("labeling:rubric_edit", args=["nope"])).status_code == 404
