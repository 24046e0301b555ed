from django.contrib import admin

from labeling.models import (
    Adjudication,
    Case,
    Dataset,
    DatasetEvent,
    Label,
    LabelRequest,
    OtlpTrace,
    PolicyDocument,
    Rubric,
    Skip,
)


class _InProjectAdmin(admin.ModelAdmin):
    """An object of one project: the project is chosen when it is made and never changes (a dataset or rubric
    moved would pair with another project's objects, and its slug may be taken there)."""

    def get_readonly_fields(self, request, obj=None) -> list[str]:
        fixed = ["project"] if obj is not None else []
        return [*fixed, *super().get_readonly_fields(request, obj)]


@admin.register(Dataset)
class DatasetAdmin(_InProjectAdmin):
    list_display = ["slug", "project", "name", "queue_order", "created_at"]
    list_filter = ["project"]
    list_select_related = ["project"]
    search_fields = ["slug", "name"]
    # Changed on evalhub's own pages only, where the change is audited: redaction and policies on the dataset
    # page, the reviewers who label it on the project's Members page.
    readonly_fields = ["redact", "policies", "reviewers"]


@admin.register(DatasetEvent)
class DatasetEventAdmin(admin.ModelAdmin):
    """The dataset audit log, read-only."""

    list_display = ["at", "dataset", "kind", "by"]
    list_filter = ["dataset__project", "kind"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Case)
class CaseAdmin(admin.ModelAdmin):
    list_display = ["external_id", "dataset", "category", "split"]
    list_filter = ["dataset__project", "dataset", "split", "category"]
    search_fields = ["external_id"]
    readonly_fields = ["split", "content_hash", "content_changed_at"]
    list_select_related = ["dataset"]


@admin.register(Rubric)
class RubricAdmin(admin.ModelAdmin):
    """The admin edits what the rubric editor edits; everything else is read-only here.

    Stage, thresholds and fail_closed change only through the audited promotion pages, and CI finds a
    rubric by its project and slug, both chosen when it is made: a field added later is read-only here until it
    is named below.
    """

    editable_fields = ("name", "criteria", "labels_per_case")
    list_display = ["slug", "project", "name", "stage", "labels_per_case", "fail_closed"]
    list_filter = ["project"]
    list_select_related = ["project"]

    def get_readonly_fields(self, request, obj=None) -> list[str]:
        editable = {*self.editable_fields, *(("project", "slug") if obj is None else ())}
        return [field.name for field in Rubric._meta.get_fields()
                if field.concrete and not field.auto_created and field.name not in editable]


class AttributedAdmin(admin.ModelAdmin):
    """A person's verdict, shown but not written here: an edit would put words in someone else's name.

    Labels come from the labeling pages and imports, adjudications from the disputes page; a row may
    still be deleted (a label given by mistake, say).
    """

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Label)
class LabelAdmin(AttributedAdmin):
    list_display = ["case", "rubric", "reviewer", "verdict", "updated_at"]
    list_filter = ["rubric__project", "rubric", "verdict"]
    list_select_related = ["case", "rubric", "reviewer"]
    raw_id_fields = ["case"]


@admin.register(Adjudication)
class AdjudicationAdmin(AttributedAdmin):
    list_display = ["case", "rubric", "verdict", "decided_by", "decided_at"]
    list_select_related = ["case", "rubric", "decided_by"]
    raw_id_fields = ["case"]


@admin.register(PolicyDocument)
class PolicyDocumentAdmin(admin.ModelAdmin):
    """Shown, never written here: a version never changes, and the next one is written on the policy pages
    (labeling.policies.services.policy_write numbers it and hashes its text)."""

    list_display = ["slug", "project", "version", "sha256", "created_by", "created_at"]
    list_filter = ["project"]
    list_select_related = ["project", "created_by"]

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # configs reference versions by number: a deleted one could come back with other text


admin.site.register(Skip)
admin.site.register(LabelRequest)


@admin.register(OtlpTrace)
class OtlpTraceAdmin(admin.ModelAdmin):
    """Traces the OTLP receiver keeps waiting for their root span, and those it gave up: read-only."""

    list_display = ["trace_id", "dataset", "first_seen_at", "gave_up_at", "reported_at"]
    list_filter = ["dataset__project", "dataset"]
    search_fields = ["trace_id"]
    exclude = ["pieces", "placeholders"]  # redacted already, but what an agent said is no admin list's business

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
