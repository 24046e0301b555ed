"""Reads about a project's people: the projects a user may pick, a project's members with their datasets, its
open invitations, its tokens and the recent changes; the invitations waiting for a user."""

from django.db.models import Count, F, IntegerField, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from evalhub.models import ApiToken, Invitation, MemberEvent, Membership, Project, Role, hash_token
from labeling.models import Dataset, Rubric


def invitations_for(user) -> list[Invitation]:
    """The open invitations a signed-in user may accept from their home page: those naming their username, or
    their e-mail address when they have one (an e-mail invitation also arrives as a link). Only invitations made
    after the account was: a name invited before anyone held it is not claimed by whoever signs up under it."""
    match = Q(invitee__iexact=user.username)
    if user.email:
        match |= Q(invitee__iexact=user.email)
    open_invitations: QuerySet[Invitation] = Invitation.objects.filter(
        match, accepted_at__isnull=True, withdrawn_at__isnull=True, expires_at__gt=timezone.now(),
        created_at__gt=user.date_joined,
    ).exclude(project__memberships__user=user)
    return list(open_invitations.select_related("project", "created_by").order_by("-created_at"))


def invitation_by_token(raw: str) -> Invitation | None:
    """The open invitation a link's token names, or None: unknown, used, withdrawn and expired alike, so the
    link's page cannot tell them apart."""
    invitation = Invitation.objects.filter(token_hash=hash_token(raw)).select_related("project", "created_by").first()
    return invitation if invitation is not None and invitation.is_open() else None


def _count_of(queryset: QuerySet) -> Subquery:
    """A per-project count as a subquery: three joined counts would multiply each other's rows."""
    counted = queryset.filter(project=OuterRef("pk")).order_by().values("project").annotate(n=Count("pk"))
    return Coalesce(Subquery(counted.values("n"), output_field=IntegerField()), 0)


def projects_for_picker(user) -> list[Project]:
    """The projects a user may open, each with their role in it (`my_role`; the instance admin leads every one)
    and its counts of datasets, rubrics and members. One query, whatever the number of projects."""
    memberships = Membership.objects.filter(project=OuterRef("pk"), user=user)
    projects = Project.objects.for_user(user).annotate(
        datasets_count=_count_of(Dataset.objects.all()),
        rubrics_count=_count_of(Rubric.objects.all()),
        members_count=_count_of(Membership.objects.all()),
        my_membership_role=Subquery(memberships.values("role")[:1]),
    )
    found = list(projects.order_by("name", "slug"))
    for project in found:
        project.my_role = Role.LEAD if user.is_superuser else project.my_membership_role
    return found


def members_of(*, project: Project) -> list[Membership]:
    """The project's members, leads first, each with `assigned` (the datasets of this project they label, by
    slug). Two queries, whatever the number of members and datasets."""
    assigned = Prefetch("user__assigned_datasets", queryset=project.datasets.order_by("slug"), to_attr="assigned")
    members = (
        Membership.objects.filter(project=project).select_related("user").prefetch_related(assigned)
        .order_by("role", "user__username")  # "lead" sorts before "reviewer"
    )
    return list(members)


def membership_in(*, project: Project, membership_id: int) -> Membership | None:
    return Membership.objects.filter(project=project, pk=membership_id).select_related("user", "project").first()


def open_invitations(*, project: Project) -> list[Invitation]:
    """The project's invitations still waiting: neither accepted nor withdrawn, not expired."""
    return list(
        project.invitations.filter(accepted_at__isnull=True, withdrawn_at__isnull=True, expires_at__gt=timezone.now())
        .select_related("created_by").order_by("-created_at")
    )


def recent_changes(*, project: Project, limit: int = 30) -> list[MemberEvent]:
    """The project's newest audited changes of members and tokens."""
    return list(MemberEvent.objects.filter(project=project).select_related("by").order_by("-at", "-pk")[:limit])


def tokens_of(*, project: Project) -> list[ApiToken]:
    """The project's API tokens: the active ones first, newest first; then the revoked, latest revoked first."""
    tokens = ApiToken.objects.filter(project=project).select_related("created_by")
    return list(tokens.order_by(F("revoked_at").desc(nulls_first=True), "-created_at"))
