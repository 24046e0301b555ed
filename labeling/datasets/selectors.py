"""Reads of the dataset and case pages (the import/export area) and of the cases API."""

import heapq

from django.db.models import BooleanField, Count, ExpressionWrapper, Q, QuerySet
from django.db.models.functions import Left

from evalhub.models import Project
from labeling.importing.reading import sample_key
from labeling.models import Adjudication, Case, Dataset, Label, Rubric

PREVIEW_CHARS = 160


def datasets_with_counts(*, project: Project) -> QuerySet[Dataset]:
    """The project's datasets with `case_count`, their reviewers prefetched: two queries however many datasets."""
    return project.datasets.annotate(case_count=Count("cases")).prefetch_related("reviewers").order_by("slug")


# The case list's sort keys (evalhub.tables): import order, id, category, split.
CASE_SORTS = {
    "imported": ("pk",),
    "id": ("external_id", "pk"),
    "category": ("category", "pk"),
    "split": ("split", "pk"),
}


def dataset_case_rows(
    *, dataset: Dataset, category: str | None = None, split: str | None = None, search: str = "",
    ordering: tuple[str, ...] = ("pk",), kind: str | None = None,
) -> QuerySet:
    """Rows for a dataset's case list: the start of input and output only, so long answers stay in the DB.
    `search` matches the case's id, input or output; `kind` "" selects the cases without a calibration kind."""
    cases = Case.objects.filter(dataset=dataset)
    if category is not None:
        cases = cases.filter(category=category)
    if split is not None:
        cases = cases.filter(split=split)
    if search:
        cases = cases.filter(
            Q(external_id__icontains=search) | Q(input__icontains=search) | Q(output__icontains=search)
        )
    if kind is not None:
        cases = cases.filter(kind=kind)
    return cases.order_by(*ordering).values(
        "pk", "external_id", "category", "split", "kind",
        input_preview=Left("input", PREVIEW_CHARS), output_preview=Left("output", PREVIEW_CHARS),
    )


def pipeline_cases(*, dataset: Dataset, category: str | None = None, split: str | None = None,
                   kind: str | None = None, sample: int | None = None, seed: str = "") -> QuerySet[Case]:
    """The cases a pipeline runs its agent on: the filters first, then the optional stable sample.

    The sample is the `sample` cases with the lowest sample_key(seed, external_id), read from the
    external_ids alone; None selects every filtered case. In import order either way.
    """
    cases = Case.objects.filter(dataset=dataset)
    for name, value in (("category", category), ("split", split), ("kind", kind)):
        if value is not None:
            cases = cases.filter(**{name: value})
    if sample is not None:
        chosen = heapq.nsmallest(sample, cases.values_list("pk", "external_id").iterator(chunk_size=10_000),
                                 key=lambda row: (sample_key(seed, row[1]), row[1]))
        cases = Case.objects.filter(pk__in=[pk for pk, _ in chosen])
    return cases.order_by("pk")


def dataset_categories(*, dataset: Dataset) -> list[dict]:
    """[{"category", "n"}] of a dataset, for the case list's filter."""
    return list(
        Case.objects.filter(dataset=dataset).values("category").annotate(n=Count("pk")).order_by("category")
    )


# A case's expected tool argument is checked unless it is SQL NULL (a JSON null is checked).
CHECKS_TOOL_ARGUMENT = ExpressionWrapper(Q(expected_tool_argument__isnull=False), output_field=BooleanField())


def case_for_page(*, case_id: int, datasets: QuerySet[Dataset]) -> Case:
    """One case of `datasets` (those of a project the user may see) with its dataset and `checks_tool_argument`
    (SQL NULL: not checked; JSON null: checked); Case.DoesNotExist for a case of any other dataset."""
    cases = Case.objects.filter(dataset__in=datasets)
    return (
        cases.select_related("dataset")
        .annotate(checks_tool_argument=CHECKS_TOOL_ARGUMENT)
        .get(pk=case_id)
    )


def case_labels_by_rubric(*, case: Case) -> list[dict]:
    """For leads: each rubric with labels or an adjudication on this case, in two queries.

    [{"rubric", "labels": [Label (with .counts)], "adjudication": Adjudication | None}], by rubric slug.
    """
    groups: dict[int, dict] = {}
    # Only the case's own project's rubrics ever pair with it; the filter keeps a page from showing otherwise.
    labels = (
        Label.objects.filter(case=case, rubric__project_id=case.dataset.project_id)
        .select_related("rubric", "reviewer").order_by("rubric__slug", "reviewer__username")
    )

    def group(rubric: Rubric) -> dict:
        return groups.setdefault(rubric.pk, {"rubric": rubric, "labels": [], "adjudication": None})

    for label in labels:
        label.counts = label.content_hash == case.content_hash
        group(label.rubric)["labels"].append(label)
    adjudications = Adjudication.objects.filter(case=case, rubric__project_id=case.dataset.project_id)
    for adjudication in adjudications.select_related("rubric", "decided_by"):
        group(adjudication.rubric)["adjudication"] = adjudication
    return sorted(groups.values(), key=lambda group: group["rubric"].slug)
