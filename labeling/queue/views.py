"""The reviewer's pages: the queue (one case at a time, label, skip, undo, progress) and their history.

Any member of the project opens them (evalhub.access.member_required): a queue is a (dataset, rubric) of that
project, the dataset one the member may see, and the rubric the project's own.
"""

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import trigger_client_event

from evalhub.access import member_required
from evalhub.http import HtmxHttpRequest
from evalhub.models import Project
from evalhub.params import object_id_or_404
from evalhub.tables import table_query
from labeling.datasets.views import _trace_for_page
from labeling.models import Case, Dataset, Label, LabelingRefused, Rubric
from labeling.queue import services
from labeling.queue.forms import CaseIdForm, LabelForm, UndoForm
from labeling.queue.selectors import (
    HISTORY_SORTS,
    held_elsewhere,
    labels_history,
    progress_of,
    queue_case,
    queues_for,
    undo_label,
)
from labeling.queue.sitting import Step, sitting_forget, sitting_record, sitting_steps


def _queue_of(request: HtmxHttpRequest, project: Project, slug: str, rubric_slug: str) -> tuple[Dataset, Rubric]:
    """The (dataset, rubric) queue of the project: 404 for a dataset the reviewer is not assigned to, and for a
    rubric or dataset of another project, whatever the slugs (one query each)."""
    datasets = project.datasets.visible_to(request.user, role=request.project_role)
    return get_object_or_404(datasets, slug=slug), get_object_or_404(project.rubrics, slug=rubric_slug)


def _render_queue(
    request: HtmxHttpRequest, dataset: Dataset, rubric: Rubric, *, case: Case | None, back: str = "", partial: bool,
    notice: str = "", refusal: str = "",
) -> HttpResponse:
    """The queue page, or only its case panel for htmx.

    Blind by construction: nothing here reads another reviewer's label or any judgment. The case is
    held for this reviewer already (services.case_serve, or case_claim for one asked for by id).
    """
    context = {
        "dataset": dataset, "rubric": rubric, "case": case, "undo": _undo_label(request, dataset, rubric),
        "back": back, "notice": notice, "refusal": refusal, "mine": case.own_label if case else None,
    }
    if case is not None:
        context["trace_view"] = _trace_for_page(case)
    else:
        # The queue is empty: say so, with the reviewer's own count, and any case left for them that is
        # open in another reviewer's tab (it comes back when that hold ends).
        context["done_count"] = progress_of(dataset=dataset, rubric=rubric, reviewer=request.user).mine
        context["held"] = held_elsewhere(dataset=dataset, rubric=rubric, reviewer=request.user)
    if partial:
        return render(request, "labeling/queue.html#case", context)
    context["progress"] = progress_of(dataset=dataset, rubric=rubric, reviewer=request.user)
    return render(request, "labeling/queue.html", context)


@member_required
def queue_start(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    """Where reviewers pick a dataset (their assigned ones of the project) and a rubric of the project to label."""
    queues = queues_for(project=project, user=request.user, role=request.project_role)
    return render(request, "labeling/queue_start.html", {"queues": queues})


@member_required
@vary_on_headers("HX-Request")
def queue(request: HtmxHttpRequest, project: Project, slug: str, rubric_slug: str) -> HttpResponse:
    """One case at a time: the next in queue order, or ?case=<id> (after an undo, or to revise a label)."""
    dataset, rubric = _queue_of(request, project, slug, rubric_slug)
    case_id = request.GET.get("case", "")
    if case_id:
        case = queue_case(dataset=dataset, rubric=rubric, reviewer=request.user, case_id=object_id_or_404(case_id))
        if case is None:
            raise Http404("No such case in this dataset.")
        services.case_claim(case_id=case.pk, rubric=rubric, reviewer=request.user)
    else:
        case = services.case_serve(dataset=dataset, rubric=rubric, reviewer=request.user)
    back = "history" if request.GET.get("back") == "history" else ""
    return _render_queue(request, dataset, rubric, case=case, back=back, partial=bool(request.htmx))


@member_required
@require_POST
@vary_on_headers("HX-Request")
def queue_label(request: HtmxHttpRequest, project: Project, slug: str, rubric_slug: str) -> HttpResponse:
    """Pass or fail the case shown, then the next case (htmx) or a redirect to it (plain form)."""
    dataset, rubric = _queue_of(request, project, slug, rubric_slug)
    form = LabelForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest("This label could not be read: " + form.errors.as_text())
    data = form.cleaned_data
    # Through the dataset's manager, so the case carries its dataset and the service's project check reads nothing.
    case = get_object_or_404(dataset.cases.only("id", "external_id", "dataset_id"), pk=data["case"])
    try:
        submitted = services.label_submit(
            case=case, rubric=rubric, reviewer=request.user, verdict=data["verdict"], note=data["note"],
            content_hash=data["content_hash"], seen_verdict=data["seen_verdict"],
        )
    except services.LabelChangedElsewhere as changed:
        # The same case again, showing their label as it now is: the next choice is asked, not assumed.
        shown = queue_case(dataset=dataset, rubric=rubric, reviewer=request.user, case_id=case.pk)
        return _render_queue(request, dataset, rubric, case=shown, back=data["back"], refusal=str(changed),
                             partial=bool(request.htmx))
    label = submitted.label
    if submitted.changed:  # this sitting's step, which undo may take back
        sitting_record(request.session, dataset_id=dataset.pk, rubric_id=rubric.pk,
                       step=Step(label_id=label.pk, given_at=label.updated_at, created=submitted.created))
    if data["back"] == "history":
        messages.success(request, f"Your label on {case.external_id} is {label.verdict}.")
        history_url = reverse("labeling:history", args=[project.slug])
        return redirect(f"{history_url}?dataset={dataset.slug}&rubric={rubric.slug}")
    return _next_case_response(request, project, dataset, rubric)


@member_required
@require_POST
@vary_on_headers("HX-Request")
def queue_skip(request: HtmxHttpRequest, project: Project, slug: str, rubric_slug: str) -> HttpResponse:
    """Skip the case shown for now: it comes back after the rest."""
    dataset, rubric = _queue_of(request, project, slug, rubric_slug)
    form = CaseIdForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest("Which case to skip?")
    case = get_object_or_404(dataset.cases.only("id", "dataset_id"), pk=form.cleaned_data["case"])
    services.skip(case=case, rubric=rubric, reviewer=request.user)
    return _next_case_response(request, project, dataset, rubric)


def _next_case_response(request: HtmxHttpRequest, project: Project, dataset: Dataset, rubric: Rubric) -> HttpResponse:
    if not request.htmx:
        return redirect("labeling:queue", project=project.slug, slug=dataset.slug, rubric_slug=rubric.slug)
    # The next case is held in the same step, and the one just answered or skipped is let go.
    case = services.case_serve(dataset=dataset, rubric=rubric, reviewer=request.user)
    response = _render_queue(request, dataset, rubric, case=case, partial=True)
    return trigger_client_event(response, "labeled")  # the progress panel reloads itself


def _undo_step(request: HttpRequest, dataset: Dataset, rubric: Rubric) -> Step | None:
    """This sitting's newest step in this queue: the one `u` takes back (queue.sitting)."""
    steps = sitting_steps(request.session, dataset_id=dataset.pk, rubric_id=rubric.pk)
    return steps[-1] if steps else None


def _undo_label(request: HttpRequest, dataset: Dataset, rubric: Rubric) -> Label | None:
    step = _undo_step(request, dataset, rubric)
    if step is None:
        return None
    return undo_label(label_id=step.label_id, dataset=dataset, rubric=rubric, reviewer=request.user)


@member_required
@require_POST
@vary_on_headers("HX-Request")
def queue_undo(request: HtmxHttpRequest, project: Project, slug: str, rubric_slug: str) -> HttpResponse:
    """Take back this sitting's last label here and show that case again; a repeated undo does nothing."""
    dataset, rubric = _queue_of(request, project, slug, rubric_slug)
    form = UndoForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest("Which label to undo?")
    # Only this sitting's newest step, and only the one the page offered: a repeated or out-of-date undo
    # changes nothing.
    step = _undo_step(request, dataset, rubric)
    case_id, notice, refusal = None, "", ""
    if step is not None and step.label_id == form.cleaned_data["label"]:
        try:
            case_id = services.label_undo(label_id=step.label_id, reviewer=request.user, dataset=dataset,
                                          rubric=rubric, given_at=step.given_at, created=step.created)
        except LabelingRefused as refused:
            refusal = str(refused)
        sitting_forget(request.session, dataset_id=dataset.pk, rubric_id=rubric.pk, step=step)
    if case_id:
        notice = "Your last label is taken back: label this case again."
    if not request.htmx:
        url = reverse("labeling:queue", args=[project.slug, dataset.slug, rubric.slug])
        if notice:
            messages.info(request, notice)
        elif refusal:
            messages.warning(request, refusal)
        return redirect(f"{url}?case={case_id}" if case_id else url)
    if case_id is None:
        case = services.case_serve(dataset=dataset, rubric=rubric, reviewer=request.user)
    else:
        case = queue_case(dataset=dataset, rubric=rubric, reviewer=request.user, case_id=case_id)
        services.case_claim(case_id=case_id, rubric=rubric, reviewer=request.user)
    response = _render_queue(request, dataset, rubric, case=case, partial=True, notice=notice, refusal=refusal)
    return trigger_client_event(response, "labeled")


@member_required
def queue_progress(request: HtmxHttpRequest, project: Project, slug: str, rubric_slug: str) -> HttpResponse:
    """The progress panel alone: htmx reloads it after each label, off the labeling request's path."""
    dataset, rubric = _queue_of(request, project, slug, rubric_slug)
    progress = progress_of(dataset=dataset, rubric=rubric, reviewer=request.user)
    return render(request, "labeling/queue.html#progress", {"dataset": dataset, "rubric": rubric,
                                                            "progress": progress})


HISTORY_PER_PAGE = 50


@member_required
def history(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    """The reviewer's own labels in the project, newest first, each revisable; ?dataset=&rubric= narrow it."""
    dataset = rubric = None
    if slug := request.GET.get("dataset"):
        dataset = get_object_or_404(project.datasets.visible_to(request.user, role=request.project_role), slug=slug)
    if rubric_slug := request.GET.get("rubric"):
        rubric = get_object_or_404(project.rubrics, slug=rubric_slug)
    table = table_query(request, sorts=HISTORY_SORTS, default="-when")
    labels = labels_history(project=project, user=request.user, role=request.project_role, dataset=dataset,
                            rubric=rubric, search=table.search, ordering=table.ordering)
    page = Paginator(labels, HISTORY_PER_PAGE).get_page(request.GET.get("page"))
    filters = request.GET.copy()
    filters.pop("page", None)
    return render(request, "labeling/history.html", {
        "page": page, "dataset": dataset, "rubric": rubric, "filter_query": filters.urlencode(), "table": table,
    })
