from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from evalhub.access import lead_required
from evalhub.http import HtmxHttpRequest
from evalhub.models import Project
from judges.traffic.forms import TrafficJudgingForm
from judges.traffic.services import TrafficRefused, traffic_judging_set


@lead_required
@require_POST
def traffic_set(request: HtmxHttpRequest, project: Project, slug: str) -> HttpResponse:
    """Turn traffic judging of a dataset on or off for this rubric (audited), back to its promotion page."""
    rubric = get_object_or_404(project.rubrics, slug=slug)
    form = TrafficJudgingForm(request.POST, project=project)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"Traffic judging not changed: {field}: {' '.join(errors)}")
        return redirect("judges:promotion_rubric", project=project.slug, slug=rubric.slug)
    data = form.cleaned_data
    try:
        traffic_judging_set(rubric=rubric, dataset=data["dataset"], enabled=data["enabled"], reason=data["reason"],
                            by=request.user)
    except TrafficRefused as refused:
        messages.error(request, f"Traffic judging not changed: {refused}")
        return redirect("judges:promotion_rubric", project=project.slug, slug=rubric.slug)
    state = "on" if data["enabled"] else "off"
    messages.success(request, f"Traffic judging of {data['dataset'].slug} is {state} for {rubric.slug}.")
    return redirect("judges:promotion_rubric", project=project.slug, slug=rubric.slug)
