"""The drift check's button on a rubric's promotion page: a lead starts the check now, without waiting for
the schedule. The page itself (judges.promotion.views) shows the checks over time."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from evalhub.access import lead_required
from evalhub.models import Project
from judges.drift.services import drift_start
from judges.promotion.selectors import evidence_for
from judges.runs.banners import live_message


@lead_required
@require_POST
def drift_now(request: HttpRequest, project: Project, slug: str) -> HttpResponse:
    rubric = get_object_or_404(project.rubrics, slug=slug)
    if evidence_for(rubric=rubric) is None:
        messages.error(request, f"{rubric.slug} is not promoted: there is no evidence to check for drift.")
    elif checks := drift_start(rubric_ids=[rubric.pk], by=request.user):
        live_message(request, f"Drift check of {rubric.slug} started: its figures appear here when it finishes.",
                     [check.run for check in checks])
    else:
        messages.info(request, f"A drift check of {rubric.slug} is already at work (or its dataset has no cases).")
    return redirect("judges:promotion_rubric", project=project.slug, slug=rubric.slug)
