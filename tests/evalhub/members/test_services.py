"""The members' services: every change audited, the last lead kept, labels kept, assignments per project,
invitations used once, tokens issued and revoked."""

from datetime import timedelta

import pytest
from django.utils import timezone

from evalhub.members import services
from evalhub.members.selectors import invitation_by_token
from evalhub.models import ApiToken, Invitation, MemberEvent, Membership, Role, Scope, hash_token
from labeling.importing.cases import cases_import_objects
from labeling.models import Case, Dataset, Label
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def _membership(user, project) -> Membership:
    return Membership.objects.select_related("user", "project").get(user=user, project=project)


def _events(project, kind: str) -> list[MemberEvent]:
    return list(MemberEvent.objects.filter(project=project, kind=kind))


def test_it_creates_a_project_with_its_first_lead_audited(admin_user):
    boss = make_user("bea", role=None)

    made = services.project_create(slug="checkout", name="Checkout agent", description="", lead=boss, by=admin_user)

    assert boss.role_in(made) == Role.LEAD
    [event] = _events(made, MemberEvent.Kind.ADDED)
    assert event.subject == "bea" and event.by == admin_user and "first lead" in event.detail


def test_it_changes_a_role_audited(project, lead, reviewer):
    membership = _membership(reviewer, project)

    assert services.membership_set_role(membership=membership, role=Role.LEAD, by=lead)
    assert not services.membership_set_role(membership=membership, role=Role.LEAD, by=lead)  # no change: no entry

    assert reviewer.role_in(project) == Role.LEAD
    [event] = _events(project, MemberEvent.Kind.ROLE_CHANGED)
    assert (event.subject, event.detail, event.by) == ("rita", "reviewer → lead", lead)


def test_the_last_lead_can_be_neither_demoted_nor_removed(project, lead, reviewer):
    membership = _membership(lead, project)

    with pytest.raises(services.MembersRefused, match="only lead"):
        services.membership_set_role(membership=membership, role=Role.REVIEWER, by=lead)
    with pytest.raises(services.MembersRefused, match="only lead"):
        services.membership_remove(membership=membership, by=lead)

    assert lead.role_in(project) == Role.LEAD
    assert not MemberEvent.objects.filter(project=project).exists()


def test_a_lead_of_another_project_does_not_count_as_another_lead(project, other_project, lead, other_lead):
    Membership.objects.create(project=other_project, user=lead, role=Role.LEAD)

    with pytest.raises(services.MembersRefused):
        services.membership_remove(membership=_membership(lead, project), by=lead)


def test_with_two_leads_one_may_go(project, lead):
    second = make_user("liam", role=Role.LEAD)

    services.membership_set_role(membership=_membership(lead, project), role=Role.REVIEWER, by=second)

    assert lead.role_in(project) == Role.REVIEWER
    with pytest.raises(services.MembersRefused):  # now liam is the only one
        services.membership_remove(membership=_membership(second, project), by=second)


def test_a_removed_members_labels_stay_and_count_and_their_assignments_here_go(
        project, other_project, lead, reviewer, dataset, other_dataset, rubric):
    cases_import_objects(dataset=dataset, objects=[{"external_id": "c1", "input": "q", "output": "a"}])
    case = Case.objects.get()
    label = Label.objects.create(case=case, rubric=rubric, reviewer=reviewer, verdict="pass",
                                 content_hash=case.content_hash)
    other_dataset.reviewers.add(reviewer)
    elsewhere = Dataset.objects.create(project=other_project, slug="elsewhere", name="Elsewhere")
    Membership.objects.create(project=other_project, user=reviewer, role=Role.REVIEWER)
    elsewhere.reviewers.add(reviewer)

    unassigned = services.membership_remove(membership=_membership(reviewer, project), by=lead)

    assert unassigned == 2
    assert reviewer.role_in(project) is None
    assert Label.objects.counting().filter(pk=label.pk).exists()
    assert case.tallies.get(rubric=rubric).labels == 1
    assert list(reviewer.assigned_datasets.all()) == [elsewhere]  # another project's assignment stays
    [event] = _events(project, MemberEvent.Kind.REMOVED)
    assert event.subject == "rita" and "labels stay" in event.detail and "2 datasets" in event.detail


def test_it_sets_a_reviewers_datasets_of_this_project_only(project, other_project, lead, reviewer, dataset,
                                                           other_dataset):
    membership = _membership(reviewer, project)
    elsewhere = Dataset.objects.create(project=other_project, slug="elsewhere", name="Elsewhere")

    assert services.assignments_set(membership=membership, datasets=[other_dataset], by=lead)

    assert list(reviewer.assigned_datasets.all()) == [other_dataset]
    [event] = _events(project, MemberEvent.Kind.ASSIGNMENTS_SET)
    assert event.detail == "labels other (was store-support)"
    with pytest.raises(services.MembersRefused):
        services.assignments_set(membership=membership, datasets=[elsewhere], by=lead)
    assert not services.assignments_set(membership=membership, datasets=[other_dataset], by=lead)


def _invite(project, lead, invitee="newbie", role=Role.REVIEWER):
    return services.invitation_create(project=project, invitee=invitee, role=role, by=lead)


def test_an_invitation_stores_only_its_tokens_hash_and_is_audited(project, lead):
    invitation, raw = _invite(project, lead, "new@example.com")

    assert invitation.token_hash == hash_token(raw) and raw not in invitation.token_hash
    assert invitation.expires_at - invitation.created_at == timedelta(days=7)
    [event] = _events(project, MemberEvent.Kind.INVITED)
    assert event.subject == "new@example.com" and event.by == lead


def test_an_invitation_is_accepted_once(project, lead):
    invitation, raw = _invite(project, lead, role=Role.LEAD)
    first, second = make_user("newbie", role=None), make_user("nora", role=None)

    services.invitation_accept(invitation=invitation, user=first)
    with pytest.raises(services.InvitationClosed):
        services.invitation_accept(invitation=Invitation.objects.get(), user=second)

    assert first.role_in(project) == Role.LEAD and second.role_in(project) is None
    assert invitation_by_token(raw) is None
    [event] = _events(project, MemberEvent.Kind.JOINED)
    assert event.subject == "newbie" and "invited as newbie by lena" in event.detail


def test_two_tabs_holding_the_same_open_invitation_cannot_both_use_it(project, lead):
    invitation, _ = _invite(project, lead)
    stale_copy = Invitation.objects.get()  # both loaded while open, as two requests would
    services.invitation_accept(invitation=invitation, user=make_user("newbie", role=None))

    with pytest.raises(services.InvitationClosed):
        services.invitation_accept(invitation=stale_copy, user=make_user("nora", role=None))


def test_an_expired_or_withdrawn_invitation_cannot_be_used(project, lead):
    expired, expired_raw = _invite(project, lead, "late")
    Invitation.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    withdrawn, withdrawn_raw = _invite(project, lead, "changed-mind")

    assert services.invitation_withdraw(invitation=withdrawn, by=lead)
    assert not services.invitation_withdraw(invitation=withdrawn, by=lead)  # once

    for invitation, raw in ((expired, expired_raw), (withdrawn, withdrawn_raw)):
        assert invitation_by_token(raw) is None
        with pytest.raises(services.InvitationClosed):
            services.invitation_accept(invitation=invitation, user=make_user(f"u-{invitation.pk}", role=None))
    assert len(_events(project, MemberEvent.Kind.INVITATION_WITHDRAWN)) == 1


def test_a_member_accepting_again_keeps_the_invitation_open(project, lead, reviewer):
    invitation, raw = _invite(project, lead, "rita", role=Role.LEAD)

    with pytest.raises(services.MembersRefused, match="member"):
        services.invitation_accept(invitation=invitation, user=reviewer)

    assert reviewer.role_in(project) == Role.REVIEWER
    assert invitation_by_token(raw) is not None


def test_a_token_is_of_its_project_and_revoked_once_audited(project, lead):
    token, raw = services.token_create(project=project, name="ci", scopes=[Scope.GATES_READ], by=lead)

    assert token.project == project and token.token_hash == hash_token(raw)
    assert services.token_revoke(token=token, by=lead)
    assert not services.token_revoke(token=ApiToken.objects.get(), by=lead)

    kinds = list(MemberEvent.objects.filter(project=project).order_by("pk").values_list("kind", "subject"))
    assert kinds == [(MemberEvent.Kind.TOKEN_CREATED, "ci"), (MemberEvent.Kind.TOKEN_REVOKED, "ci")]
