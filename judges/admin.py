"""Judges in the admin: mostly read-only views of configs, runs and judgments, and the price table.

Configs are immutable and runs change only through judges.runs.services, so the admin shows them without
letting anyone edit them; prices are a plain table, the instance's, that the instance admin also edits on /prices/.
The admin is the instance admin's, who sees every project: lists name and filter by it.
"""

from django.contrib import admin
from django.utils import timezone

from judges.models import CiResult, JudgeConfig, Judgment, ModelPrice, RubricEvent, Run, VerdictExport


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(JudgeConfig)
class JudgeConfigAdmin(ReadOnlyAdmin):
    list_display = ["rubric", "version", "tier", "external", "config_hash", "created_by", "created_at"]
    list_filter = ["rubric__project", "tier", "external", "rubric"]
    list_select_related = ["rubric", "created_by"]


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = [
        "pk", "config", "dataset", "status", "probe", "parent", "done", "total", "not_evaluated", "cost_usd",
        "created_at",
    ]
    list_filter = ["dataset__project", "status", "probe"]  # a bias probe names the run it measures
    list_select_related = ["config__rubric", "dataset"]


@admin.register(Judgment)
class JudgmentAdmin(ReadOnlyAdmin):
    list_display = ["run", "case", "repeat", "outcome", "layer", "error", "cached"]
    list_filter = ["outcome", "layer"]
    list_select_related = ["run", "case"]
    raw_id_fields = ["run", "case"]


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    list_display = ["model", "input_per_mtok", "output_per_mtok", "updated_by", "updated_at"]
    readonly_fields = ["updated_by", "updated_at"]

    def save_model(self, request, obj, form, change) -> None:
        obj.updated_by = request.user
        obj.updated_at = timezone.now()
        super().save_model(request, obj, form, change)


@admin.register(RubricEvent)
class RubricEventAdmin(ReadOnlyAdmin):
    """The audit log: nobody edits or deletes an entry, not even a superuser."""

    list_display = ["at", "rubric", "kind", "from_stage", "to_stage", "run", "by"]
    list_filter = ["rubric__project", "kind", "rubric"]
    list_select_related = ["rubric", "run", "by"]

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(CiResult)
class CiResultAdmin(ReadOnlyAdmin):
    list_display = ["received_at", "rubric", "stage", "outcome", "passed", "failed", "not_evaluated", "token_name"]
    list_filter = ["rubric__project", "outcome", "rubric"]
    list_select_related = ["rubric"]


@admin.register(VerdictExport)
class VerdictExportAdmin(admin.ModelAdmin):
    """Where a project's verdicts go (judges/export): names of environment variables (VerdictExport.clean)."""

    list_display = ["project", "endpoint_env", "headers_env", "enabled"]

