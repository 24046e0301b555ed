from django import forms
from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.template.response import TemplateResponse

from evalhub.models import ApiToken, Scope, User


@admin.register(User)
class EvalhubUserAdmin(UserAdmin):
    list_display = ["username", "email", "role", "is_active", "is_staff", "last_login"]
    list_filter = ["role", "is_active", "is_staff"]
    fieldsets = [*UserAdmin.fieldsets, ("Role", {"fields": ["role"]})]
    add_fieldsets = [*UserAdmin.add_fieldsets, ("Role", {"fields": ["role"]})]


class ApiTokenForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(choices=Scope.choices, widget=forms.CheckboxSelectMultiple)

    class Meta:
        model = ApiToken
        fields = ["name", "scopes"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are created here and shown once; afterwards only revoking is possible."""

    form = ApiTokenForm
    list_display = ["name", "prefix", "scopes", "created_by", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    actions = ["revoke"]

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return []
        return ["name", "prefix", "scopes", "created_by", "created_at", "last_used_at"]

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["name", "scopes"]
        return ["name", "prefix", "scopes", "created_by", "created_at", "last_used_at", "revoked_at"]

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # revoke instead: the row stays as a record of who could reach the API

    def save_model(self, request, obj, form, change) -> None:
        if change:
            obj.save(update_fields=["revoked_at"])
            return
        obj.created_by = request.user
        obj._plain_token = obj.new_secret()  # handed to response_add once, never stored
        obj.save()

    def response_add(self, request, obj, post_url_continue=None):
        return TemplateResponse(
            request,
            "admin/evalhub/apitoken/created.html",
            {**self.admin_site.each_context(request), "token": obj, "plain_token": obj._plain_token,
             "opts": self.model._meta, "title": "API token created"},
        )

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset) -> None:
        for token in queryset.filter(revoked_at__isnull=True):
            token.revoke()
