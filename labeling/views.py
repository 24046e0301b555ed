import json

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_http_methods
from django.views.decorators.vary import vary_on_headers
from django_htmx.middleware import HtmxDetails

from evalhub.access import lead_required
from labeling.exporting import cases_export, labels_export, report_export, report_rubrics
from labeling.forms import (
    CaseImportForm,
    DatasetCreateForm,
    LabelImportForm,
    RubricCreateForm,
    RubricEditForm,
)
from labeling.importing import Format, ImportRejected, cases_import, labels_import
from labeling.models import Case, Dataset, Rubric
from labeling.selectors import (
    case_for_page,
    case_labels_by_rubric,
    dataset_case_rows,
    dataset_categories,
    datasets_with_counts,
)


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


@lead_required
def dataset_list(request: HttpRequest) -> HttpResponse:
    return render(request, "labeling/dataset_list.html", {"datasets": datasets_with_counts()})


@lead_required
def rubric_list(request: HttpRequest) -> HttpResponse:
    rubrics = Rubric.objects.annotate(label_count=Count("labels")).order_by("slug")
    return render(request, "labeling/rubric_list.html", {"rubrics": rubrics})


# --- Datasets, cases, rubrics, import and export (issue 2) ------------------------------------------


def _get_dataset_for_user(request: HttpRequest, slug: str, *, lead_only: bool = False) -> Dataset:
    """404 for a dataset the user may not see (a reviewer's unassigned one), then 403 on leads' pages.

    The 404 comes first so that a reviewer cannot learn which datasets exist from a 403.
    """
    dataset = get_object_or_404(Dataset, slug=slug)
    user = request.user
    if not user.is_lead:
        if not dataset.reviewers.filter(pk=user.pk).exists():
            raise Http404("No such dataset.")
        if lead_only:
            raise PermissionDenied("Only leads may do this.")
    return dataset


@lead_required
@require_http_methods(["GET", "POST"])
def dataset_create(request: HttpRequest) -> HttpResponse:
    form = DatasetCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        dataset = form.save()
        messages.success(request, f"Dataset {dataset.slug} created. Import its cases.")
        return redirect("labeling:dataset_import", slug=dataset.slug)
    return render(request, "labeling/dataset_create.html", {"form": form})


CASES_PER_PAGE = 50


@vary_on_headers("HX-Request")
def dataset_detail(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """Leads' list of a dataset's cases, 50 a page, filtered by category and split."""
    dataset = _get_dataset_for_user(request, slug, lead_only=True)
    category = request.GET.get("category")
    split = request.GET.get("split") if request.GET.get("split") in Case.Split.values else None
    rows = dataset_case_rows(dataset=dataset, category=category if category else None, split=split)
    page = Paginator(rows, CASES_PER_PAGE).get_page(request.GET.get("page"))
    filters = request.GET.copy()
    filters.pop("page", None)
    context = {
        "dataset": dataset, "page": page, "category": category or "", "split": split or "",
        "filter_query": filters.urlencode(),
    }
    if request.htmx:
        return render(request, "labeling/dataset_detail.html#case-table", context)
    categories = dataset_categories(dataset=dataset)
    context |= {
        "categories": categories, "case_count": sum(c["n"] for c in categories),
        "splits": Case.Split.values, "rubrics": report_rubrics(dataset=dataset),
    }
    return render(request, "labeling/dataset_detail.html", context)


@require_http_methods(["GET", "POST"])
def dataset_import(request: HttpRequest, slug: str) -> HttpResponse:
    """Upload cases (or labels) from JSONL or CSV: all or nothing, every error listed by line."""
    dataset = _get_dataset_for_user(request, slug, lead_only=True)
    kind = request.POST.get("kind")
    case_form = CaseImportForm(request.POST if kind == "cases" else None,
                               request.FILES if kind == "cases" else None, prefix="cases")
    label_form = LabelImportForm(request.POST if kind == "labels" else None,
                                 request.FILES if kind == "labels" else None, prefix="labels")
    rejected = None
    form = case_form if kind == "cases" else label_form if kind == "labels" else None
    if form is not None and form.is_valid():
        data = form.cleaned_data
        try:
            if kind == "cases":
                result = cases_import(dataset=dataset, stream=data["file"], fmt=data["fmt"],
                                      update=data["update"])
            else:
                result = labels_import(dataset=dataset, rubric_slug=data["rubric"].slug, stream=data["file"],
                                       fmt=data["fmt"])
        except ImportRejected as exc:
            rejected = {"kind": kind, "name": data["file"].name, "errors": exc.errors}
        else:
            messages.success(request, f"Imported {data['file'].name}: {result}.")
            return redirect("labeling:dataset_detail", slug=dataset.slug)
    return render(request, "labeling/dataset_import.html", {
        "dataset": dataset, "case_form": case_form, "label_form": label_form, "rejected": rejected,
        "max_bytes": settings.EVALHUB_IMPORT_MAX_BYTES,
    })


EXPORT_CONTENT_TYPES = {
    Format.JSONL: "application/x-ndjson; charset=utf-8",
    Format.CSV: "text/csv; charset=utf-8",
}


def dataset_export(request: HttpRequest, slug: str, kind: str) -> StreamingHttpResponse:
    """Download cases or labels in their import format, or the report CSV; streamed, not built in memory."""
    dataset = _get_dataset_for_user(request, slug, lead_only=True)
    try:
        fmt = Format(request.GET.get("format") or "jsonl")
    except ValueError:
        raise Http404("Unknown format.") from None
    if kind == "cases":
        pieces, name = cases_export(dataset=dataset, fmt=fmt), f"{dataset.slug}-cases.{fmt}"
    elif kind == "labels":
        rubric = get_object_or_404(Rubric, slug=request.GET.get("rubric", ""))
        pieces = labels_export(dataset=dataset, rubric=rubric, fmt=fmt)
        name = f"{dataset.slug}-labels-{rubric.slug}.{fmt}"
    elif kind == "report":
        fmt = Format.CSV
        pieces, name = report_export(dataset=dataset), f"{dataset.slug}-report.csv"
    else:
        raise Http404("Unknown export.")
    response = StreamingHttpResponse(pieces, content_type=EXPORT_CONTENT_TYPES[fmt])
    response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=name)
    return response


def case_detail(request: HttpRequest, case_id: int) -> HttpResponse:
    """One case, readable: leads also see every label per rubric; reviewers never see labels or verdicts."""
    case = _get_case_for_user(request, case_id)
    trace = case.trace if isinstance(case.trace, dict) else {}
    known = {"toolCalls", "retrievedSources", "context"}
    context = {
        "case": case,
        "dataset": case.dataset,
        "tool_calls": [
            {"name": call.get("name"),
             "has_argument": "argument" in call, "argument": _readable(call.get("argument")),
             "has_result": "result" in call, "result": _readable(call.get("result"))}
            for call in trace.get("toolCalls") or [] if isinstance(call, dict)
        ],
        "sources": trace.get("retrievedSources") or [],
        "trace_context": trace.get("context") or "",
        "other_trace": {key: _readable(value) for key, value in trace.items() if key not in known},
        "expected_argument": _readable(case.expected_tool_argument),
        "metadata": {key: _readable(value) for key, value in (case.metadata or {}).items()},
        "label_groups": case_labels_by_rubric(case=case) if request.user.is_lead else None,
    }
    return render(request, "labeling/case_detail.html", context)


def _get_case_for_user(request: HttpRequest, case_id: int) -> Case:
    """A case of a dataset the user may see; 404 otherwise, as for the dataset itself."""
    try:
        case = case_for_page(case_id=case_id)
    except Case.DoesNotExist:
        raise Http404("No such case.") from None
    if not request.user.is_lead and not case.dataset.reviewers.filter(pk=request.user.pk).exists():
        raise Http404("No such case.")
    return case


def _readable(value) -> str:
    """A JSON value as text for a page: strings as they are, anything else as indented JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


@lead_required
@require_http_methods(["GET", "POST"])
def rubric_create(request: HttpRequest) -> HttpResponse:
    form = RubricCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        rubric = form.save()
        messages.success(request, f"Rubric {rubric.slug} created as a draft.")
        return redirect("labeling:rubric_list")
    return render(request, "labeling/rubric_create.html", {"form": form})


@lead_required
@require_http_methods(["GET", "POST"])
def rubric_edit(request: HttpRequest, slug: str) -> HttpResponse:
    """Name, criteria and labels per case only: stage, thresholds and fail_closed go through promotion."""
    rubric = get_object_or_404(Rubric, slug=slug)
    form = RubricEditForm(request.POST or None, instance=rubric)
    if request.method == "POST" and form.is_valid():
        rubric = form.save(commit=False)
        rubric.updated_at = timezone.now()
        rubric.save(update_fields=[*RubricEditForm.Meta.fields, "updated_at"])
        messages.success(request, f"Rubric {rubric.slug} saved.")
        return redirect("labeling:rubric_list")
    return render(request, "labeling/rubric_edit.html", {"form": form, "rubric": rubric})
