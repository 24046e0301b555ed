from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from evalhub.access import lead_required
from evalhub.http import HtmxHttpRequest
from judges.traffic.forms import TrafficJudgingForm
from judges.traffic.services import traffic_judging_set
from labeling.models import Rubric


@require_POST
@lead_required
def traffic_set(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """Turn traffic judging of a dataset on or off for this rubric (audited), back to its promotion page."""
    rubric = get_object_or_404(Rubric, slug=slug)
    form = TrafficJudgingForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"Traffic judging not changed: {field}: {' '.join(errors)}")
        return redirect("judges:promotion_rubric", slug=rubric.slug)
    data = form.cleaned_data
    traffic_judging_set(rubric=rubric, dataset=data["dataset"], enabled=data["enabled"], reason=data["reason"],
                        by=request.user)
    state = "on" if data["enabled"] else "off"
    messages.success(request, f"Traffic judging of {data['dataset'].slug} is {state} for {rubric.slug}.")
    return redirect("judges:promotion_rubric", slug=rubric.slug)
