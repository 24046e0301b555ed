import hashlib
import secrets

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone


class Role(models.TextChoices):
    REVIEWER = "reviewer", "Reviewer"
    LEAD = "lead", "Lead"
    ADMIN = "admin", "Admin"


class User(AbstractUser):
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.REVIEWER)

    @property
    def is_lead(self) -> bool:
        """Leads reach every page; admins are leads too."""
        return self.is_superuser or self.role in {Role.LEAD, Role.ADMIN}

    @property
    def is_admin(self) -> bool:
        return self.is_superuser or self.role == Role.ADMIN


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
    """A bearer token for CI and scripts. Only its hash is stored; the token is shown once."""

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
    def issue(cls, *, name: str, scopes: list[str], created_by) -> tuple["ApiToken", str]:
        """Create a token; returns the row and the plain token, which is never stored."""
        validate_scopes(scopes)
        token = cls(name=name, scopes=scopes, created_by=created_by)
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
