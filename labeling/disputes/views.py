"""Leads' pages of one dataset and rubric: its state, and its disputes (adjudicate, ask for another label).

Only the project's leads open them (evalhub.access.lead_required: 404 to a non-member, a lead of another project
too; 403 to the project's reviewers). The dataset and the rubric are both the project's, whatever the slugs.
"""

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import F, Q
from django.http import HttpResponse, HttpResponseBadRequest, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST
from django.views.decorators.vary import vary_on_headers

from evalhub.access import lead_required
from evalhub.http import HtmxHttpRequest
from evalhub.models import Project
from evalhub.tables import table_query
from labeling.datasets.selectors import CHECKS_TOOL_ARGUMENT
from labeling.datasets.views import _trace_for_page
from labeling.disputes import services
from labeling.disputes.agreement import reviewer_agreement
from labeling.disputes.forms import AdjudicateForm
from labeling.disputes.selectors import (
    ALL,
    DECIDED,
    OPEN,
    cases_with_human_verdict,
    dispute_cases,
    dispute_counts,
    disputes_by_queue,
    reviewer_progress,
    rubric_counts,
    with_dispute_details,
)
from labeling.models import Case, Dataset, LabelingRefused, Rubric


def _pair_of(project: Project, slug: str, rubric_slug: str) -> tuple[Dataset, Rubric]:
    """The project's dataset and rubric (a lead sees every dataset of it): 404 for a slug of another project's."""
    return get_object_or_404(project.datasets, slug=slug), get_object_or_404(project.rubrics, slug=rubric_slug)


@lead_required
def dataset_rubric(request: HtmxHttpRequest, project: Project, slug: str, rubric_slug: str) -> HttpResponse:
    """Leads: one dataset for one rubric — counts, reviewers' agreement, each reviewer's progress."""
    dataset, rubric = _pair_of(project, slug, rubric_slug)
    return render(request, "labeling/dataset_rubric.html", {
        "dataset": dataset, "rubric": rubric,
        "counts": rubric_counts(dataset=dataset, rubric=rubric),
        "agreement": reviewer_agreement(rubric=rubric, dataset_id=dataset.pk),
        "reviewers": reviewer_progress(dataset=dataset, rubric=rubric),
        "rubrics": project.rubrics.order_by("slug"),
    })


@lead_required
def disputes_index(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    """Leads: where labels disagree in the project, per dataset and rubric."""
    return render(request, "labeling/disputes_index.html", {
        "queues": disputes_by_queue(project=project), "datasets": project.datasets.order_by("slug"),
        "rubrics": project.rubrics.order_by("slug"),
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
def disputes(request: HtmxHttpRequest, project: Project, slug: str, rubric_slug: str) -> HttpResponse:
    """Leads: ties and disagreements with every label and note; adjudicate, or ask for another label."""
    dataset, rubric = _pair_of(project, slug, rubric_slug)
    status = request.GET.get("status") if request.GET.get("status") in {OPEN, DECIDED, ALL} else OPEN
    table = table_query(request, sorts=DISPUTE_SORTS, default="ties")
    cases = dispute_cases(dataset=dataset, rubric=rubric, status=status).order_by(*table.ordering)
    if table.search:
        cases = cases.filter(
            Q(external_id__icontains=table.search) | Q(input__icontains=table.search)
            | Q(output__icontains=table.search)
        )
    page = Paginator(cases.annotate(checks_tool_argument=CHECKS_TOOL_ARGUMENT), DISPUTES_PER_PAGE).get_page(
        request.GET.get("page"))
    _with_what_a_decision_needs(page.object_list, rubric=rubric)
    return render(request, "labeling/disputes.html", {
        "dataset": dataset, "rubric": rubric, "page": page, "status": status, "table": table,
        "sort_choices": DISPUTE_SORT_CHOICES, "counts": dispute_counts(dataset=dataset, rubric=rubric),
    })


def _with_what_a_decision_needs(cases: list[Case], *, rubric: Rubric) -> None:
    """Each dispute's labels and adjudication, and its trace as the page shows it (the expectations are
    the case's own fields): a tool-use dispute cannot be decided without them."""
    with_dispute_details(cases, rubric=rubric)
    for case in cases:
        case.trace_view = _trace_for_page(case)


def _dispute_row(
    request: HtmxHttpRequest, project: Project, dataset: Dataset, rubric: Rubric, case_id: int, *, notice: str
) -> HttpResponse:
    """After a lead's action: the dispute's row again with a notice (htmx), or back to the disputes page."""
    if not request.htmx:
        messages.info(request, notice)
        back = request.POST.get("back", "")
        # A path on this site (the page the form was on); anything else, "foo" too, is ignored.
        if not (back.startswith("/") and url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()})):
            back = reverse("labeling:disputes", args=[project.slug, dataset.slug, rubric.slug])
        return HttpResponseRedirect(back)
    case = (dispute_cases(dataset=dataset, rubric=rubric, status=ALL).filter(pk=case_id)
            .annotate(checks_tool_argument=CHECKS_TOOL_ARGUMENT).first())
    if case is None:  # its labels agree now and nobody adjudicated it
        case = cases_with_human_verdict(rubric=rubric, cases=Case.objects.filter(pk=case_id)).annotate(
            checks_tool_argument=CHECKS_TOOL_ARGUMENT).get()
    _with_what_a_decision_needs([case], rubric=rubric)
    # The tabs' counts change with a decision: they come along, swapped out of band.
    status = request.POST.get("status") if request.POST.get("status") in {OPEN, DECIDED, ALL} else OPEN
    return render(request, "labeling/disputes.html#dispute", {
        "dataset": dataset, "rubric": rubric, "case": case, "notice": notice, "oob": True, "status": status,
        "counts": dispute_counts(dataset=dataset, rubric=rubric),
    })


@lead_required
@require_POST
def adjudicate(request: HtmxHttpRequest, project: Project, slug: str, rubric_slug: str, case_id: int) -> HttpResponse:
    """A lead decides a dispute's human verdict; who and when are recorded."""
    dataset, rubric = _pair_of(project, slug, rubric_slug)
    case = get_object_or_404(dataset.cases, pk=case_id)  # carrying its dataset: the service's check reads nothing
    form = AdjudicateForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest("Choose pass or fail.")
    decision = services.adjudicate(case=case, rubric=rubric, verdict=form.cleaned_data["verdict"],
                                   note=form.cleaned_data["note"], by=request.user)
    notice = f"{case.external_id}: adjudicated {decision.verdict}; that is its human verdict now."
    return _dispute_row(request, project, dataset, rubric, case.pk, notice=notice)


@lead_required
@require_POST
def request_label(
    request: HtmxHttpRequest, project: Project, slug: str, rubric_slug: str, case_id: int
) -> HttpResponse:
    """A lead asks for one more label on a case, from a reviewer who has not labeled it."""
    dataset, rubric = _pair_of(project, slug, rubric_slug)
    case = get_object_or_404(dataset.cases, pk=case_id)
    try:
        services.request_another_label(case=case, rubric=rubric, by=request.user,
                                       reason=request.POST.get("reason", ""))
    except LabelingRefused as refused:
        notice = str(refused)
    else:
        notice = f"{case.external_id}: another label is requested; the case is back in reviewers' queues."
    return _dispute_row(request, project, dataset, rubric, case.pk, notice=notice)
