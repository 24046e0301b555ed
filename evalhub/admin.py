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
    """Tokens are created here and shown once; afterwards only revoking is possible, and it is final.

    A saved token has no change form (its page is read-only): the list's "Revoke" action is the one
    change, and nothing clears revoked_at.
    """

    form = ApiTokenForm
    list_display = ["name", "prefix", "scopes", "created_by", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    actions = ["revoke"]

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["name", "scopes"]
        return ["name", "prefix", "scopes", "created_by", "created_at", "last_used_at", "revoked_at"]

    def has_change_permission(self, request, obj=None) -> bool:
        # The list (obj None) keeps its actions; a token's own page is view-only.
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # revoke instead: the row stays as a record of who could reach the API

    def save_model(self, request, obj, form, change) -> None:
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
