"""Django's admin: the instance admin's (the superuser's) tool only, for what evalhub's own pages do not do.

People, roles, dataset assignments and tokens are managed per project on evalhub's own pages, where every change
is checked (the last lead stays) and audited (MemberEvent): here, projects may only be renamed, tokens only read
and revoked (audited the same way), and nothing of a project's people is editable (docs/projects.md)."""

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.http import HttpRequest

from evalhub.members.services import token_revoke
from evalhub.models import ApiToken, MemberEvent, Project, User


def _instance_admin_only(request: HttpRequest) -> bool:
    # Django lets any active staff user in; evalhub's admin is the instance admin's alone, whatever the flags.
    return request.user.is_active and request.user.is_superuser


admin.site.has_permission = _instance_admin_only


@admin.register(User)
class EvalhubUserAdmin(UserAdmin):
    # Roles are per project, managed by each project's leads on evalhub's own pages (docs/projects.md).
    list_display = ["username", "email", "is_active", "is_superuser", "last_login"]
    list_filter = ["is_active", "is_superuser"]

    def has_delete_permission(self, request, obj=None) -> bool:
        # A user's labels and adjudications would go with them, and the figures built on them would change:
        # deactivate the account instead (is_active), which keeps every label counting.
        return False


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    """Projects are created on evalhub's own page (/projects/new/), which names the first lead; here the admin
    may rename one. Members are managed by the project's leads, never here."""

    list_display = ["slug", "name", "created_at"]
    fields = ["slug", "name", "description"]
    # The slug is in every page's address, in CI's gate config and in scripts' --project: it never changes.
    readonly_fields = ["slug"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # a project holds labels and evidence: nothing here deletes them


@admin.register(MemberEvent)
class MemberEventAdmin(admin.ModelAdmin):
    list_display = ["at", "project", "kind", "subject", "by"]
    list_filter = ["project", "kind"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are read here and revoked; a revocation is final and audited like one on the project's Tokens page,
    where tokens are created (each of one project, shown once)."""

    list_display = ["name", "project", "prefix", "scopes", "created_by", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["project", "revoked_at"]
    fields = ["project", "name", "prefix", "scopes", "created_by", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return False  # made on the project's Tokens page, audited there

    def has_change_permission(self, request, obj=None) -> bool:
        # The list (obj None) keeps its actions; a token's own page is view-only.
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # revoke instead: the row stays as a record of who could reach the API

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset) -> None:
        for token in queryset.filter(revoked_at__isnull=True).select_related("project"):
            token_revoke(token=token, by=request.user)
