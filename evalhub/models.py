import hashlib
import secrets

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone


class Role(models.TextChoices):
    """A member's role in one project (docs/projects.md): the instance admin is Django's superuser, not a role."""

    REVIEWER = "reviewer", "Reviewer"
    LEAD = "lead", "Lead"


class User(AbstractUser):
    @property
    def is_admin(self) -> bool:
        """The instance admin: creates projects, names their first lead, edits model prices; a lead everywhere."""
        return self.is_superuser

    def role_in(self, project: "Project") -> str | None:
        """This user's role in `project` (the admin leads every project), or None for a non-member."""
        if self.is_superuser:
            return Role.LEAD
        membership = Membership.objects.filter(project=project, user=self).only("role").first()
        return membership.role if membership else None

    def leads(self, project_id: int) -> bool:
        """Whether this user may do a lead's work in the project: the one check every service that changes a
        project's rubrics, judges, disputes or people makes (the pages' door makes it too). One query by the
        project's id, so its row need not be read; none for the instance admin."""
        if self.is_superuser:
            return True
        return Membership.objects.filter(project_id=project_id, user=self, role=Role.LEAD).exists()


class ProjectQuerySet(models.QuerySet):
    def for_user(self, user) -> "ProjectQuerySet":
        """The projects a user may open: every one for the instance admin, else those they are a member of."""
        if user.is_superuser:
            return self
        return self.filter(memberships__user=user)


class Project(models.Model):
    """One agent or product and the people who judge it: the unit of isolation for data, figures and access
    (docs/projects.md). Everything a team works on hangs from it, directly (datasets, rubrics, policy documents,
    tokens, caches) or through them."""

    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = ProjectQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name or self.slug


class Membership(models.Model):
    """A user's role in one project. Written only by evalhub.members.services (audited)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["project", "user__username"]
        constraints = [models.UniqueConstraint(fields=["user", "project"], name="membership_one_per_project")]
        indexes = [models.Index(fields=["project", "role"], name="membership_project_role")]

    def __str__(self) -> str:
        return f"{self.user} ({self.role} of {self.project})"


class AppendOnlyQuerySet(models.QuerySet):
    """An audit log's queryset: no bulk update or delete through the ORM either. `log_name` names it in the error."""

    log_name = "audit log"

    def update(self, **kwargs):
        raise PermissionError(f"The {self.log_name} is append-only: its entries are never changed.")

    def delete(self):
        raise PermissionError(f"The {self.log_name} is append-only: its entries are never deleted.")


class MemberEventQuerySet(AppendOnlyQuerySet):
    log_name = "members' audit log"


class MemberEvent(models.Model):
    """One audited change of who is in a project: who did what to whom, when. Only created, never changed."""

    class Kind(models.TextChoices):
        ADDED = "added", "added"
        INVITED = "invited", "invited"
        JOINED = "joined", "joined by invitation"
        INVITATION_WITHDRAWN = "invitation_withdrawn", "invitation withdrawn"
        ROLE_CHANGED = "role_changed", "role changed"
        REMOVED = "removed", "removed"
        ASSIGNMENTS_SET = "assignments_set", "datasets assigned"
        TOKEN_CREATED = "token_created", "API token created"
        TOKEN_REVOKED = "token_revoked", "API token revoked"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="member_events")
    kind = models.CharField(max_length=24, choices=Kind.choices)
    # Whom it concerns, as text: a removed user's row may go, an invitation names no user yet.
    subject = models.CharField(max_length=254)
    detail = models.TextField(blank=True)
    by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    at = models.DateTimeField(default=timezone.now)

    objects = MemberEventQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["project", "-at"], name="memberevent_project_recent")]

    def __str__(self) -> str:
        return f"{self.project}: {self.get_kind_display()} {self.subject}"


class Invitation(models.Model):
    """An invitation into a project, by username or e-mail: accepted once, before it expires. Only its token's
    hash is stored; the link carries the token. The lead's pages say the same whatever the username or e-mail
    matches, so inviting reveals nothing about other accounts or projects."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="invitations")
    # What the lead typed: a username, or an e-mail address (it holds an @).
    invitee = models.CharField(max_length=254)
    role = models.CharField(max_length=16, choices=Role.choices)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                    related_name="+")
    withdrawn_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.invitee} to {self.project} ({self.role})"

    @property
    def by_email(self) -> bool:
        return "@" in self.invitee

    def is_open(self, now=None) -> bool:
        now = now or timezone.now()
        return self.accepted_at is None and self.withdrawn_at is None and self.expires_at > now


class Scope(models.TextChoices):
    CASES_WRITE = "cases:write", "cases:write — ingest cases"
    CASES_READ = "cases:read", "cases:read — fetch a dataset's cases (CI runs its agent on them)"
    RUNS_READ = "runs:read", "runs:read — read run reports"
    GATES_READ = "gates:read", "gates:read — read the gate config"
    RESULTS_WRITE = "results:write", "results:write — post CI results"
    POLICIES_READ = "policies:read", "policies:read — read the policy documents (the text the judge is given)"


TOKEN_PREFIX = "evh_"


def hash_token(raw: str) -> str:
    # Tokens are 256 random bits, so a plain digest is enough: there is nothing to brute-force.
    return hashlib.sha256(raw.encode()).hexdigest()


def validate_scopes(value: list) -> None:
    if not isinstance(value, list) or not value:
        raise ValidationError("Choose at least one scope.")
    unknown = sorted(set(value) - set(Scope.values))
    if unknown:
        raise ValidationError(f"Unknown scope(s): {', '.join(unknown)}.")


class ApiToken(models.Model):
    """A bearer token for CI and scripts, of one project: every API answers only for that project. Only its
    hash is stored; the token is shown once."""

    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="tokens")
    name = models.CharField(max_length=100)
    # The token's first characters, to tell tokens apart in the admin.
    prefix = models.CharField(max_length=16, editable=False)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    scopes = models.JSONField(default=list, validators=[validate_scopes])
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @classmethod
    def issue(cls, *, project: Project, name: str, scopes: list[str], created_by) -> tuple["ApiToken", str]:
        """Create a token of `project`; returns the row and the plain token, which is never stored."""
        validate_scopes(scopes)
        token = cls(project=project, name=name, scopes=scopes, created_by=created_by)
        raw = token.new_secret()
        token.save()
        return token, raw

    def new_secret(self) -> str:
        """Give the (unsaved) token a fresh secret; returns the plain token for showing once."""
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        self.prefix = raw[:10]
        self.token_hash = hash_token(raw)
        return raw

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def revoke(self) -> None:
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])
