"""The typed request every views module imports: django-htmx's middleware sets `request.htmx`; the project doors
(evalhub/access.py) set `request.project` and `request.project_role` on a project's pages."""

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails

from evalhub.models import Project


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails
    project: Project
    project_role: str
    my_projects: list[Project]
