"""The admin cannot change what only the audited pages may, nor put a verdict in someone else's name."""

import pytest
from django.db import models
from django.urls import reverse

from labeling.models import Adjudication, Case, Dataset, Label, Rubric, case_split
from tests.conftest import make_user

# Every field the promotion pages own (those other features add are covered when present), and the slug CI uses.
AUDITED = [
    "stage", "fail_closed", "min_cases", "min_repeats", "agreement_floor", "agreement_ceiling", "min_true_pass_rate",
    "min_true_fail_rate", "max_flip_rate", "min_coverage", "max_probe_moved", "require_human_evidence",
    "min_cases_per_kind", "slug",
]
RUBRIC_FIELDS = {field.name for field in Rubric._meta.concrete_fields}


def _another_value(rubric: Rubric, name: str) -> str:
    """A form value for `name` that differs from the rubric's."""
    field = Rubric._meta.get_field(name)
    current = getattr(rubric, name)
    if field.choices:
        return next(value for value, _ in field.choices if value != current)
    if isinstance(field, models.BooleanField):
        return "" if current else "on"
    if isinstance(field, models.FloatField):
        return "0.5" if current != 0.5 else "0.25"
    if isinstance(field, models.IntegerField):
        return str((current or 0) + 3)
    if isinstance(field, models.JSONField):
        return '{"good": 99}'
    return "changed-by-admin"


@pytest.fixture
def admin_client(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.skipif(
    name not in RUBRIC_FIELDS, reason=f"Rubric has no {name} yet")) for name in AUDITED])
def test_it_keeps_audited_rubric_fields_out_of_the_admins_reach(admin_client, rubric, name):
    before = getattr(rubric, name)
    post = {"name": "Renamed in the admin", "criteria": rubric.criteria, "labels_per_case": 2,
            name: _another_value(rubric, name)}
    response = admin_client.post(reverse("admin:labeling_rubric_change", args=[rubric.pk]), post)
    assert response.status_code == 302, response.content.decode()[:2000]  # the form was accepted...
    rubric.refresh_from_db()
    assert rubric.name == "Renamed in the admin" and rubric.labels_per_case == 2  # ...and saved
    assert getattr(rubric, name) == before
    page = admin_client.get(reverse("admin:labeling_rubric_change", args=[rubric.pk])).content.decode()
    assert f'name="{name}"' not in page


def test_it_leaves_no_rubric_field_editable_but_the_editors(admin_client, rubric):
    """A field another feature adds is read-only in the admin until someone decides otherwise; the project, as the
    slug, is chosen when the rubric is made."""
    page = admin_client.get(reverse("admin:labeling_rubric_change", args=[rubric.pk])).content.decode()
    for field in Rubric._meta.concrete_fields:
        shown = f'name="{field.name}"' in page
        assert shown == (field.name in {"name", "criteria", "labels_per_case"}), field.name


def test_it_creates_a_rubric_with_a_slug_and_the_default_thresholds(admin_client, project):
    response = admin_client.post(reverse("admin:labeling_rubric_add"), {
        "project": project.pk, "slug": "tone", "name": "Is the tone polite?", "criteria": "Pass when polite.",
        "labels_per_case": 1, "stage": "gate", "fail_closed": "on", "agreement_floor": "0.1",
    })
    assert response.status_code == 302
    rubric = Rubric.objects.get(slug="tone")
    assert (rubric.project, rubric.stage, rubric.fail_closed, rubric.agreement_floor) == (project, "draft", False, 0.80)


@pytest.fixture
def case(dataset) -> Case:
    return Case.objects.create(dataset=dataset, external_id="c1", input="q?", output="a.", split=case_split("c1"),
                               content_hash="h")


def test_it_keeps_a_labels_reviewer(admin_client, case, rubric, reviewer):
    other = make_user("mallory")
    label = Label.objects.create(case=case, rubric=rubric, reviewer=reviewer, verdict="pass", content_hash="h")
    url = reverse("admin:labeling_label_change", args=[label.pk])
    response = admin_client.post(url, {"case": case.pk, "rubric": rubric.pk, "reviewer": other.pk, "verdict": "fail"})
    assert response.status_code == 403
    label.refresh_from_db()
    assert (label.reviewer, label.verdict) == (reviewer, "pass")
    assert 'name="reviewer"' not in admin_client.get(url).content.decode()


def test_it_keeps_who_decided_an_adjudication(admin_client, case, rubric, lead):
    other = make_user("mallory")
    decision = Adjudication.objects.create(case=case, rubric=rubric, verdict="fail", decided_by=lead)
    url = reverse("admin:labeling_adjudication_change", args=[decision.pk])
    response = admin_client.post(url, {"case": case.pk, "rubric": rubric.pk, "verdict": "pass",
                                       "decided_by": other.pk, "decided_at_0": "2026-01-01", "decided_at_1": "00:00"})
    assert response.status_code == 403
    decision.refresh_from_db()
    assert (decision.decided_by, decision.verdict) == (lead, "fail")
    assert 'name="decided_by"' not in admin_client.get(url).content.decode()


@pytest.mark.parametrize("model", ["label", "adjudication"])
def test_it_adds_no_verdict_in_the_admin(admin_client, model):
    assert admin_client.get(reverse(f"admin:labeling_{model}_add")).status_code == 403


# --- projects ----------------------------------------------------------------------------------------------------


def test_a_datasets_project_is_chosen_once_and_its_reviewers_are_left_to_the_members_page(
        admin_client, dataset, reviewer, other_project, other_lead):
    url = reverse("admin:labeling_dataset_change", args=[dataset.pk])
    page = admin_client.get(url)
    assert 'name="project"' not in page.content.decode() and 'name="reviewers"' not in page.content.decode()
    form = {"slug": dataset.slug, "name": dataset.name, "queue_order": dataset.queue_order,
            "queue_share": dataset.queue_share, "project": other_project.pk, "created_at_0": "2026-01-01",
            "created_at_1": "00:00", "reviewers": [other_lead.pk]}
    saved = admin_client.post(url, form)
    assert saved.status_code == 302, saved.context["adminform"].form.errors
    dataset.refresh_from_db()
    assert dataset.project.slug == "store"  # the project stays
    assert list(dataset.reviewers.all()) == [reviewer]  # assignments change on the Members page only (audited)


def test_the_admin_creates_a_dataset_in_a_project_with_a_slug_another_project_has(admin_client, dataset,
                                                                                 other_project):
    response = admin_client.post(reverse("admin:labeling_dataset_add"), {
        "project": other_project.pk, "slug": dataset.slug, "name": "Theirs", "queue_order": "fewest",
        "queue_share": 20, "created_at_0": "2026-01-01", "created_at_1": "00:00",
    })
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert sorted(Dataset.objects.values_list("project__slug", flat=True)) == ["shopnest", "store"]
