"""Reads that cross relations: human verdicts and what counts as a label."""

import heapq

from django.db.models import (
    BooleanField,
    Count,
    ExpressionWrapper,
    F,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models import Case as SqlCase
from django.db.models.functions import Left

from labeling.importing.reading import sample_key
from labeling.models import Adjudication, Case, Dataset, Label, PolicyDocument, Rubric


def counting_labels(*, rubric: Rubric) -> QuerySet[Label]:
    """Labels of this rubric that still count: given against the case content as it is now."""
    return Label.objects.filter(rubric=rubric, content_hash=F("case__content_hash"))


def cases_with_human_verdict(*, rubric: Rubric, cases: QuerySet[Case] | None = None) -> QuerySet[Case]:
    """Cases annotated with `passes`, `fails` (counting labels), `adjudicated` and `human_verdict`.

    The human verdict (docs/words.md) is the lead's adjudication if there is one, else the majority of the
    counting labels; a tie (or no label) has none. One query however many cases.
    """
    cases = Case.objects.all() if cases is None else cases
    counting = Q(labels__rubric=rubric, labels__content_hash=F("content_hash"))
    return cases.annotate(
        passes=Count("labels", filter=counting & Q(labels__verdict="pass")),
        fails=Count("labels", filter=counting & Q(labels__verdict="fail")),
        adjudicated=Subquery(
            Adjudication.objects.filter(case=OuterRef("pk"), rubric=rubric).values("verdict")[:1]
        ),
    ).annotate(
        human_verdict=SqlCase(
            When(adjudicated__isnull=False, then=F("adjudicated")),
            When(passes__gt=F("fails"), then=Value("pass")),
            When(fails__gt=F("passes"), then=Value("fail")),
            default=None,
        )
    )


# --- Dataset and case pages (the import/export area) -------------------------------------------------

PREVIEW_CHARS = 160


def datasets_with_counts() -> QuerySet[Dataset]:
    """Datasets with `case_count`, their reviewers prefetched: two queries however many datasets."""
    return Dataset.objects.annotate(case_count=Count("cases")).prefetch_related("reviewers").order_by("slug")


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


def case_for_page(*, case_id: int) -> Case:
    """One case with its dataset and `checks_tool_argument` (SQL NULL: not checked; JSON null: checked)."""
    return (
        Case.objects.select_related("dataset")
        .annotate(checks_tool_argument=ExpressionWrapper(Q(expected_tool_argument__isnull=False),
                                                         output_field=BooleanField()))
        .get(pk=case_id)
    )


def case_labels_by_rubric(*, case: Case) -> list[dict]:
    """For leads: each rubric with labels or an adjudication on this case, in two queries.

    [{"rubric", "labels": [Label (with .counts)], "adjudication": Adjudication | None}], by rubric slug.
    """
    groups: dict[int, dict] = {}
    labels = Label.objects.filter(case=case).select_related("rubric", "reviewer").order_by(
        "rubric__slug", "reviewer__username"
    )

    def group(rubric: Rubric) -> dict:
        return groups.setdefault(rubric.pk, {"rubric": rubric, "labels": [], "adjudication": None})

    for label in labels:
        label.counts = label.content_hash == case.content_hash
        group(label.rubric)["labels"].append(label)
    for adjudication in Adjudication.objects.filter(case=case).select_related("rubric", "decided_by"):
        group(adjudication.rubric)["adjudication"] = adjudication
    return sorted(groups.values(), key=lambda group: group["rubric"].slug)


def policy_newest_versions() -> dict[str, int]:
    """slug → the newest version of every policy document. One query."""
    rows = PolicyDocument.objects.order_by().values("slug").annotate(v=Max("version")).values_list("slug", "v")
    return dict(rows)


def policies_for_list() -> QuerySet[PolicyDocument]:
    """Each policy's newest version (with its author) and how many versions it has. One query."""
    newest = PolicyDocument.objects.filter(slug=OuterRef("slug")).order_by("-version").values("pk")[:1]
    versions = (PolicyDocument.objects.filter(slug=OuterRef("slug")).order_by().values("slug")
                .annotate(n=Count("pk")).values("n"))
    return (
        PolicyDocument.objects.filter(pk=Subquery(newest)).select_related("created_by")
        .annotate(version_count=Subquery(versions)).order_by("slug")
    )
