"""Writes about a project's people and its API tokens: projects made, members invited, joined, given a role,
assigned datasets, removed; tokens issued and revoked. Each write and its MemberEvent are one transaction, so the
members page's recent changes are the whole story (docs/projects.md)."""

import secrets
import smtplib
from datetime import timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from evalhub.models import ApiToken, Invitation, MemberEvent, Membership, Project, Role, User, hash_token
from labeling.models import Dataset


class MembersRefused(Exception):
    """A change of a project's people that would leave it broken (no lead): the message says why, for the page."""


def _event(*, project: Project, kind: str, subject: str, detail: str = "", by: User | None) -> MemberEvent:
    return MemberEvent.objects.create(project=project, kind=kind, subject=subject, detail=detail, by=by)


def project_create(*, slug: str, name: str, description: str, lead: User, by: User) -> Project:
    """A new project with its first lead. The project, the lead's membership and the audit entry are made
    together: a project never exists without someone who may manage it."""
    with transaction.atomic():
        project = Project.objects.create(slug=slug, name=name, description=description)
        Membership.objects.create(project=project, user=lead, role=Role.LEAD)
        _event(project=project, kind=MemberEvent.Kind.ADDED, subject=lead.username,
               detail="as lead: the project's first lead, named when the project was created", by=by)
    return project


def _leads_locked(project: Project) -> list[Membership]:
    """The project's lead memberships, locked until the transaction ends: two leads demoting or removing each
    other at once cannot both pass the "another lead stays" check."""
    return list(Membership.objects.select_for_update().filter(project=project, role=Role.LEAD).order_by("pk"))


def _refuse_last_lead(*, project: Project, membership: Membership, doing: str) -> None:
    leads = _leads_locked(project)
    if [lead.pk for lead in leads] == [membership.pk]:
        raise MembersRefused(
            f"{membership.user.username} is the project's only lead: make another member a lead before you "
            f"{doing} them."
        )


def membership_set_role(*, membership: Membership, role: str, by: User) -> bool:
    """Give a member another role in their project; returns whether it changed. Refused when it would demote the
    project's last lead. The change and its audit entry are one transaction."""
    if role not in Role.values:
        raise MembersRefused(f"A role is one of {', '.join(Role.values)}.")
    with transaction.atomic():
        if role != Role.LEAD and membership.role == Role.LEAD:
            _refuse_last_lead(project=membership.project, membership=membership, doing="demote")
        locked = Membership.objects.select_for_update().get(pk=membership.pk)
        if locked.role == role:
            return False
        was = locked.role
        locked.role = role
        locked.save(update_fields=["role"])
        _event(project=membership.project, kind=MemberEvent.Kind.ROLE_CHANGED, subject=membership.user.username,
               detail=f"{was} → {role}", by=by)
    membership.role = role
    return True


def membership_remove(*, membership: Membership, by: User) -> int:
    """Take a member out of their project; returns how many of its datasets they were assigned to.

    Their labels stay and keep counting (a label is the reviewer's verdict on the case, not a privilege); their
    assignments to this project's datasets go with the membership, so joining again starts from none. Refused for
    the project's last lead. The removal, the assignments and the audit entry are one transaction."""
    project, user = membership.project, membership.user
    with transaction.atomic():
        if membership.role == Role.LEAD:
            _refuse_last_lead(project=project, membership=membership, doing="remove")
        assignments = Dataset.reviewers.through.objects.filter(dataset__project=project, user=user)
        unassigned = assignments.count()
        assignments.delete()
        deleted, _ = Membership.objects.filter(pk=membership.pk).delete()
        if not deleted:
            return 0  # removed meanwhile (another tab): nothing to audit twice
        detail = f"was {membership.role}; their labels stay"
        if unassigned:
            detail += f"; unassigned from {unassigned} dataset{'s' if unassigned != 1 else ''}"
        _event(project=project, kind=MemberEvent.Kind.REMOVED, subject=user.username, detail=detail, by=by)
    return unassigned


def assignments_set(*, membership: Membership, datasets: list[Dataset], by: User) -> bool:
    """Set which of the project's datasets a reviewer labels; returns whether it changed. Their assignments in
    other projects are left alone; a dataset of another project is refused. Audited in the same transaction."""
    project, user = membership.project, membership.user
    if any(dataset.project_id != project.pk for dataset in datasets):
        raise MembersRefused("Only this project's datasets can be assigned here.")
    if membership.role != Role.REVIEWER:
        raise MembersRefused(f"{user.username} is a lead: leads label every dataset of the project.")
    wanted = {dataset.pk: dataset for dataset in datasets}
    through = Dataset.reviewers.through
    with transaction.atomic():
        Membership.objects.select_for_update().get(pk=membership.pk)  # one change of a member's datasets at a time
        current = set(through.objects.filter(dataset__project=project, user=user).values_list("dataset_id",
                                                                                              flat=True))
        if current == set(wanted):
            return False
        through.objects.filter(dataset__project=project, user=user).exclude(dataset_id__in=wanted).delete()
        through.objects.bulk_create([through(dataset_id=pk, user_id=user.pk) for pk in set(wanted) - current])
        slugs = sorted(dataset.slug for dataset in datasets)
        was = sorted(project.datasets.filter(pk__in=current).values_list("slug", flat=True))
        _event(project=project, kind=MemberEvent.Kind.ASSIGNMENTS_SET, subject=user.username,
               detail=f"labels {', '.join(slugs) or 'no dataset'} (was {', '.join(was) or 'none'})", by=by)
    return True


def invitation_create(*, project: Project, invitee: str, role: str, by: User) -> tuple[Invitation, str]:
    """An invitation of `invitee` (a username or an e-mail address, as typed) into `project`; returns it and its
    plain token, which is never stored (the link carries it).

    Whatever the username or address matches (an account, none, a member of another project), the same happens:
    nothing here looks at other accounts, so the lead's page cannot tell them apart."""
    if role not in Role.values:
        raise MembersRefused(f"A role is one of {', '.join(Role.values)}.")
    raw = secrets.token_urlsafe(32)
    now = timezone.now()
    with transaction.atomic():
        invitation = Invitation.objects.create(
            project=project, invitee=invitee, role=role, token_hash=hash_token(raw), created_by=by, created_at=now,
            expires_at=now + timedelta(days=settings.EVALHUB_INVITATION_DAYS),
        )
        _event(project=project, kind=MemberEvent.Kind.INVITED, subject=invitee,
               detail=f"as {role}; open until {invitation.expires_at:%Y-%m-%d %H:%M} UTC", by=by)
    return invitation, raw


def mail_is_set_up() -> bool:
    """Whether this instance sends mail (settings.MAILERS, set from EMAIL_HOST or EMAIL_BACKEND)."""
    return bool(getattr(settings, "MAILERS", None))


def invitation_send(*, invitation: Invitation, link: str) -> str:
    """E-mail an invitation's link to the address it names: "sent", "failed" (the mail server refused) or "off"
    (no mail is set up). Called after the invitation is saved (no network call inside a transaction); the page
    shows the link whatever the answer, so nothing is lost when mail is."""
    if not mail_is_set_up():
        return "off"
    project = invitation.project
    subject = f"Join {project.name} on evalhub"
    body = (
        f"{invitation.created_by.username} invites you to the project {project.name} on evalhub, as "
        f"{invitation.get_role_display().lower()}.\n\n"
        f"Open this link to join (it works once, until {invitation.expires_at:%Y-%m-%d %H:%M} UTC):\n{link}\n\n"
        "If you did not expect this invitation, ignore this message.\n"
    )
    try:
        send_mail(subject, body, None, [invitation.invitee])
    except (OSError, smtplib.SMTPException):
        return "failed"
    return "sent"


class InvitationClosed(Exception):
    """The invitation was used, withdrawn or expired before this acceptance (another tab, another person)."""


def invitation_accept(*, invitation: Invitation, user: User) -> Membership:
    """Make `user` a member of the invitation's project with its role, once: the invitation is claimed by a
    conditional update, so two tabs (or two people holding the link) cannot both use it. The claim, the
    membership and the audit entry are one transaction; InvitationClosed when the claim finds it no longer open.
    MembersRefused (and the invitation stays open) for a user who is a member already."""
    project = invitation.project
    now = timezone.now()
    with transaction.atomic():
        if Membership.objects.filter(project=project, user=user).exists():
            raise MembersRefused(f"You are a member of {project.name} already.")
        claimed = Invitation.objects.filter(
            pk=invitation.pk, accepted_at__isnull=True, withdrawn_at__isnull=True, expires_at__gt=now,
        ).update(accepted_at=now, accepted_by=user)
        if not claimed:
            raise InvitationClosed
        membership = Membership.objects.create(project=project, user=user, role=invitation.role)
        _event(project=project, kind=MemberEvent.Kind.JOINED, subject=user.username,
               detail=f"as {invitation.role}; invited as {invitation.invitee} by {invitation.created_by.username}",
               by=user)
    invitation.accepted_at, invitation.accepted_by = now, user
    return membership


def invitation_withdraw(*, invitation: Invitation, by: User, declined: bool = False) -> bool:
    """Close an open invitation (the lead withdraws it, or the invitee declines it); returns whether it was still
    open. Its link stops working at once. Audited in the same transaction."""
    now = timezone.now()
    with transaction.atomic():
        closed = Invitation.objects.filter(
            pk=invitation.pk, accepted_at__isnull=True, withdrawn_at__isnull=True, expires_at__gt=now,
        ).update(withdrawn_at=now)
        if not closed:
            return False
        detail = f"declined by {by.username}" if declined else f"the invitation as {invitation.role} withdrawn"
        _event(project=invitation.project, kind=MemberEvent.Kind.INVITATION_WITHDRAWN, subject=invitation.invitee,
               detail=detail, by=by)
    invitation.withdrawn_at = now
    return True


def token_create(*, project: Project, name: str, scopes: list[str], by: User) -> tuple[ApiToken, str]:
    """A new API token of `project`; returns it and the plain token, shown once and never stored. Audited in the
    same transaction."""
    with transaction.atomic():
        token, raw = ApiToken.issue(project=project, name=name, scopes=scopes, created_by=by)
        _event(project=project, kind=MemberEvent.Kind.TOKEN_CREATED, subject=name,
               detail=f"{token.prefix}…; scopes {', '.join(scopes)}", by=by)
    return token, raw


def token_revoke(*, token: ApiToken, by: User) -> bool:
    """Revoke a token for good; returns whether it was still active. A conditional update, so revoking twice
    (two tabs, the admin's list) audits once. Audited in the same transaction."""
    now = timezone.now()
    with transaction.atomic():
        revoked = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=now)
        if not revoked:
            return False
        _event(project=token.project, kind=MemberEvent.Kind.TOKEN_REVOKED, subject=token.name,
               detail=f"{token.prefix}…", by=by)
    token.revoked_at = now
    return True
