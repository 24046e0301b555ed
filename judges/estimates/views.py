"""Drawing a run's audit sample from its page (leads only); the figures are shown on the run page."""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from evalhub.access import lead_required
from evalhub.models import Project
from judges.estimates.forms import AuditSampleForm
from judges.estimates.services import AuditSampleError, audit_sample_draw
from judges.runs.selectors import run_for_page_or_404


@lead_required
@require_POST
def audit_sample_create(request: HttpRequest, project: Project, run_id: int) -> HttpResponse:
    run = run_for_page_or_404(run_id, project=project)
    form = AuditSampleForm(request.POST)
    if not form.is_valid():
        problems = "; ".join(f"{form.fields[name].label or name}: {' '.join(errors)}"
                             for name, errors in form.errors.items())
        messages.error(request, f"No cases drawn: {problems}")
        return redirect("judges:run_detail", project=project.slug, run_id=run.pk)
    try:
        drawn = audit_sample_draw(run=run, size=form.cleaned_data["size"], method=form.cleaned_data["method"],
                                  by=request.user)  # type: ignore[arg-type]
    except AuditSampleError as error:
        messages.error(request, f"No cases drawn: {error}")
    else:
        count = len(drawn.external_ids)
        messages.success(request, f"{count} case{'s' if count != 1 else ''} drawn: reviewers of "
                         f"{run.dataset.slug} get them first in the {run.config.rubric.slug} queue.")
    return redirect("judges:run_detail", project=project.slug, run_id=run.pk)
