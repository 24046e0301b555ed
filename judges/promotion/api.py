"""The gate config and CI results API, for CI holding a `gates:read` / `results:write` token."""

from django.http import HttpRequest, JsonResponse
from django.urls import reverse

from evalhub.access import bounded_body, gunzipped, method_not_allowed, token_required
from evalhub.models import Scope
from judges.promotion.ci_results import (
    CI_RESULTS_MAX_BYTES,
    CI_RESULTS_MAX_INFLATED,
    CiResultsRejected,
    ci_results_store,
)
from judges.promotion.gate_config import gate_config
from labeling.importing.reading import json_error, parse_json


@token_required(Scope.GATES_READ)
def gates(request: HttpRequest) -> JsonResponse:
    """GET /api/gates: the gate config CI reads (docs/gate.md) of the token's project, as `manage.py export_gates
    --project SLUG`."""
    if request.method != "GET":
        return method_not_allowed("GET")
    return JsonResponse(gate_config(project=request.project), json_dumps_params={"allow_nan": False})


def _error(message: str, status: int) -> JsonResponse:
    return JsonResponse({"errors": [{"field": None, "message": message}]}, status=status)


@token_required(Scope.RESULTS_WRITE)
def ci_results_create(request: HttpRequest) -> JsonResponse:
    """POST /api/ci-results: what `evalhub-gate check --post` sends (plain or gzip JSON); kept per rubric of the
    token's project.

    201 with what was stored, per rubric: its slug, the CiResult's id, its outcome and `url`, the absolute address
    of its page (as the request reached the server: right behind a proxy that forwards Host and the scheme); or
    400 with every error as {"field", "message"} (403 for results of another project than the token's), nothing
    stored then.
    """
    if request.method != "POST":
        return method_not_allowed("POST")
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("identity", "gzip"):
        return _error(f"Content-Encoding {encoding[:40]!r} is not accepted: send gzip or plain JSON.", 415)
    body = bounded_body(request, CI_RESULTS_MAX_BYTES)
    if body is None:
        return _error(f"The body is over the limit of {CI_RESULTS_MAX_BYTES:,} bytes (after gzip); nothing was "
                      "stored. Post fewer cases per check (split the cases file or scope it with --rubric).", 413)
    if encoding == "gzip":
        try:
            unpacked = gunzipped(body, CI_RESULTS_MAX_INFLATED)
        except ValueError as exc:
            return _error(f"The body is not gzip: {exc}", 400)
        if unpacked is None:
            return _error(f"The body unpacks to over {CI_RESULTS_MAX_INFLATED:,} bytes; nothing was stored.", 413)
        body = unpacked
    try:
        payload = parse_json(body.decode("utf-8"))
    except UnicodeDecodeError:
        return JsonResponse({"errors": [{"field": None, "message": "The body is not UTF-8 text."}]}, status=400)
    except ValueError as exc:
        message = f"The body is not JSON: {json_error(exc)}"
        return JsonResponse({"errors": [{"field": None, "message": message}]}, status=400)
    try:
        stored = ci_results_store(project=request.project, payload=payload, token_name=request.api_token.name)
    except CiResultsRejected as rejected:
        return JsonResponse({"errors": rejected.errors}, status=rejected.status)
    return JsonResponse({"stored": [
        {"rubric": result.rubric.slug, "id": result.pk, "outcome": result.outcome,
         "url": request.build_absolute_uri(reverse("judges:promotion_ci_result", kwargs={
             "project": request.project.slug, "slug": result.rubric.slug, "result_id": result.pk}))}
        for result in stored
    ]}, status=201)
