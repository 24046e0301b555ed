"""Django's admin: the instance admin's alone; tokens only read and revoked there (final, audited), projects only
renamed, users deactivated rather than deleted, nothing of a project's people editable."""

import pytest
from django.urls import reverse
from django.utils import timezone

from evalhub.members import services
from evalhub.models import ApiToken, MemberEvent, Scope
from tests.conftest import make_user


def test_it_keeps_a_revoked_token_revoked(client, admin_user, project):
    client.force_login(admin_user)
    token, _ = ApiToken.issue(project=project, name="ci", scopes=[Scope.GATES_READ], created_by=admin_user)
    token.revoke()
    url = reverse("admin:evalhub_apitoken_change", args=[token.pk])
    # The form a change page would post, with revoked_at cleared.
    response = client.post(url, {"name": "ci", "scopes": [Scope.GATES_READ], "revoked_at_0": "", "revoked_at_1": ""})
    assert response.status_code == 403
    token.refresh_from_db()
    assert token.revoked_at is not None
    page = client.get(url).content.decode()
    assert 'name="revoked_at' not in page and 'name="_save"' not in page


def test_it_revokes_tokens_from_the_list_audited(client, admin_user, project, lead):
    client.force_login(admin_user)
    token, _ = services.token_create(project=project, name="ci", scopes=[Scope.GATES_READ], by=lead)
    earlier = timezone.now()
    response = client.post(reverse("admin:evalhub_apitoken_changelist"),
                           {"action": "revoke", "_selected_action": [token.pk]})
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at >= earlier
    event = MemberEvent.objects.get(kind=MemberEvent.Kind.TOKEN_REVOKED)
    assert (event.project, event.subject, event.by) == (project, "ci", admin_user)


def test_the_admin_makes_no_token_and_the_admin_has_the_favicon(client, admin_user):
    client.force_login(admin_user)
    assert client.get(reverse("admin:evalhub_apitoken_add")).status_code == 403
    assert 'rel="icon" href="/static/favicon.svg"' in client.get(reverse("admin:index")).content.decode()


def test_staff_who_are_not_the_instance_admin_are_kept_out(client, db):
    client.force_login(make_user("stella", role=None, is_staff=True))

    response = client.get(reverse("admin:index"))

    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_a_project_is_renamed_but_keeps_its_slug(client, admin_user, project):
    client.force_login(admin_user)
    url = reverse("admin:evalhub_project_change", args=[project.pk])

    client.post(url, {"slug": "moved", "name": "Store agent", "description": "renamed"})

    project.refresh_from_db()
    assert (project.slug, project.name) == ("store", "Store agent")
    assert client.get(reverse("admin:evalhub_project_add")).status_code == 403


@pytest.mark.parametrize("model", ["membership", "invitation"])
def test_a_projects_people_are_not_edited_in_the_admin(client, admin_user, model):
    client.force_login(admin_user)
    assert client.get(f"/admin/evalhub/{model}/").status_code == 404


def test_users_are_deactivated_not_deleted(client, admin_user, reviewer):
    client.force_login(admin_user)

    response = client.post(reverse("admin:evalhub_user_delete", args=[reviewer.pk]), {"post": "yes"})

    assert response.status_code == 403 and reviewer.__class__.objects.filter(pk=reviewer.pk).exists()
