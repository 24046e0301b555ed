"""The invitee's side: the link (join as yourself, or with a new account), and accepting or declining from the
projects page. A link that cannot be used says the same, whatever the reason."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from evalhub.members import services
from evalhub.models import Invitation, MemberEvent, Membership, Role, User
from tests.conftest import PASSWORD, TEST_PROJECT, make_user

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a-long-and-unusual-passphrase"


@pytest.fixture
def invited(project, lead):
    """An e-mail invitation into the tests' project as reviewer, and its link."""
    invitation, raw = services.invitation_create(project=project, invitee="new@example.com", role=Role.REVIEWER,
                                                 by=lead)
    return invitation, reverse("members:invitation", args=[raw])


def test_an_anonymous_visitor_creates_an_account_that_joins_and_is_logged_in(client, project, invited):
    invitation, link = invited
    page = client.get(link)
    assert page.status_code == 200 and "Join Store support agent as reviewer" in page.content.decode()

    response = client.post(link, {"username": "nina", "email": "someone-else@example.com",
                                  "password1": NEW_PASSWORD, "password2": NEW_PASSWORD})

    assert response.status_code == 302 and response["Location"] == reverse("project_home", args=[TEST_PROJECT])
    nina = User.objects.get(username="nina")
    assert nina.role_in(project) == Role.REVIEWER and nina.check_password(NEW_PASSWORD)
    # The address the link was sent to, never one typed: an account's address opens the invitations sent to it.
    assert nina.email == "new@example.com"
    assert client.get(reverse("labeling:queue_start", args=[TEST_PROJECT])).status_code == 200  # logged in
    invitation.refresh_from_db()
    assert invitation.accepted_by == nina
    assert MemberEvent.objects.filter(kind=MemberEvent.Kind.JOINED, subject="nina").exists()


def test_an_account_made_from_a_username_invitation_gets_no_address(client, project, lead):
    _, raw = services.invitation_create(project=project, invitee="nina", role=Role.LEAD, by=lead)

    client.post(reverse("members:invitation", args=[raw]),
                {"username": "nina", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD})

    nina = User.objects.get(username="nina")
    assert nina.email == "" and nina.role_in(project) == Role.LEAD


def test_the_new_account_follows_the_password_rules(client, invited):
    _, link = invited

    response = client.post(link, {"username": "nina", "password1": "password", "password2": "password"})

    assert response.status_code == 200 and not User.objects.filter(username="nina").exists()
    assert "too common" in response.content.decode()


def test_a_signed_in_user_joins_as_themselves(client, project, invited):
    _, link = invited
    olivia = make_user("olivia", role=None)
    client.force_login(olivia)
    assert "Join as olivia" in client.get(link).content.decode()

    response = client.post(link)

    assert response.status_code == 302 and olivia.role_in(project) == Role.REVIEWER


def test_a_member_is_told_so_and_the_invitation_stays_open(client, project, reviewer, invited):
    invitation, link = invited
    client.force_login(reviewer)

    assert 'data-testid="already-member"' in client.get(link).content.decode()
    client.post(link)

    invitation.refresh_from_db()
    assert invitation.accepted_at is None


def test_a_link_works_once(client, project, invited):
    _, link = invited
    client.force_login(make_user("olivia", role=None))
    client.post(link)
    client.logout()

    response = client.post(link, {"username": "nina", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD})

    assert response.status_code == 404 and not User.objects.filter(username="nina").exists()


def test_every_unusable_link_says_the_same(client, project, lead):
    used, used_raw = services.invitation_create(project=project, invitee="a@example.com", role="reviewer", by=lead)
    services.invitation_accept(invitation=used, user=make_user("alice", role=None))
    withdrawn, withdrawn_raw = services.invitation_create(project=project, invitee="b@example.com", role="lead",
                                                          by=lead)
    services.invitation_withdraw(invitation=withdrawn, by=lead)
    expired, expired_raw = services.invitation_create(project=project, invitee="c@example.com", role="lead", by=lead)
    Invitation.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(minutes=1))

    answers = set()
    for raw in (used_raw, withdrawn_raw, expired_raw, "no-such-token"):
        response = client.get(reverse("members:invitation", args=[raw]))
        assert response.status_code == 404
        answers.add(re.sub(r'"X-CSRFToken": "[^"]+"', "", response.content.decode()))  # masked anew each time

    assert len(answers) == 1 and "cannot be used" in answers.pop()


def test_a_user_accepts_an_invitation_naming_them_from_their_projects_page(client, project, other_project,
                                                                           other_lead):
    maria = make_user("maria", role=None, email="maria@example.com")
    by_name, _ = services.invitation_create(project=project, invitee="Maria", role=Role.LEAD,
                                            by=make_user("liam", role=Role.LEAD))
    by_mail, _ = services.invitation_create(project=other_project, invitee="maria@example.com",
                                            role=Role.REVIEWER, by=other_lead)
    client.force_login(maria)

    page = client.get(reverse("home"))
    assert page.status_code == 200 and {i.pk for i in page.context["invitations"]} == {by_name.pk, by_mail.pk}

    response = client.post(reverse("members:invitation_accept", args=[by_name.pk]))
    assert response["Location"] == reverse("project_home", args=[TEST_PROJECT])
    assert maria.role_in(project) == Role.LEAD

    client.post(reverse("members:invitation_decline", args=[by_mail.pk]))
    by_mail.refresh_from_db()
    assert by_mail.withdrawn_at is not None and maria.role_in(other_project) is None
    event = MemberEvent.objects.get(project=other_project, kind=MemberEvent.Kind.INVITATION_WITHDRAWN)
    assert event.detail == "declined by maria"


def test_nobody_else_may_accept_or_decline_it(client, project, lead, reviewer):
    invitation, _ = services.invitation_create(project=project, invitee="maria", role=Role.LEAD, by=lead)
    client.force_login(make_user("mallory", role=None))

    for name in ("members:invitation_accept", "members:invitation_decline"):
        assert client.post(reverse(name, args=[invitation.pk])).status_code == 404
    invitation.refresh_from_db()
    assert invitation.is_open() and not Membership.objects.filter(user__username="mallory").exists()


def test_anonymous_visitors_cannot_accept_by_id(client, project, lead):
    invitation, _ = services.invitation_create(project=project, invitee="maria", role=Role.LEAD, by=lead)

    response = client.post(reverse("members:invitation_accept", args=[invitation.pk]))

    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_link_offers_a_login_first_that_comes_back(client, invited):
    _, link = invited

    response = client.get(link)

    assert response.context["login_url"].startswith(reverse("login") + "?next=")
    login = client.post(response.context["login_url"], {"username": "lena", "password": PASSWORD})
    assert login.status_code == 302 and login["Location"] == link


def test_a_name_invited_before_anyone_held_it_is_not_claimed_by_whoever_signs_up_under_it(
        client, project, other_project, other_lead, invited):
    # Another project's lead invites "victor", who has no account yet; someone holding a link into this project
    # signs up as "victor".
    waiting, _ = services.invitation_create(project=other_project, invitee="victor", role=Role.LEAD, by=other_lead)
    _, link = invited
    client.post(link, {"username": "victor", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD})
    victor = User.objects.get(username="victor")

    # Nothing waits for them: the home page takes them straight into the one project they joined.
    assert client.get(reverse("home"))["Location"] == reverse("project_home", args=[TEST_PROJECT])
    assert client.post(reverse("members:invitation_accept", args=[waiting.pk])).status_code == 404
    waiting.refresh_from_db()
    assert waiting.is_open() and victor.role_in(other_project) is None
