"""The bias probes of a run, for leads: start them, and the panel of the run's report that follows them.

The panel is rendered inside the report (judges/calibration/report.html includes
judges/probes/_probes.html); these views
serve its htmx side: a POST that starts probes and answers with the panel, and a GET the panel polls
while a probe is at work (286 stops the polling once none is).
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HTMX_STOP_POLLING

from evalhub.access import lead_required
from evalhub.http import HtmxHttpRequest
from evalhub.models import Project
from judges.models import Run
from judges.probes.selectors import probe_panel
from judges.probes.services import probes_start
from judges.runs import selectors
from judges.runs.banners import live_message
from judges.runs.services import RunError


def _report_url(project: Project, run: Run) -> str:
    return reverse("judges:run_report", args=[project.slug, run.pk]) + "#probes"


def _panel(request: HttpRequest, run: Run, *, error: str = "", started: list[Run] | None = None) -> HttpResponse:
    panel = probe_panel(run=run)
    context = {"probes": panel, "probe_error": error, "started": started}
    response = render(request, "judges/probes/_probes.html", context)
    if not panel.unfinished and request.method == "GET":
        response.status_code = HTMX_STOP_POLLING  # nothing left to follow
    return response


@lead_required
@require_POST
def probes_create(request: HtmxHttpRequest, project: Project, run_id: int) -> HttpResponse:
    """Start the chosen probes (`kinds`) of a finished run; the panel (htmx) or the report follows them."""
    run = selectors.run_for_page_or_404(run_id, project=project)
    try:
        started = probes_start(run=run, kinds=request.POST.getlist("kinds"), by=request.user)
    except RunError as exc:
        if request.htmx:
            return _panel(request, run, error=str(exc))
        messages.error(request, str(exc))
        return redirect(_report_url(project, run))
    if request.htmx:
        return _panel(request, run, started=started)
    names = ", ".join(f"{probe.probe} (run {probe.pk})" for probe in started)
    live_message(request, f"Probes queued: {names}.", started)
    return redirect(_report_url(project, run))


@lead_required
@require_GET
@vary_on_headers("HX-Request")
def probes_panel(request: HtmxHttpRequest, project: Project, run_id: int) -> HttpResponse:
    """The panel, polled while a probe is at work; without htmx, the report where the panel lives."""
    run = selectors.run_for_page_or_404(run_id, project=project)
    if not request.htmx:
        return redirect(_report_url(project, run))
    return _panel(request, run)
