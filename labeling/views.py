from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from evalhub.access import lead_required
from labeling.models import Dataset, Rubric


@lead_required
def dataset_list(request: HttpRequest) -> HttpResponse:
    return render(request, "labeling/dataset_list.html", {"datasets": Dataset.objects.order_by("slug")})


@lead_required
def rubric_list(request: HttpRequest) -> HttpResponse:
    return render(request, "labeling/rubric_list.html", {"rubrics": Rubric.objects.order_by("slug")})
