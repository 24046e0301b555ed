"""The typed request every views module imports: django-htmx's middleware sets `request.htmx`."""

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails
