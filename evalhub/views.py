from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from judges.models import Run
from labeling.models import Dataset, Rubric


def home(request: HttpRequest) -> HttpResponse:
    """Reviewers land on their labeling queues; leads on an overview of the whole project."""
    if not request.user.is_lead:
        return redirect("labeling:queue_start")
    return render(
        request,
        "home.html",
        {
            "datasets": Dataset.objects.annotate(case_count=Count("cases")).order_by("slug"),
            "rubrics": Rubric.objects.order_by("slug"),
            "runs": Run.objects.select_related("config__rubric", "dataset")[:8],
        },
    )
