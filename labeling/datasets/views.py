"""The dataset and case pages: datasets, their cases and case kinds, rubrics, import and export."""

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse, QueryDict, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from evalhub.access import lead_required, member_required
from evalhub.http import HtmxHttpRequest
from evalhub.models import Project, Role
from evalhub.params import object_id, refuse_nul
from evalhub.tables import table_query
from labeling.datasets import services
from labeling.datasets.exporting import cases_export, labels_export, report_export, report_rubrics
from labeling.datasets.forms import (
    KIND_UNSET,
    CaseImportForm,
    DatasetCreateForm,
    LabelImportForm,
    PoliciesForm,
    RedactionForm,
    RubricCreateForm,
    RubricEditForm,
    case_filters,
)
from labeling.datasets.selectors import (
    CASE_SORTS,
    case_for_page,
    case_labels_by_rubric,
    dataset_case_rows,
    dataset_categories,
    datasets_with_counts,
)
from labeling.importing import Format, ImportRejected
from labeling.importing.cases import cases_import
from labeling.importing.labels import labels_import
from labeling.importing.reading import CASE_KINDS
from labeling.models import Case, Dataset, DatasetEvent, LabelingRefused


@lead_required
def dataset_list(request: HttpRequest, project: Project) -> HttpResponse:
    return render(request, "labeling/dataset_list.html", {"datasets": datasets_with_counts(project=project)})


@lead_required
def rubric_list(request: HttpRequest, project: Project) -> HttpResponse:
    rubrics = project.rubrics.annotate(label_count=Count("labels")).order_by("slug")
    return render(request, "labeling/rubric_list.html", {"rubrics": rubrics})


def _get_dataset_for_user(request: HttpRequest, slug: str, *, lead_only: bool = False) -> Dataset:
    """A dataset of the request's project (set by the door) that the user may see; 404 for any other (another
    project's, or a reviewer's unassigned one), then 403 on leads' pages.

    The 404 comes first so that a reviewer cannot learn which datasets exist from a 403.
    """
    project, role = request.project, request.project_role
    dataset = get_object_or_404(project.datasets.visible_to(request.user, role=role), slug=slug)
    if lead_only and role != Role.LEAD:
        raise PermissionDenied("Only leads may do this.")
    return dataset


@lead_required
@require_http_methods(["GET", "POST"])
def dataset_create(request: HttpRequest, project: Project) -> HttpResponse:
    form = DatasetCreateForm(request.POST or None, project=project)
    if request.method == "POST" and form.is_valid():
        dataset = form.save()
        messages.success(request, f"Dataset {dataset.slug} created. Import its cases.")
        return redirect("labeling:dataset_import", project=project.slug, slug=dataset.slug)
    return render(request, "labeling/dataset_create.html", {"form": form})


CASES_PER_PAGE = 50


@member_required
@vary_on_headers("HX-Request")
def dataset_detail(request: HtmxHttpRequest, project: Project, slug: str) -> HttpResponse:
    """Leads' list of a dataset's cases, 50 a page, filtered by category and split, searched, sorted."""
    dataset = _get_dataset_for_user(request, slug, lead_only=True)
    table = table_query(request, sorts=CASE_SORTS, default="imported")
    chosen, _ = case_filters(request.GET, page=True)  # an unknown split or kind is no filter
    rows = dataset_case_rows(dataset=dataset, search=table.search, ordering=table.ordering, **chosen)
    page = Paginator(rows, CASES_PER_PAGE).get_page(request.GET.get("page"))
    filters = request.GET.copy()
    filters.pop("page", None)
    context = {
        "dataset": dataset, "page": page, "category": chosen.get("category", ""), "split": chosen.get("split", ""),
        "table": table, "kind": request.GET.get("kind", "") if "kind" in chosen else "", "kinds": CASE_KINDS,
        "unset": KIND_UNSET,
        "filter_query": filters.urlencode(),
    }
    if request.htmx:
        return render(request, "labeling/dataset_detail.html#case-table", context)
    categories = dataset_categories(dataset=dataset)
    context |= {
        "categories": categories, "case_count": sum(c["n"] for c in categories),
        "splits": Case.Split.values, "rubrics": report_rubrics(dataset=dataset),
        "all_rubrics": project.rubrics.order_by("slug"),
        "redaction_form": RedactionForm(initial={"redact": dataset.redact_kinds}),
        "redaction_events": dataset.events.exclude(kind=DatasetEvent.Kind.POLICIES_SET).select_related("by")[:3],
        "policies_form": PoliciesForm(initial={"policies": dataset.policies}, project=project),
        "policy_events": dataset.events.filter(kind=DatasetEvent.Kind.POLICIES_SET).select_related("by")[:3],
    }
    return render(request, "labeling/dataset_detail.html", context)


@lead_required
@require_POST
def dataset_redaction(request: HttpRequest, project: Project, slug: str) -> HttpResponse:
    """Set what the dataset redacts from incoming cases (`action=save`), or redact the cases it already holds
    with it (`action=apply`). Both are audited."""
    dataset = get_object_or_404(project.datasets, slug=slug)
    back = reverse("labeling:dataset_detail", args=[project.slug, dataset.slug])
    if request.POST.get("action") == "apply":
        try:
            changed = services.dataset_apply_redaction(dataset=dataset, by=request.user)
        except LabelingRefused as refused:
            messages.error(request, str(refused))
        else:
            messages.success(request, f"Redacted the stored cases: {changed} case{pluralize(changed)} changed; "
                                      "their labels stop counting until reviewers confirm them.")
        return redirect(back)
    form = RedactionForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose among the redaction kinds shown.")
        return redirect(back)
    kinds = form.cleaned_data["redact"]
    if services.dataset_set_redaction(dataset=dataset, kinds=kinds, by=request.user):
        what = ", ".join(dataset.redact_kinds) or "nothing"
        messages.success(request, f"Cases coming in now redact {what}. Stored cases are unchanged until you "
                                  "apply the redaction to them.")
    return redirect(back)


@lead_required
@require_POST
def dataset_policies(request: HttpRequest, project: Project, slug: str) -> HttpResponse:
    """Set the policy documents the dataset's cases are about (synthetic cases are written from them), among
    its project's; audited."""
    dataset = get_object_or_404(project.datasets, slug=slug)
    back = reverse("labeling:dataset_detail", args=[project.slug, dataset.slug]) + "#policies"
    form = PoliciesForm(request.POST, project=project)
    if not form.is_valid():
        messages.error(request, "Choose among the policy documents shown.")
        return redirect(back)
    try:
        changed = services.dataset_set_policies(dataset=dataset, slugs=form.cleaned_data["policies"], by=request.user)
    except LabelingRefused as refused:  # a policy written between the page and the post cannot vanish; kept safe
        messages.error(request, str(refused))
        return redirect(back)
    if changed:
        messages.success(request, f"Policy documents of {dataset.slug}: {', '.join(dataset.policies) or 'none'}.")
    return redirect(back)


@lead_required
@require_POST
def dataset_kinds(request: HttpRequest, project: Project, slug: str) -> HttpResponse:
    """Set the calibration kind of the ticked cases, or of every case the filters select (`scope=filtered`).
    The kind is not judged content: no run becomes stale."""
    dataset = get_object_or_404(project.datasets, slug=slug)
    kind = request.POST.get("set_kind", "")
    back = reverse("labeling:dataset_detail", args=[project.slug, dataset.slug])
    query = request.POST.get("filter_query", "")
    refuse_nul(QueryDict(query))  # the filters come back inside a field: the same rule as the page's own query
    back += f"?{QueryDict(query).urlencode()}" if query else ""  # back to the same filters, on our own path
    if kind != KIND_UNSET and kind not in CASE_KINDS:
        messages.error(request, f"Choose a kind: {', '.join(CASE_KINDS)}, or “{KIND_UNSET}” to clear it.")
        return redirect(back)
    if request.POST.get("scope") == "filtered":
        filters = QueryDict(query)
        chosen, _ = case_filters(filters, page=True)
        cases = Case.objects.filter(pk__in=dataset_case_rows(dataset=dataset, search=filters.get("q", "").strip(),
                                                             **chosen).values("pk"))
    else:
        ids = [pk for pk in map(object_id, request.POST.getlist("case")) if pk is not None]
        if not ids:
            messages.error(request, "Tick the cases to set, or choose “every case these filters select”.")
            return redirect(back)
        cases = Case.objects.filter(pk__in=ids)
    changed = services.cases_set_kind(dataset=dataset, cases=cases, kind="" if kind == KIND_UNSET else kind)
    messages.success(request, f"Set the kind of {changed} case{pluralize(changed)} to {kind}.")
    return redirect(back)


@member_required
@require_http_methods(["GET", "POST"])
def dataset_import(request: HttpRequest, project: Project, slug: str) -> HttpResponse:
    """Upload cases (or labels) from JSONL or CSV: all or nothing, every error listed by line."""
    dataset = _get_dataset_for_user(request, slug, lead_only=True)
    kind = request.POST.get("kind")
    case_form = CaseImportForm(request.POST if kind == "cases" else None,
                               request.FILES if kind == "cases" else None, prefix="cases", project=project)
    label_form = LabelImportForm(request.POST if kind == "labels" else None,
                                 request.FILES if kind == "labels" else None, prefix="labels", project=project)
    rejected = None
    form = case_form if kind == "cases" else label_form if kind == "labels" else None
    if form is not None and form.is_valid():
        data = form.cleaned_data
        try:
            if kind == "cases":
                # A humanVerdict column becomes the importing person's labels of the rubric named.
                result = cases_import(dataset=dataset, stream=data["file"], fmt=data["fmt"],
                                      update=data["update"], rubric=data["rubric"], by=request.user)
            else:
                result = labels_import(dataset=dataset, rubric_slug=data["rubric"].slug, stream=data["file"],
                                       fmt=data["fmt"], by=request.user, assign_reviewers=data["assign_reviewers"])
        except ImportRejected as exc:
            rejected = {"kind": kind, "name": data["file"].name, "errors": exc.errors}
        else:
            messages.success(request, f"Imported {data['file'].name}: {result}.")
            return redirect("labeling:dataset_detail", project=project.slug, slug=dataset.slug)
    return render(request, "labeling/dataset_import.html", {
        "dataset": dataset, "case_form": case_form, "label_form": label_form, "rejected": rejected,
        "max_bytes": settings.EVALHUB_IMPORT_MAX_BYTES,
    })


EXPORT_CONTENT_TYPES = {
    Format.JSONL: "application/x-ndjson; charset=utf-8",
    Format.CSV: "text/csv; charset=utf-8",
}


@member_required
def dataset_export(request: HttpRequest, project: Project, slug: str, kind: str) -> StreamingHttpResponse:
    """Download cases or labels in their import format, or the report CSV; streamed, not built in memory.

    Every CSV is safe to open in a spreadsheet (its formulas neutralised) and imports unchanged; `raw_formulas=1`
    writes the cells of cases or labels raw, for a program (labeling.datasets.exporting).
    """
    dataset = _get_dataset_for_user(request, slug, lead_only=True)
    try:
        fmt = Format(request.GET.get("format") or "jsonl")
    except ValueError:
        raise Http404("Unknown format.") from None
    raw = fmt == Format.CSV and request.GET.get("raw_formulas") == "1"
    raw_suffix = "-raw-formulas" if raw else ""
    if kind == "cases":
        pieces = cases_export(dataset=dataset, fmt=fmt, neutralise_formulas=not raw)
        name = f"{dataset.slug}-cases{raw_suffix}.{fmt}"
    elif kind == "labels":
        rubric = get_object_or_404(project.rubrics, slug=request.GET.get("rubric", ""))
        pieces = labels_export(dataset=dataset, rubric=rubric, fmt=fmt, neutralise_formulas=not raw)
        name = f"{dataset.slug}-labels-{rubric.slug}{raw_suffix}.{fmt}"
    elif kind == "report":
        fmt = Format.CSV
        pieces, name = report_export(dataset=dataset), f"{dataset.slug}-report.csv"
    else:
        raise Http404("Unknown export.")
    response = StreamingHttpResponse(pieces, content_type=EXPORT_CONTENT_TYPES[fmt])
    response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=name)
    return response


@member_required
def case_detail(request: HttpRequest, project: Project, case_id: int) -> HttpResponse:
    """One case of the project, readable: leads also see every label per rubric; reviewers never see labels or
    verdicts."""
    case = _get_case_for_user(request, case_id)
    metadata, metadata_more = _first(list((case.metadata or {}).items()))
    context = {
        "case": case,
        "dataset": case.dataset,
        "trace_view": _trace_for_page(case),
        "metadata": [_readable(key, value) for key, value in metadata],
        "metadata_more": metadata_more,
        "label_groups": case_labels_by_rubric(case=case) if request.project_role == Role.LEAD else None,
    }
    return render(request, "labeling/case_detail.html", context)


def _get_case_for_user(request: HttpRequest, case_id: int) -> Case:
    """A case of a dataset of the project the user may see; 404 otherwise (another project's case too), as for
    the dataset itself."""
    datasets = request.project.datasets.visible_to(request.user, role=request.project_role)
    try:
        return case_for_page(case_id=case_id, datasets=datasets)
    except Case.DoesNotExist:
        raise Http404("No such case.") from None


# Entries of a trace or metadata listed on a page; each value is bounded by the json_view filter.
MAX_LISTED = 50


def _first(items: list, limit: int = MAX_LISTED) -> tuple[list, int]:
    """The first `limit` items, and how many more there are (the page says "… N more")."""
    return items[:limit], max(len(items) - limit, 0)


def _readable(key: str, value) -> dict:
    """One free field (metadata) as a person reads it: a string as text, a list of strings (references)
    as a list, a number or a boolean as itself, anything else as indented JSON."""
    if isinstance(value, str):
        return {"key": key, "kind": "text", "value": value}
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        items, more = _first(value)
        return {"key": key, "kind": "list", "value": items, "more": more}
    if not isinstance(value, dict | list):
        return {"key": key, "kind": "scalar", "value": value}
    return {"key": key, "kind": "json", "value": value}


@lead_required
@require_http_methods(["GET", "POST"])
def rubric_create(request: HttpRequest, project: Project) -> HttpResponse:
    form = RubricCreateForm(request.POST or None, project=project)
    if request.method == "POST" and form.is_valid():
        rubric = form.save()
        messages.success(request, f"Rubric {rubric.slug} created as a draft.")
        return redirect("labeling:rubric_list", project=project.slug)
    return render(request, "labeling/rubric_create.html", {"form": form})


@lead_required
@require_http_methods(["GET", "POST"])
def rubric_edit(request: HttpRequest, project: Project, slug: str) -> HttpResponse:
    """Name, criteria and labels per case only: stage, thresholds and fail_closed go through promotion."""
    rubric = get_object_or_404(project.rubrics, slug=slug)
    form = RubricEditForm(request.POST or None, instance=rubric)
    if request.method == "POST" and form.is_valid():
        rubric = form.save(commit=False)
        rubric.updated_at = timezone.now()
        rubric.save(update_fields=[*RubricEditForm.Meta.fields, "updated_at"])
        messages.success(request, f"Rubric {rubric.slug} saved.")
        return redirect("labeling:rubric_list", project=project.slug)
    return render(request, "labeling/rubric_edit.html", {"form": form, "rubric": rubric})


def _trace_for_page(case: Case) -> dict:
    """The trace for a page: tool calls (name, argument, result), sources, context, the rest; values raw
    (the template bounds each with json_view), lists cut at MAX_LISTED."""
    trace = case.trace if isinstance(case.trace, dict) else {}
    calls, calls_more = _first([call for call in trace.get("toolCalls") or [] if isinstance(call, dict)])
    sources, sources_more = _first([str(source) for source in trace.get("retrievedSources") or []])
    known = {"toolCalls", "retrievedSources", "context"}
    other, other_more = _first([(key, value) for key, value in trace.items() if key not in known])
    return {
        "tool_calls": [
            {"name": call.get("name"), "argument": call.get("argument"), "has_argument": "argument" in call,
             "result": call.get("result"), "has_result": "result" in call}
            for call in calls
        ],
        "tool_calls_more": calls_more,
        "sources": sources,
        "sources_more": sources_more,
        "trace_context": trace.get("context") or "",
        "other_trace": dict(other),
        "other_trace_more": other_more,
    }
