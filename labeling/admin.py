from django.contrib import admin

from labeling.models import Adjudication, Case, Dataset, Label, LabelRequest, Rubric, Skip


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    filter_horizontal = ["reviewers"]


@admin.register(Case)
class CaseAdmin(admin.ModelAdmin):
    list_display = ["external_id", "dataset", "category", "split"]
    list_filter = ["dataset", "split", "category"]
    search_fields = ["external_id"]
    readonly_fields = ["split", "content_hash", "content_changed_at"]
    list_select_related = ["dataset"]


@admin.register(Rubric)
class RubricAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "stage", "labels_per_case", "fail_closed"]
    # Stage, thresholds and fail_closed change only through the audited promotion pages.
    readonly_fields = [
        "stage", "fail_closed", "min_cases", "min_repeats", "agreement_floor", "agreement_ceiling",
        "min_true_pass_rate", "min_true_fail_rate", "max_flip_rate", "min_coverage",
    ]


@admin.register(Label)
class LabelAdmin(admin.ModelAdmin):
    list_display = ["case", "rubric", "reviewer", "verdict", "updated_at"]
    list_filter = ["rubric", "verdict"]
    list_select_related = ["case", "rubric", "reviewer"]
    raw_id_fields = ["case"]


@admin.register(Adjudication)
class AdjudicationAdmin(admin.ModelAdmin):
    list_display = ["case", "rubric", "verdict", "decided_by", "decided_at"]
    list_select_related = ["case", "rubric", "decided_by"]
    raw_id_fields = ["case"]


admin.site.register(Skip)
admin.site.register(LabelRequest)
