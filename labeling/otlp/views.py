"""The lead's page of what the OTLP receiver refused of a dataset: the exporters do not print the partial
success that names each refused trace, so a team reads here why its traces are missing (docs/otlp.md)."""

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from evalhub.access import lead_required
from evalhub.models import Project
from labeling.otlp.selectors import REFUSALS_DAYS, otlp_refusals, otlp_waiting


@lead_required
@require_GET
def otlp_refused(request: HttpRequest, project: Project, slug: str) -> HttpResponse:
    """GET: the dataset's refusals by day and reason (count, why, when), and the traces waiting now."""
    dataset = get_object_or_404(project.datasets, slug=slug)
    return render(request, "labeling/otlp_refused.html", {
        "project": project, "dataset": dataset, "refusals": otlp_refusals(dataset=dataset),
        "waiting": otlp_waiting(dataset=dataset), "max_waiting": f"{settings.EVALHUB_OTLP_MAX_WAITING:,}",
        "wait_seconds": settings.EVALHUB_OTLP_TRACE_WAIT_SECONDS, "days": REFUSALS_DAYS,
    })
