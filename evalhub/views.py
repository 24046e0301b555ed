from axes.helpers import get_client_username
from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme

from evalhub.selectors import lead_overview
from judges.estimates.selectors import latest_estimates
from judges.models import Run
from labeling.models import Dataset


def home(request: HttpRequest) -> HttpResponse:
    """Reviewers land on their labeling queues; leads on the overview they start the day from: each
    rubric's stage, evidence, recalibration, CI, the agent's latest estimated pass rate, disputes and labeling,
    and what needs attention first."""
    if not request.user.is_lead:
        return redirect("labeling:queue_start")
    rows, attention = lead_overview()
    estimates = latest_estimates(rubric_ids=[row.rubric.pk for row in rows])
    for row in rows:
        row.promotion.pass_rate = estimates.get(row.rubric.pk)
    return render(
        request,
        "home.html",
        {
            "rows": rows,
            "attention": attention,
            "datasets": Dataset.objects.annotate(case_count=Count("cases")).order_by("slug"),
            "runs": Run.objects.filter(parent__isnull=True).select_related("config__rubric", "dataset")[:8],
        },
    )


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """400: a value the request holds is none evalhub accepts (evalhub/params.py says which); an API gets JSON."""
    reason = str(exception) if exception else ""
    if request.path.startswith("/api/"):  # the APIs' own error shape: {"errors": [{"field", "message"}]}
        field = getattr(exception, "field", None)
        return JsonResponse({"errors": [{"field": field, "message": reason or "Bad request."}]}, status=400)
    return render(request, "400.html", {"reason": reason, "back_url": _back_url(request)}, status=400)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    """403: the page exists and the user may see it, but their role may not do this; the reason is ours."""
    context = {"reason": str(exception) if exception else "", "back_url": _back_url(request)}
    return render(request, "403.html", context, status=403)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """404: no such page, or one the user may not see (the two look alike on purpose: access.py)."""
    return render(request, "404.html", {"request_path": request.path, "back_url": _back_url(request)}, status=404)


def login_locked_out(request: HttpRequest, original_response=None, credentials=None) -> HttpResponse:
    """django-axes' answer to a login refused for too many failures (AXES_LOCKOUT_CALLABLE): why, for how long."""
    context = {
        "username": get_client_username(request, credentials) or "",
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "minutes": int(settings.AXES_COOLOFF_TIME.total_seconds() // 60),
    }
    return render(request, "registration/locked_out.html", context, status=429)


def _back_url(request: HttpRequest) -> str | None:
    """The page the user came from, if it is a page of this site: the error pages' way back."""
    referer = request.headers.get("Referer", "")
    if referer and url_has_allowed_host_and_scheme(
        referer, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return referer
    return None
