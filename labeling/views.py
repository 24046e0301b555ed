from django import forms
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count, F, Q
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, QueryDict, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils import timezone
from django.utils.http import content_disposition_header, url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import trigger_client_event
from django_htmx.middleware import HtmxDetails

from evalhub.access import lead_required
from evalhub.tables import table_query
from labeling import services
from labeling.agreement import reviewer_agreement
from labeling.exporting import cases_export, labels_export, report_export, report_rubrics
from labeling.forms import (
    CaseImportForm,
    DatasetCreateForm,
    LabelImportForm,
    RubricCreateForm,
    RubricEditForm,
)
from labeling.importing import Format, ImportRejected
from labeling.importing.cases import cases_import
from labeling.importing.labels import labels_import
from labeling.importing.reading import CASE_KINDS
from labeling.models import Case, Dataset, Label, Rubric, Verdict
from labeling.overview import (
    ALL,
    DECIDED,
    OPEN,
    dispute_cases,
    dispute_counts,
    disputes_by_queue,
    reviewer_progress,
    rubric_counts,
    with_dispute_details,
)
from labeling.queue import (
    HISTORY_SORTS,
    labels_history,
    last_label,
    progress_of,
    queue_case,
    queues_for,
)
from labeling.selectors import (
    CASE_SORTS,
    case_for_page,
    case_labels_by_rubric,
    cases_with_human_verdict,
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


# --- Datasets, cases, rubrics, import and export --------------------------------------------------


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
    """Leads' list of a dataset's cases, 50 a page, filtered by category and split, searched, sorted."""
    dataset = _get_dataset_for_user(request, slug, lead_only=True)
    table = table_query(request, sorts=CASE_SORTS, default="imported")
    category, split, kind = _case_filters(request.GET)
    rows = dataset_case_rows(dataset=dataset, category=category, split=split, kind=kind,
                             search=table.search, ordering=table.ordering)
    page = Paginator(rows, CASES_PER_PAGE).get_page(request.GET.get("page"))
    filters = request.GET.copy()
    filters.pop("page", None)
    context = {
        "dataset": dataset, "page": page, "category": category or "", "split": split or "", "table": table,
        "kind": request.GET.get("kind", "") if kind is not None else "", "kinds": CASE_KINDS, "unset": KIND_UNSET,
        "filter_query": filters.urlencode(),
    }
    if request.htmx:
        return render(request, "labeling/dataset_detail.html#case-table", context)
    categories = dataset_categories(dataset=dataset)
    context |= {
        "categories": categories, "case_count": sum(c["n"] for c in categories),
        "splits": Case.Split.values, "rubrics": report_rubrics(dataset=dataset),
        "all_rubrics": Rubric.objects.order_by("slug"),
    }
    return render(request, "labeling/dataset_detail.html", context)


# The kind filter's value for cases without a calibration kind.
KIND_UNSET = "unset"


def _case_filters(query) -> tuple[str | None, str | None, str | None]:
    """(category, split, kind) of the case list from a query string; None where not filtered. A kind of
    "unset" selects the cases without one; an unknown split or kind is no filter."""
    category = query.get("category") or None
    split = query.get("split") if query.get("split") in Case.Split.values else None
    kind = query.get("kind")
    kind = "" if kind == KIND_UNSET else kind if kind in CASE_KINDS else None
    return category, split, kind


@lead_required
@require_POST
def dataset_kinds(request: HttpRequest, slug: str) -> HttpResponse:
    """Set the calibration kind of the ticked cases, or of every case the filters select (`scope=filtered`).
    The kind is not judged content: no run becomes stale."""
    dataset = get_object_or_404(Dataset, slug=slug)
    kind = request.POST.get("set_kind", "")
    back = reverse("labeling:dataset_detail", args=[dataset.slug])
    query = request.POST.get("filter_query", "")
    back += f"?{QueryDict(query).urlencode()}" if query else ""  # back to the same filters, on our own path
    if kind != KIND_UNSET and kind not in CASE_KINDS:
        messages.error(request, f"Choose a kind: {', '.join(CASE_KINDS)}, or “{KIND_UNSET}” to clear it.")
        return redirect(back)
    if request.POST.get("scope") == "filtered":
        filters = QueryDict(query)
        category, split, chosen = _case_filters(filters)
        cases = Case.objects.filter(pk__in=dataset_case_rows(dataset=dataset, category=category, split=split,
                                                             kind=chosen, search=filters.get("q", "").strip())
                                    .values("pk"))
    else:
        ids = [int(pk) for pk in request.POST.getlist("case") if pk.isascii() and pk.isdigit() and len(pk) < 12]
        if not ids:
            messages.error(request, "Tick the cases to set, or choose “every case these filters select”.")
            return redirect(back)
        cases = Case.objects.filter(pk__in=ids)
    changed = services.cases_set_kind(dataset=dataset, cases=cases, kind="" if kind == KIND_UNSET else kind)
    messages.success(request, f"Set the kind of {changed} case{pluralize(changed)} to {kind}.")
    return redirect(back)


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
    """Download cases or labels in their import format, or the report CSV; streamed, not built in memory.

    `neutralise_formulas=1` makes a CSV of cases or labels safe to open in a spreadsheet (the report always
    is); such a file is for reading and does not import unchanged.
    """
    dataset = _get_dataset_for_user(request, slug, lead_only=True)
    try:
        fmt = Format(request.GET.get("format") or "jsonl")
    except ValueError:
        raise Http404("Unknown format.") from None
    neutralise = fmt == Format.CSV and request.GET.get("neutralise_formulas") == "1"
    for_reading = "-for-reading" if neutralise else ""
    if kind == "cases":
        pieces = cases_export(dataset=dataset, fmt=fmt, neutralise_formulas=neutralise)
        name = f"{dataset.slug}-cases{for_reading}.{fmt}"
    elif kind == "labels":
        rubric = get_object_or_404(Rubric, slug=request.GET.get("rubric", ""))
        pieces = labels_export(dataset=dataset, rubric=rubric, fmt=fmt, neutralise_formulas=neutralise)
        name = f"{dataset.slug}-labels-{rubric.slug}{for_reading}.{fmt}"
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
    metadata, metadata_more = _first(list((case.metadata or {}).items()))
    context = {
        "case": case,
        "dataset": case.dataset,
        **_trace_for_page(case),
        "metadata": [_readable(key, value) for key, value in metadata],
        "metadata_more": metadata_more,
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


# --- Labeling: the reviewer's queue and history; leads' overview and disputes -------------------


class LabelForm(forms.Form):
    """One verdict on the case shown; content_hash is the content the reviewer saw."""

    case = forms.IntegerField(min_value=1)
    content_hash = forms.RegexField(regex=r"^[0-9a-f]{64}$")
    verdict = forms.ChoiceField(choices=Verdict.choices)
    note = forms.CharField(required=False, max_length=5000)
    back = forms.ChoiceField(choices=[("", "queue"), ("history", "history")], required=False)


class CaseIdForm(forms.Form):
    case = forms.IntegerField(min_value=1)


class UndoForm(forms.Form):
    label = forms.IntegerField(min_value=1)


class AdjudicateForm(forms.Form):
    verdict = forms.ChoiceField(choices=Verdict.choices)
    note = forms.CharField(required=False, max_length=5000)


def _queue_of(request: HttpRequest, slug: str, rubric_slug: str) -> tuple[Dataset, Rubric]:
    """The (dataset, rubric) queue: 404 for a dataset the reviewer is not assigned to (one query each)."""
    user = request.user
    datasets = Dataset.objects.all() if user.is_lead else Dataset.objects.filter(reviewers=user)
    return get_object_or_404(datasets, slug=slug), get_object_or_404(Rubric, slug=rubric_slug)


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


def _render_queue(
    request: HtmxHttpRequest, dataset: Dataset, rubric: Rubric, *, case: Case | None, undo: Label | None,
    back: str = "", partial: bool, notice: str = "",
) -> HttpResponse:
    """The queue page, or only its case panel for htmx.

    Blind by construction: nothing here reads another reviewer's label or any judgment. The case is
    held for this reviewer already (services.case_serve, or case_claim for one asked for by id).
    """
    context = {
        "dataset": dataset, "rubric": rubric, "case": case, "undo": undo, "back": back, "notice": notice,
        "mine": case.own_label if case else None,
    }
    if case is not None:
        context |= _trace_for_page(case)
    else:
        # The queue is empty: say so, with the reviewer's own count.
        context["done_count"] = progress_of(dataset=dataset, rubric=rubric, reviewer=request.user).mine
    if partial:
        return render(request, "labeling/queue.html#case", context)
    context["progress"] = progress_of(dataset=dataset, rubric=rubric, reviewer=request.user)
    return render(request, "labeling/queue.html", context)


def queue_start(request: HttpRequest) -> HttpResponse:
    """Where reviewers pick a dataset (their assigned ones) and a rubric to label."""
    return render(request, "labeling/queue_start.html", {"queues": queues_for(user=request.user)})


@vary_on_headers("HX-Request")
def queue(request: HtmxHttpRequest, slug: str, rubric_slug: str) -> HttpResponse:
    """One case at a time: the next in queue order, or ?case=<id> (after an undo, or to revise a label)."""
    dataset, rubric = _queue_of(request, slug, rubric_slug)
    case_id = request.GET.get("case", "")
    if case_id:
        case = None
        if case_id.isdigit():
            case = queue_case(dataset=dataset, rubric=rubric, reviewer=request.user, case_id=int(case_id))
        if case is None:
            raise Http404("No such case in this dataset.")
        services.case_claim(case_id=case.pk, rubric=rubric, reviewer=request.user)
    else:
        case = services.case_serve(dataset=dataset, rubric=rubric, reviewer=request.user)
    undo = last_label(dataset=dataset, rubric=rubric, reviewer=request.user)
    back = "history" if request.GET.get("back") == "history" else ""
    return _render_queue(request, dataset, rubric, case=case, undo=undo, back=back, partial=bool(request.htmx))


@require_POST
@vary_on_headers("HX-Request")
def queue_label(request: HtmxHttpRequest, slug: str, rubric_slug: str) -> HttpResponse:
    """Pass or fail the case shown, then the next case (htmx) or a redirect to it (plain form)."""
    dataset, rubric = _queue_of(request, slug, rubric_slug)
    form = LabelForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest("This label could not be read: " + form.errors.as_text())
    data = form.cleaned_data
    case = get_object_or_404(Case.objects.only("id", "external_id", "dataset_id"), pk=data["case"], dataset=dataset)
    label = services.label_submit(
        case=case, rubric=rubric, reviewer=request.user, verdict=data["verdict"], note=data["note"],
        content_hash=data["content_hash"],
    )
    label.case = case
    if data["back"] == "history":
        messages.success(request, f"Your label on {case.external_id} is {label.verdict}.")
        return redirect(f"{reverse('labeling:history')}?dataset={dataset.slug}&rubric={rubric.slug}")
    return _next_case_response(request, dataset, rubric, undo=label)


@require_POST
@vary_on_headers("HX-Request")
def queue_skip(request: HtmxHttpRequest, slug: str, rubric_slug: str) -> HttpResponse:
    """Skip the case shown for now: it comes back after the rest."""
    dataset, rubric = _queue_of(request, slug, rubric_slug)
    form = CaseIdForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest("Which case to skip?")
    case = get_object_or_404(Case.objects.only("id", "dataset_id"), pk=form.cleaned_data["case"], dataset=dataset)
    services.skip(case=case, rubric=rubric, reviewer=request.user)
    undo = last_label(dataset=dataset, rubric=rubric, reviewer=request.user)
    return _next_case_response(request, dataset, rubric, undo=undo)


def _next_case_response(request: HtmxHttpRequest, dataset: Dataset, rubric: Rubric, *, undo: Label | None):
    if not request.htmx:
        return redirect("labeling:queue", slug=dataset.slug, rubric_slug=rubric.slug)
    # The next case is held in the same step, and the one just answered or skipped is let go.
    case = services.case_serve(dataset=dataset, rubric=rubric, reviewer=request.user)
    response = _render_queue(request, dataset, rubric, case=case, undo=undo, partial=True)
    return trigger_client_event(response, "labeled")  # the progress panel reloads itself


@require_POST
@vary_on_headers("HX-Request")
def queue_undo(request: HtmxHttpRequest, slug: str, rubric_slug: str) -> HttpResponse:
    """Take back the reviewer's last label here and show that case again; a repeated undo does nothing."""
    dataset, rubric = _queue_of(request, slug, rubric_slug)
    form = UndoForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest("Which label to undo?")
    case_id = services.label_undo(label_id=form.cleaned_data["label"], reviewer=request.user, dataset=dataset,
                                  rubric=rubric)
    notice = "Your last label is taken back: label this case again." if case_id else ""
    if not request.htmx:
        url = reverse("labeling:queue", args=[dataset.slug, rubric.slug])
        if notice:
            messages.info(request, notice)
        return redirect(f"{url}?case={case_id}" if case_id else url)
    if case_id is None:
        case = services.case_serve(dataset=dataset, rubric=rubric, reviewer=request.user)
    else:
        case = queue_case(dataset=dataset, rubric=rubric, reviewer=request.user, case_id=case_id)
        services.case_claim(case_id=case_id, rubric=rubric, reviewer=request.user)
    undo = last_label(dataset=dataset, rubric=rubric, reviewer=request.user)
    response = _render_queue(request, dataset, rubric, case=case, undo=undo, partial=True, notice=notice)
    return trigger_client_event(response, "labeled")


def queue_progress(request: HtmxHttpRequest, slug: str, rubric_slug: str) -> HttpResponse:
    """The progress panel alone: htmx reloads it after each label, off the labeling request's path."""
    dataset, rubric = _queue_of(request, slug, rubric_slug)
    progress = progress_of(dataset=dataset, rubric=rubric, reviewer=request.user)
    return render(request, "labeling/queue.html#progress", {"dataset": dataset, "rubric": rubric,
                                                            "progress": progress})


HISTORY_PER_PAGE = 50


def history(request: HttpRequest) -> HttpResponse:
    """The reviewer's own labels, newest first, each revisable; ?dataset=&rubric= narrow it."""
    dataset = rubric = None
    if slug := request.GET.get("dataset"):
        dataset = _get_dataset_for_user(request, slug)
    if rubric_slug := request.GET.get("rubric"):
        rubric = get_object_or_404(Rubric, slug=rubric_slug)
    table = table_query(request, sorts=HISTORY_SORTS, default="-when")
    labels = labels_history(user=request.user, dataset=dataset, rubric=rubric, search=table.search,
                            ordering=table.ordering)
    page = Paginator(labels, HISTORY_PER_PAGE).get_page(request.GET.get("page"))
    filters = request.GET.copy()
    filters.pop("page", None)
    return render(request, "labeling/history.html", {
        "page": page, "dataset": dataset, "rubric": rubric, "filter_query": filters.urlencode(), "table": table,
    })


@lead_required
def dataset_rubric(request: HttpRequest, slug: str, rubric_slug: str) -> HttpResponse:
    """Leads: one dataset for one rubric — counts, reviewers' agreement, each reviewer's progress."""
    dataset = _get_dataset_for_user(request, slug, lead_only=True)
    rubric = get_object_or_404(Rubric, slug=rubric_slug)
    return render(request, "labeling/dataset_rubric.html", {
        "dataset": dataset, "rubric": rubric,
        "counts": rubric_counts(dataset=dataset, rubric=rubric),
        "agreement": reviewer_agreement(rubric=rubric, dataset_id=dataset.pk),
        "reviewers": reviewer_progress(dataset=dataset, rubric=rubric),
        "rubrics": Rubric.objects.order_by("slug"),
    })


@lead_required
def disputes_index(request: HttpRequest) -> HttpResponse:
    """Leads: where labels disagree, per dataset and rubric."""
    return render(request, "labeling/disputes_index.html", {
        "queues": disputes_by_queue(), "datasets": Dataset.objects.order_by("slug"),
        "rubrics": Rubric.objects.order_by("slug"),
    })


DISPUTES_PER_PAGE = 25
# The disputes' orders (evalhub.tables): ties (no verdict) first, by case id, most labels first.
DISPUTE_SORTS = {
    "ties": (F("human_verdict").asc(nulls_first=True), "pk"),
    "case": ("external_id", "pk"),
    "labels": ("label_count", "pk"),
}
DISPUTE_SORT_CHOICES = [("ties", "ties first"), ("case", "case id"), ("-labels", "most labels first")]


@lead_required
@vary_on_headers("HX-Request")
def disputes(request: HtmxHttpRequest, slug: str, rubric_slug: str) -> HttpResponse:
    """Leads: ties and disagreements with every label and note; adjudicate, or ask for another label."""
    dataset = _get_dataset_for_user(request, slug, lead_only=True)
    rubric = get_object_or_404(Rubric, slug=rubric_slug)
    status = request.GET.get("status") if request.GET.get("status") in {OPEN, DECIDED, ALL} else OPEN
    table = table_query(request, sorts=DISPUTE_SORTS, default="ties")
    cases = dispute_cases(dataset=dataset, rubric=rubric, status=status).order_by(*table.ordering)
    if table.search:
        cases = cases.filter(
            Q(external_id__icontains=table.search) | Q(input__icontains=table.search)
            | Q(output__icontains=table.search)
        )
    page = Paginator(cases, DISPUTES_PER_PAGE).get_page(request.GET.get("page"))
    with_dispute_details(page.object_list, rubric=rubric)
    return render(request, "labeling/disputes.html", {
        "dataset": dataset, "rubric": rubric, "page": page, "status": status, "table": table,
        "sort_choices": DISPUTE_SORT_CHOICES, "counts": dispute_counts(dataset=dataset, rubric=rubric),
    })


def _dispute_row(
    request: HtmxHttpRequest, dataset: Dataset, rubric: Rubric, case_id: int, *, notice: str
) -> HttpResponse:
    """After a lead's action: the dispute's row again with a notice (htmx), or back to the disputes page."""
    if not request.htmx:
        messages.info(request, notice)
        back = request.POST.get("back", "")
        if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
            back = reverse("labeling:disputes", args=[dataset.slug, rubric.slug])
        return redirect(back)
    case = dispute_cases(dataset=dataset, rubric=rubric, status=ALL).filter(pk=case_id).first()
    if case is None:  # its labels agree now and nobody adjudicated it
        case = cases_with_human_verdict(rubric=rubric, cases=Case.objects.filter(pk=case_id)).get()
    with_dispute_details([case], rubric=rubric)
    # The tabs' counts change with a decision: they come along, swapped out of band.
    status = request.POST.get("status") if request.POST.get("status") in {OPEN, DECIDED, ALL} else OPEN
    return render(request, "labeling/disputes.html#dispute", {
        "dataset": dataset, "rubric": rubric, "case": case, "notice": notice, "oob": True, "status": status,
        "counts": dispute_counts(dataset=dataset, rubric=rubric),
    })


@lead_required
@require_POST
def adjudicate(request: HtmxHttpRequest, slug: str, rubric_slug: str, case_id: int) -> HttpResponse:
    """A lead decides a dispute's human verdict; who and when are recorded."""
    dataset = _get_dataset_for_user(request, slug, lead_only=True)
    rubric = get_object_or_404(Rubric, slug=rubric_slug)
    case = get_object_or_404(Case, pk=case_id, dataset=dataset)
    form = AdjudicateForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest("Choose pass or fail.")
    decision = services.adjudicate(case=case, rubric=rubric, verdict=form.cleaned_data["verdict"],
                                   note=form.cleaned_data["note"], by=request.user)
    notice = f"{case.external_id}: adjudicated {decision.verdict}; that is its human verdict now."
    return _dispute_row(request, dataset, rubric, case.pk, notice=notice)


@lead_required
@require_POST
def request_label(request: HtmxHttpRequest, slug: str, rubric_slug: str, case_id: int) -> HttpResponse:
    """A lead asks for one more label on a case, from a reviewer who has not labeled it."""
    dataset = _get_dataset_for_user(request, slug, lead_only=True)
    rubric = get_object_or_404(Rubric, slug=rubric_slug)
    case = get_object_or_404(Case, pk=case_id, dataset=dataset)
    try:
        services.request_another_label(case=case, rubric=rubric, by=request.user,
                                       reason=request.POST.get("reason", ""))
    except services.LabelingRefused as refused:
        notice = str(refused)
    else:
        notice = f"{case.external_id}: another label is requested; the case is back in reviewers' queues."
    return _dispute_row(request, dataset, rubric, case.pk, notice=notice)
