"""The answer to a request that failed unexpectedly (Django's handler500). An API answers JSON, never the HTML
page: 503 with Retry-After while the database or the broker cannot be reached (a client retries later and the CI
command says "server unavailable"), else 500. A page gets the styled 500 page."""

import sys

from django.db import InterfaceError
from django.db import OperationalError as DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import server_error as page_server_error
from kombu.exceptions import OperationalError as BrokerError

RETRY_AFTER_SECONDS = 30  # an outage is a restart or a failover: seconds to a minute


def outage_of(exc: BaseException | None) -> str | None:
    """What is unreachable when `exc` says a service is (the database, the broker), else None. On SQLite a
    write lock held past the timeout ("database is locked") is an outage of the same kind: it passes."""
    if isinstance(exc, DatabaseError | InterfaceError):
        return "the database"
    if isinstance(exc, BrokerError):
        return "the task broker"
    return None


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: called while the exception is being handled, so sys.exc_info() names it."""
    if not request.path.startswith("/api/"):
        return page_server_error(request)
    unreachable = outage_of(sys.exc_info()[1])
    if unreachable is None:
        return JsonResponse({"error": "The server failed to answer this request; it is logged."}, status=500)
    response = JsonResponse({"error": f"The server is unavailable: {unreachable} cannot be reached. Nothing of "
                                      f"this request was kept; retry in {RETRY_AFTER_SECONDS} s."}, status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response
