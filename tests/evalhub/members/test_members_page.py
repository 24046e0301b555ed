"""The members page: who may open it, what it shows, and each form on it (invite, role, remove, datasets,
withdraw), each change audited and shown in the recent changes."""

import re

import pytest
from django.core import mail
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evalhub.members import services
from evalhub.models import Invitation, MemberEvent, Membership, Role
from labeling.models import Dataset
from tests.conftest import TEST_PROJECT, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def mailer(settings):
    """A mailer set up, as EMAIL_HOST would: Django's test mailbox (mail.outbox)."""
    settings.MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}


def _url(name: str = "members:members", *args, project: str = TEST_PROJECT) -> str:
    return reverse(name, args=[project, *args])


def _membership(user, project) -> Membership:
    return Membership.objects.get(user=user, project=project)


@pytest.mark.parametrize("page", ["members:members", "members:tokens"])
def test_a_reviewer_is_refused_and_a_stranger_finds_nothing(client, project, reviewer, other_lead, page):
    client.force_login(reviewer)
    assert client.get(_url(page)).status_code == 403
    client.force_login(other_lead)  # a lead, of another project
    assert client.get(_url(page)).status_code == 404
    client.force_login(make_user("nobody", role=None))
    assert client.get(_url(page)).status_code == 404
    assert client.get(_url(page, project="no-such-project")).status_code == 404


@pytest.mark.parametrize("action", [
    ("members:invite", ()), ("members:role", (1,)), ("members:remove", (1,)), ("members:datasets", (1,)),
    ("members:withdraw", (1,)), ("members:token_create", ()), ("members:token_revoke", (1,)),
])
def test_every_form_is_refused_to_a_reviewer_and_hidden_from_a_stranger(client, project, reviewer, other_lead, action):
    name, args = action
    client.force_login(reviewer)
    assert client.post(_url(name, *args)).status_code == 403
    client.force_login(other_lead)
    assert client.post(_url(name, *args)).status_code == 404


def test_it_shows_the_members_their_roles_and_their_datasets_of_this_project_only(
        lead_client, project, other_project, reviewer, dataset, other_dataset):
    elsewhere = Dataset.objects.create(project=other_project, slug="elsewhere", name="Elsewhere")
    Membership.objects.create(project=other_project, user=reviewer, role=Role.REVIEWER)
    elsewhere.reviewers.add(reviewer)
    make_user("stranger", role=Role.LEAD, project=other_project)

    response = lead_client.get(_url())

    assert response.status_code == 200
    members = {m.user.username: m for m in response.context["members"]}
    assert set(members) == {"lena", "rita"}
    assert members["rita"].role == Role.REVIEWER and members["lena"].role == Role.LEAD
    assert [d.slug for d in members["rita"].user.assigned] == ["store-support"]
    body = response.content.decode()
    assert "elsewhere" not in body and "stranger" not in body
    assert 'data-testid="only-lead"' in body  # lena is the only lead: no demote, no remove


@pytest.mark.parametrize("n", [1, 6])
def test_it_reads_a_fixed_number_of_queries_however_many_members(lead_client, project, dataset, n):
    for i in range(n):
        user = make_user(f"rev{n}-{i}")
        dataset.reviewers.add(user)
        services.invitation_create(project=project, invitee=f"inv{n}-{i}", role=Role.REVIEWER, by=user)
    with CaptureQueriesContext(connection) as queries:
        assert lead_client.get(_url()).status_code == 200
    # session, user, the door's membership, members, their datasets, the project's datasets, invitations,
    # recent changes: none grows with the members.
    assert len(queries) == 8, [q["sql"] for q in queries]


def _normalised(body: str, invitee: str) -> str:
    body = body.replace(invitee, "INVITEE")
    body = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", body)
    body = re.sub(r'"X-CSRFToken": "[^"]+"', "", body)
    body = re.sub(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", "WHEN", body)
    return re.sub(r"/(\d+)/withdraw/", "/ID/withdraw/", body)


def test_the_answer_to_an_invitation_says_nothing_about_the_account(lead_client, project, other_project):
    make_user("existing", role=None)
    make_user("elsewhere", role=Role.LEAD, project=other_project)
    bodies = []
    # Each invitation on the same page state: rolled back after its answer, so only the typed name differs.
    for invitee in ("existing", "nobodyhere", "elsewhere"):
        with transaction.atomic():
            response = lead_client.post(_url("members:invite"), {"invitee": invitee, "role": Role.REVIEWER})
            assert response.status_code == 200
            bodies.append(_normalised(response.content.decode(), invitee))
            transaction.set_rollback(True)

    assert bodies[0] == bodies[1] == bodies[2]
    assert "Invitation sent to INVITEE" in bodies[0]


def test_the_answer_to_an_e_mail_invitation_says_nothing_about_the_account(lead_client, project, other_project,
                                                                          mailer):
    make_user("has-mail", role=None, email="known@example.com")
    make_user("elsewhere", role=Role.LEAD, project=other_project, email="other@example.com")
    bodies = []
    for invitee in ("known@example.com", "unknown@example.com", "other@example.com"):
        with transaction.atomic():
            response = lead_client.post(_url("members:invite"), {"invitee": invitee, "role": Role.LEAD})
            body = _normalised(response.content.decode(), invitee)
            bodies.append(re.sub(r"/invitations/[-\w]+/", "/invitations/TOKEN/", body))
            transaction.set_rollback(True)

    assert bodies[0] == bodies[1] == bodies[2]


def test_an_e_mail_invitation_sends_the_link_and_shows_it_once(lead_client, project, mailer):
    response = lead_client.post(_url("members:invite"), {"invitee": "new@example.com", "role": Role.REVIEWER})

    link = response.context["invite_link"]
    assert re.fullmatch(r"http://testserver/invitations/[-\w]{43}/", link)
    assert link in response.content.decode()
    [message] = mail.outbox
    assert message.to == ["new@example.com"] and link in message.body and project.name in message.subject
    invitation = Invitation.objects.get()
    assert invitation.invitee == "new@example.com" and invitation.created_by.username == "lena"
    page = lead_client.get(_url()).content.decode()
    assert link not in page and "new@example.com" in page  # listed as pending, its link never again
    assert MemberEvent.objects.filter(kind=MemberEvent.Kind.INVITED, subject="new@example.com").exists()


def test_without_mail_the_lead_is_told_to_pass_the_link_on(lead_client, project):
    response = lead_client.post(_url("members:invite"), {"invitee": "new@example.com", "role": Role.REVIEWER})

    assert response.context["mail"] == "off" and not mail.outbox
    assert "No mail is set up" in response.content.decode() and response.context["invite_link"]


def test_a_mail_server_that_refuses_is_said_and_the_link_still_shown(lead_client, project, mailer, monkeypatch):
    def refuse(*args, **kwargs):
        raise ConnectionRefusedError("no server")

    monkeypatch.setattr(services, "send_mail", refuse)

    response = lead_client.post(_url("members:invite"), {"invitee": "new@example.com", "role": Role.REVIEWER})

    assert response.context["mail"] == "failed" and response.context["invite_link"] in response.content.decode()
    assert Invitation.objects.get().invitee == "new@example.com"


def test_a_username_invitation_sends_no_mail_and_shows_no_link(lead_client, project, mailer):
    response = lead_client.post(_url("members:invite"), {"invitee": "maria", "role": Role.REVIEWER})

    assert response.context["invite_link"] == "" and not mail.outbox
    assert 'data-testid="invite-link"' not in response.content.decode()
    assert not re.search(r"/invitations/[-\w]{43}/", response.content.decode())


@pytest.mark.parametrize(("invitee", "error"), [
    ("lena", "member of this project already"),
    ("not a name!", "Enter a valid username"),
    ("bad@", "valid email"),
])
def test_it_refuses_an_invitee_it_cannot_invite(lead_client, project, invitee, error):
    response = lead_client.post(_url("members:invite"), {"invitee": invitee, "role": Role.REVIEWER})

    assert response.status_code == 200 and error in response.content.decode()
    assert not Invitation.objects.exists()


def test_a_second_invitation_of_the_same_person_waits_for_the_first_to_be_withdrawn(lead_client, project):
    lead_client.post(_url("members:invite"), {"invitee": "maria", "role": Role.REVIEWER})
    response = lead_client.post(_url("members:invite"), {"invitee": "MARIA", "role": Role.LEAD})

    assert "waiting already" in response.content.decode() and Invitation.objects.count() == 1


def test_it_withdraws_an_invitation_of_this_project_only(lead_client, project, other_project, other_lead):
    mine, _ = services.invitation_create(project=project, invitee="maria", role=Role.REVIEWER, by=other_lead)
    theirs, _ = services.invitation_create(project=other_project, invitee="mike", role=Role.REVIEWER, by=other_lead)

    assert lead_client.post(_url("members:withdraw", theirs.pk)).status_code == 404
    response = lead_client.post(_url("members:withdraw", mine.pk), follow=True)

    mine.refresh_from_db(), theirs.refresh_from_db()
    assert mine.withdrawn_at is not None and theirs.withdrawn_at is None
    assert "withdrawn" in response.content.decode()
    assert response.context["invitations"] == []


def test_it_changes_a_role_and_says_so(lead_client, project, reviewer):
    membership = _membership(reviewer, project)

    response = lead_client.post(_url("members:role", membership.pk), {"role": Role.LEAD}, follow=True)

    assert reviewer.role_in(project) == Role.LEAD
    assert "rita is now a lead" in response.content.decode()
    assert response.context["events"][0].kind == MemberEvent.Kind.ROLE_CHANGED


def test_demoting_the_last_lead_is_refused_with_a_reason(lead_client, project, lead):
    response = lead_client.post(_url("members:role", _membership(lead, project).pk), {"role": Role.REVIEWER},
                                follow=True)

    assert lead.role_in(project) == Role.LEAD
    assert "only lead" in response.content.decode()


def test_a_lead_who_demotes_themselves_leaves_for_the_projects_start(lead_client, project, lead):
    make_user("liam", role=Role.LEAD)

    response = lead_client.post(_url("members:role", _membership(lead, project).pk), {"role": Role.REVIEWER})

    assert response.status_code == 302 and response["Location"] == reverse("project_home", args=[TEST_PROJECT])


def test_it_removes_a_member_and_refuses_the_last_lead(lead_client, project, lead, reviewer):
    response = lead_client.post(_url("members:remove", _membership(reviewer, project).pk), follow=True)
    assert reviewer.role_in(project) is None
    assert "labels stay" in response.content.decode()

    response = lead_client.post(_url("members:remove", _membership(lead, project).pk), follow=True)
    assert lead.role_in(project) == Role.LEAD and "only lead" in response.content.decode()


def test_a_membership_of_another_project_is_404(lead_client, other_project, other_lead):
    theirs = _membership(other_lead, other_project)

    for name in ("members:role", "members:remove", "members:datasets"):
        assert lead_client.post(_url(name, theirs.pk), {"role": Role.REVIEWER}).status_code == 404
    assert other_lead.role_in(other_project) == Role.LEAD


def test_it_sets_a_reviewers_datasets_with_checkboxes(lead_client, project, reviewer, dataset, other_dataset):
    membership = _membership(reviewer, project)

    response = lead_client.post(_url("members:datasets", membership.pk), {"datasets": [other_dataset.pk]})

    assert response.status_code == 302 and response["Location"].endswith(f"#member-{membership.pk}")
    assert list(reviewer.assigned_datasets.all()) == [other_dataset]
    event = MemberEvent.objects.get(kind=MemberEvent.Kind.ASSIGNMENTS_SET)
    assert (event.subject, event.by.username) == ("rita", "lena")


def test_a_dataset_of_another_project_cannot_be_assigned(lead_client, project, other_project, reviewer, dataset):
    elsewhere = Dataset.objects.create(project=other_project, slug="elsewhere", name="Elsewhere")

    lead_client.post(_url("members:datasets", _membership(reviewer, project).pk), {"datasets": [elsewhere.pk]})

    assert list(reviewer.assigned_datasets.all()) == [dataset]


def test_the_instance_admin_manages_any_project(client, admin_user, project, reviewer):
    client.force_login(admin_user)

    assert client.get(_url()).status_code == 200
    client.post(_url("members:role", _membership(reviewer, project).pk), {"role": Role.LEAD})
    assert reviewer.role_in(project) == Role.LEAD
