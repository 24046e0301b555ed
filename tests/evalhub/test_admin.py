"""API tokens in the admin: a revocation is final."""

from django.urls import reverse
from django.utils import timezone

from evalhub.models import ApiToken, Scope


def test_it_keeps_a_revoked_token_revoked(client, admin_user):
    client.force_login(admin_user)
    token, _ = ApiToken.issue(name="ci", scopes=[Scope.GATES_READ], created_by=admin_user)
    token.revoke()
    url = reverse("admin:evalhub_apitoken_change", args=[token.pk])
    # The form a change page would post, with revoked_at cleared.
    response = client.post(url, {"name": "ci", "scopes": [Scope.GATES_READ], "revoked_at_0": "", "revoked_at_1": ""})
    assert response.status_code == 403
    token.refresh_from_db()
    assert token.revoked_at is not None
    page = client.get(url).content.decode()
    assert 'name="revoked_at' not in page and 'name="_save"' not in page


def test_it_revokes_tokens_from_the_list(client, admin_user):
    client.force_login(admin_user)
    token, _ = ApiToken.issue(name="ci", scopes=[Scope.GATES_READ], created_by=admin_user)
    earlier = timezone.now()
    response = client.post(reverse("admin:evalhub_apitoken_changelist"),
                           {"action": "revoke", "_selected_action": [token.pk]})
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at >= earlier


def test_a_new_token_comes_with_a_copy_button_and_the_admin_with_the_favicon(client, admin_user):
    client.force_login(admin_user)
    response = client.post(reverse("admin:evalhub_apitoken_add"), {"name": "ci", "scopes": [Scope.GATES_READ]})
    page = response.content.decode()
    assert response.status_code == 200 and 'id="plain-token"' in page
    assert 'data-copy="#plain-token"' in page and "/static/js/copy.js" in page  # a static file: no inline script
    assert "<script>" not in page
    assert 'rel="icon" href="/static/favicon.svg"' in client.get(reverse("admin:index")).content.decode()
