import pytest
from django.urls import reverse

from labeling.models import Rubric
from tests.conftest import TEST_PROJECT, store_project

pytestmark = pytest.mark.django_db

FORM = {"slug": "tone", "name": "Is the tone polite?", "criteria": "Pass when polite.", "labels_per_case": 2}
PROMOTION_FIELDS = ["stage", "fail_closed", "min_cases", "min_repeats", "agreement_floor", "agreement_ceiling",
                    "min_true_pass_rate", "min_true_fail_rate", "max_flip_rate", "min_coverage"]


def test_it_creates_a_draft_rubric(lead_client):
    response = lead_client.post(reverse("labeling:rubric_create", args=[TEST_PROJECT]), FORM)

    assert response.status_code == 302 and response["Location"] == reverse("labeling:rubric_list", args=[TEST_PROJECT])
    rubric = Rubric.objects.get(slug="tone")
    assert (rubric.project.slug, rubric.name, rubric.criteria, rubric.labels_per_case, rubric.stage) == (
        TEST_PROJECT, "Is the tone polite?", "Pass when polite.", 2, "draft",
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
    response = lead_client.post(reverse("labeling:rubric_create", args=[TEST_PROJECT]), {**FORM, **changes})

    assert response.status_code == 200
    assert list(response.context["form"].errors) == [field]
    assert Rubric.objects.count() == 1
    body = response.content.decode()  # the summary above the fields links to the one that failed
    assert body.index('data-testid="error-summary"') < body.index('name="name"')
    assert f'<a href="#id_{field}">' in body


def test_the_forms_do_not_offer_stage_thresholds_or_fail_closed(lead_client, rubric):
    edit = reverse("labeling:rubric_edit", args=[TEST_PROJECT, rubric.slug])
    for url in (reverse("labeling:rubric_create", args=[TEST_PROJECT]), edit):
        body = lead_client.get(url).content.decode()
        assert 'name="criteria"' in body
        for name in PROMOTION_FIELDS:
            assert f'name="{name}"' not in body
    assert 'name="slug"' not in lead_client.get(edit).content.decode()


def test_it_edits_name_criteria_and_labels_per_case_only(lead_client, rubric):
    before = Rubric.objects.get(pk=rubric.pk)
    sneaky = {name: "1" for name in PROMOTION_FIELDS} | {"stage": "gate", "fail_closed": "on", "slug": "renamed"}

    response = lead_client.post(
        reverse("labeling:rubric_edit", args=[TEST_PROJECT, rubric.slug]),
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
    body = lead_client.get(reverse("labeling:rubric_list", args=[TEST_PROJECT])).content.decode()
    assert rubric.name in body and reverse("labeling:rubric_edit", args=[TEST_PROJECT, rubric.slug]) in body
    assert "stage-draft" in body


@pytest.mark.parametrize("n", [1, 5, 20])
def test_the_rubric_list_query_count_does_not_grow(lead_client, django_assert_num_queries, n):
    project = store_project()
    Rubric.objects.bulk_create(Rubric(project=project, slug=f"r{i}", name=f"Q{i}?", criteria="c") for i in range(n))
    # session + user, the membership (+ project), the user's projects (the menu), then one query for the rubrics
    # with their label counts
    with django_assert_num_queries(4):
        response = lead_client.get(reverse("labeling:rubric_list", args=[TEST_PROJECT]))
    assert response.content.decode().count("/edit/") == n


def test_an_unknown_rubric_is_404(lead_client):
    assert lead_client.get(reverse("labeling:rubric_edit", args=[TEST_PROJECT, "nope"])).status_code == 404


# --- projects: a rubric's slug is unique within its project; nothing of another project shows ----------------------


def test_a_taken_slug_is_a_clear_field_error_and_another_projects_slug_is_free(lead_client, rubric, other_project):
    Rubric.objects.create(project=other_project, slug="tone", name="Their tone", criteria="c")

    taken = lead_client.post(reverse("labeling:rubric_create", args=[TEST_PROJECT]), {**FORM, "slug": rubric.slug})
    assert taken.status_code == 200
    assert taken.context["form"].errors["slug"] == ["This project has a rubric 'return-policy' already: choose "
                                                    "another slug."]
    created = lead_client.post(reverse("labeling:rubric_create", args=[TEST_PROJECT]), FORM)
    assert created.status_code == 302
    assert sorted(Rubric.objects.filter(slug="tone").values_list("project__slug", flat=True)) == ["shopnest", "store"]


def test_the_rubric_list_shows_the_projects_rubrics_only(lead_client, rubric, other_project):
    Rubric.objects.create(project=other_project, slug="their-rubric", name="Their question?", criteria="c")
    body = lead_client.get(reverse("labeling:rubric_list", args=[TEST_PROJECT])).content.decode()
    assert rubric.slug in body and "their-rubric" not in body and "Their question?" not in body


def test_another_projects_rubric_is_404_here_and_its_lead_gets_404_for_ours(client, lead_client, rubric, other_lead):
    theirs = Rubric.objects.create(project=other_lead.memberships.get().project, slug="theirs", name="Q", criteria="c")
    assert lead_client.get(reverse("labeling:rubric_edit", args=[TEST_PROJECT, theirs.slug])).status_code == 404
    client.force_login(other_lead)
    for url in (reverse("labeling:rubric_list", args=[TEST_PROJECT]),
                reverse("labeling:rubric_create", args=[TEST_PROJECT]),
                reverse("labeling:rubric_edit", args=[TEST_PROJECT, rubric.slug])):
        assert client.get(url).status_code == 404, url
    assert client.post(reverse("labeling:rubric_edit", args=[TEST_PROJECT, rubric.slug]),
                       {"name": "Hijacked", "criteria": "x", "labels_per_case": 1}).status_code == 404
    assert client.get(reverse("labeling:rubric_edit", args=["shopnest", rubric.slug])).status_code == 404
    rubric.refresh_from_db()
    assert rubric.name != "Hijacked"
