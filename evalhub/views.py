from axes.helpers import get_client_username
from django.conf import settings
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme

from evalhub.access import member_required
from evalhub.http import HtmxHttpRequest
from evalhub.members.forms import ProjectCreateForm
from evalhub.members.selectors import invitations_for, projects_for_picker
from evalhub.models import Project, Role
from evalhub.selectors import lead_overview
from judges.estimates.selectors import latest_estimates
from judges.monitoring.selectors import monitors_with_latest
from judges.models import Run


def home(request: HttpRequest) -> HttpResponse:
    """A user with one project lands in it; with several (or none, or invitations waiting) they pick here. The
    instance admin sees every project and creates new ones."""
    projects = projects_for_picker(request.user)
    invitations = invitations_for(request.user)
    if len(projects) == 1 and not invitations and not request.user.is_superuser:
        return redirect("project_home", project=projects[0].slug)
    context = {
        "projects": projects,
        "invitations": invitations,
        "project_form": ProjectCreateForm() if request.user.is_superuser else None,
    }
    return render(request, "projects.html", context)


@member_required
def project_home(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    """Reviewers land on their labeling queues; leads on the overview they start the day from: each of the
    project's rubrics' stage, evidence, recalibration, CI, the agent's latest estimated pass rate, disputes and
    labeling, and what needs attention first."""
    if request.project_role != Role.LEAD:
        return redirect("labeling:queue_start", project=project.slug)
    rows, attention = lead_overview(project=project)
    estimates = latest_estimates(rubric_ids=[row.rubric.pk for row in rows])
    for row in rows:
        row.promotion.pass_rate = estimates.get(row.rubric.pk)
    return render(
        request,
        "home.html",
        {
            "rows": rows,
            "attention": attention,
            "datasets": project.datasets.annotate(case_count=Count("cases")).order_by("slug"),
            "runs": Run.objects.filter(parent__isnull=True, dataset__project=project)
            .select_related("config__rubric", "dataset")[:8],
            "monitors": monitors_with_latest(project=project),
        },
    )


def old_page(request: HttpRequest, path: str) -> HttpResponse:
    """A page's URL from before projects (/runs/12/): redirected to the same page of the one project the user
    may open, so bookmarks of a single-team install keep working; 404 where that project is not one."""
    projects = Project.objects.for_user(request.user)[:2]
    if len(projects) != 1:
        raise Http404("Pages live under their project now: open it from the home page.")
    query = request.META.get("QUERY_STRING", "")
    target = f"/p/{projects[0].slug}/{path}"
    return redirect(f"{target}?{query}" if query else target)


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
