from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from labeling.models import Dataset, Rubric


def home(request: HttpRequest) -> HttpResponse:
    """Where everyone lands: reviewers see what they may label, leads see the whole project."""
    user = request.user
    datasets = Dataset.objects.all() if user.is_lead else user.assigned_datasets.all()
    return render(
        request,
        "home.html",
        {"datasets": datasets.order_by("slug"), "rubrics": Rubric.objects.order_by("slug")},
    )
