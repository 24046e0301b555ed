"""Synthetic cases' pages: the form (also on the dataset page) and a job's page, polled while it works."""

from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HTMX_STOP_POLLING

from evalhub.access import lead_required
from evalhub.http import HtmxHttpRequest
from evalhub.models import Project
from judges.models import SynthesisJob
from judges.synthetic.forms import SynthesisForm
from judges.synthetic.selectors import dataset_synthesis_jobs
from judges.synthetic.services import SynthesisError, synthesis_editor, synthesis_start


@lead_required
@require_http_methods(["GET", "POST"])
def synthesis_create(request: HtmxHttpRequest, project: Project, slug: str) -> HttpResponse:
    """Ask the editor for synthetic cases of a dataset: the job is queued, and its page follows it."""
    dataset = get_object_or_404(project.datasets, slug=slug)
    form = SynthesisForm(request.POST or None, dataset=dataset)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            editor = synthesis_editor(project=project, config=form.editor(), model=data["editor_model"])
            job = synthesis_start(dataset=dataset, n=data["n"], types=data["types"], editor=editor,
                                  policies=data["policies"], from_failed_dev=data["from_failed_dev"],
                                  seed=data["seed"], by=request.user)
        except SynthesisError as refused:
            form.add_error(None, str(refused))
        else:
            return redirect("judges:synthesis_detail", project=project.slug, job_id=job.pk)
    return render(request, "judges/synthetic/synthesis_create.html", {
        "dataset": dataset, "form": form, "jobs": dataset_synthesis_jobs(dataset=dataset),
    })


@lead_required
@vary_on_headers("HX-Request")
def synthesis_detail(request: HtmxHttpRequest, project: Project, job_id: int) -> HttpResponse:
    """A job: what it asked for, and once done what it wrote, dropped and cost; its partial is polled until
    then (286 stops the polling). Another project's job is 404."""
    job = get_object_or_404(SynthesisJob.objects.select_related("dataset", "created_by"), pk=job_id,
                            dataset__project=project)
    context = {"job": job, "dataset": job.dataset, "stand_in": _stand_in(job.editor)}
    if request.htmx:
        response = render(request, "judges/synthetic/synthesis_detail.html#progress", context)
        if job.done:
            response.status_code = HTMX_STOP_POLLING
        return response
    return render(request, "judges/synthetic/synthesis_detail.html", context)


def _stand_in(editor: dict) -> bool:
    """The editor is the scripted stand-in (as the demo's is): the page says so, so nobody takes its cases
    for a model's."""
    return any(str(editor.get(key) or "").startswith("stand-in") for key in ("model", "model_family"))
