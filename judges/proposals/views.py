"""Judge improvement pages, for leads (docs/improving.md): the start form with its estimate, the job's page
(progress polled while it works, then the results table), cancel, keep one candidate, discard them all."""

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HTMX_STOP_POLLING

from evalhub.access import lead_required
from evalhub.http import HtmxHttpRequest
from evalhub.models import Project
from evalhub.params import object_id, object_id_or_404
from judges.models import Proposal, ProposalCandidate
from judges.proposals import selectors, services
from judges.proposals.forms import DecisionForm, ProposalForm
from judges.runs.selectors import run_for_page_or_404


def _proposal_or_404(project: Project, proposal_id: int) -> Proposal:
    try:
        return selectors.proposal_for_page(project=project, proposal_id=object_id_or_404(str(proposal_id)))
    except Proposal.DoesNotExist:
        raise Http404("No such proposal.") from None


@lead_required
@require_http_methods(["GET", "POST"])
def proposal_create(request: HtmxHttpRequest, project: Project, run_id: int) -> HttpResponse:
    """The form, with the job's estimate for the fields as they stand (action=estimate asks again);
    starting redirects to the job's page."""
    run = run_for_page_or_404(run_id, project=project)
    form = ProposalForm(request.POST or None)
    estimate, error = None, ""
    values = form.cleaned_data if request.method == "POST" and form.is_valid() else None
    if request.method == "POST" and values is not None and request.POST.get("action") != "estimate":
        try:
            started = services.proposal_start(
                run=run, by=request.user, candidates=values["candidates"], editor_model=values["editor_model"],
                seed=values["seed"], max_cost_usd=values["max_cost_usd"],
            )
        except services.ProposalError as exc:
            error = str(exc)
        else:
            return redirect("judges:proposal_detail", project=project.slug, proposal_id=started.pk)
    values = values or {"candidates": 3, "editor_model": "", "seed": 0}
    if not error:
        try:
            editor = services.editor_for(run=run, editor_model=values["editor_model"])
            estimate = selectors.proposal_estimate(run=run, editor=editor, candidates=values["candidates"],
                                                   seed=values["seed"])
        except ValueError as exc:
            error = str(exc)
    return render(request, "judges/proposals/proposal_create.html", {
        "run": run, "form": form, "estimate": estimate, "error": error,
        "earlier": run.proposals.select_related("created_by").order_by("-pk")[:10],
    })


@lead_required
@require_GET
@vary_on_headers("HX-Request")
def proposal_detail(request: HtmxHttpRequest, project: Project, proposal_id: int) -> HttpResponse:
    """The job: its progress while it works (the partial polls every 2 s; an ended job answers 286), then the
    results table with keep and discard."""
    proposal = _proposal_or_404(project, proposal_id)
    context = _context(proposal)
    if request.htmx:
        response = render(request, "judges/proposals/proposal_detail.html#job", context)
        if proposal.status in services.ENDED:
            response.status_code = HTMX_STOP_POLLING
        return response
    return render(request, "judges/proposals/proposal_detail.html", context)


def _context(proposal: Proposal) -> dict:
    ended = proposal.status in services.ENDED
    candidates = list(selectors.candidates_of(proposal))
    rows = selectors.candidate_rows(proposal=proposal) if candidates else []
    return {
        "proposal": proposal, "ended": ended, "rows": rows, "spent": services.spent_usd(proposal),
        "decision_form": DecisionForm(),
        "decidable": proposal.status == Proposal.Status.FINISHED and not proposal.decision,
        "notes": [row.candidate for row in rows if row.candidate.criteria_note],
    }


@lead_required
@require_POST
def proposal_cancel(request: HtmxHttpRequest, project: Project, proposal_id: int) -> HttpResponse:
    proposal = _proposal_or_404(project, proposal_id)
    try:
        services.proposal_cancel(proposal=proposal, by=request.user)
    except services.ProposalError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Cancelled: its runs stop within about a second; its candidates are discarded.")
    return redirect("judges:proposal_detail", project=project.slug, proposal_id=proposal.pk)


@lead_required
@require_POST
def proposal_keep(request: HtmxHttpRequest, project: Project, proposal_id: int) -> HttpResponse:
    """Keep the candidate named by `candidate` (its id): an ordinary version from now on."""
    proposal = _proposal_or_404(project, proposal_id)
    candidate = ProposalCandidate.objects.filter(pk=object_id(request.POST.get("candidate")) or 0,
                                                 proposal=proposal).first()
    form = DecisionForm(request.POST)
    if candidate is None or not form.is_valid():
        messages.error(request, "Choose one of this job's candidates to keep.")
        return redirect("judges:proposal_detail", project=project.slug, proposal_id=proposal.pk)
    try:
        kept = services.proposal_keep(proposal=proposal, candidate=candidate, by=request.user,
                                      reason=form.cleaned_data["reason"])
    except services.ProposalError as exc:
        messages.error(request, str(exc))
        return redirect("judges:proposal_detail", project=project.slug, proposal_id=proposal.pk)
    messages.success(request, f"Kept v{kept.version}: a candidate like any other version; promotion is unchanged.")
    return redirect("judges:config_detail", project=project.slug, config_id=kept.pk)


@lead_required
@require_POST
def proposal_discard(request: HtmxHttpRequest, project: Project, proposal_id: int) -> HttpResponse:
    proposal = _proposal_or_404(project, proposal_id)
    form = DecisionForm(request.POST)
    try:
        services.proposal_discard(proposal=proposal, by=request.user,
                                  reason=form.cleaned_data["reason"] if form.is_valid() else "")
    except services.ProposalError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Every candidate discarded.")
    return redirect("judges:proposal_detail", project=project.slug, proposal_id=proposal.pk)
