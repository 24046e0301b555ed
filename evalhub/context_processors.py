"""What every page's navigation needs: the project being shown, the user's role in it, and the projects they may
switch to (read only when a page draws the switcher)."""

from django.http import HttpRequest

from evalhub.models import Project, Role


def project(request: HttpRequest) -> dict:
    current = getattr(request, "project", None)
    role = getattr(request, "project_role", None) if current is not None else None
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"project": None, "project_role": None, "is_lead": False}
    return {
        "project": current,
        "project_role": role,
        "is_lead": role == Role.LEAD,
        # The door's list on a project's pages; elsewhere a queryset, read only where a page draws the switcher.
        "my_projects": getattr(request, "my_projects", None) or Project.objects.for_user(user).only("slug", "name"),
    }
