from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render

from evalhub.access import lead_required
from evalhub.http import HtmxHttpRequest
from evalhub.models import Project
from judges.export.forms import VerdictExportForm
from judges.models import VerdictExport


@lead_required
def verdict_export(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    """Where the project's verdicts go as OpenTelemetry events (docs/otlp.md, "Verdicts out"): a lead names the
    worker's variables; their values are never asked for, stored or shown."""
    export = VerdictExport.objects.filter(project=project).first() or VerdictExport(project=project)
    form = VerdictExportForm(request.POST or None, instance=export)
    if request.method == "POST" and form.is_valid():
        form.save()
        state = "on" if form.instance.enabled else "off"
        messages.success(request, f"Verdict export saved ({state}): the worker reads {form.instance.endpoint_env}.")
        return redirect("judges:verdict_export", project=project.slug)
    return render(request, "judges/verdict_export.html", {"form": form, "export": export})
