"""The CI runs API: `evalhub-gate check --post-cases` posts what it judged, a chunk per request, and reads back
a base ref's verdicts (a token with cases:write and results:write)."""

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse

from evalhub.access import bounded_body, token_required
from evalhub.models import Scope
from judges.runs.ci_cases import CiCasesRejected, ci_cases_store
from judges.runs.selectors import ci_run_verdicts
from labeling.importing.reading import json_error, parse_json


def _errors(status: int, message: str) -> JsonResponse:
    return JsonResponse({"errors": [{"index": None, "field": None, "message": message}]}, status=status)


@token_required(Scope.CASES_WRITE.value, Scope.RESULTS_WRITE.value)
def ci_runs(request: HttpRequest, slug: str) -> HttpResponse:
    """/api/datasets/<slug>/ci-runs: POST one chunk of judged cases; GET ?ref=&config_hash= a CI run's verdicts.

    POST answers 201 with the run, what became of the cases and `queue_url`, the absolute address of the labelling
    queue of this dataset and the chunk's rubric (where the posted cases are labelled); or 400 (404 for an unknown
    judge, 409 for repeats that differ from the ref's first post) with every error as {"index", "field",
    "message"}: nothing of the chunk is written then.
    """
    dataset = request.project.datasets.filter(slug=slug).first()  # the token's project's: another's is unknown here
    if dataset is None:
        return _errors(404, f"No dataset {slug!r}: create it in evalhub first.")
    if request.method == "GET":
        ref, config_hash = request.GET.get("ref", ""), request.GET.get("config_hash", "")
        if not ref or not config_hash:
            return _errors(400, "Give ref and config_hash.")
        return JsonResponse(ci_run_verdicts(dataset=dataset, ref=ref, config_hash=config_hash))
    if request.method != "POST":
        response = JsonResponse({"error": "Use POST to post judged cases, GET to read a CI run's verdicts."},
                                status=405)
        response["Allow"] = "GET, POST"
        return response
    limit = settings.EVALHUB_IMPORT_MAX_BYTES
    body = bounded_body(request, limit)
    if body is None:
        return _errors(413, f"The body is over the limit of {limit:,} bytes: send smaller chunks.")
    try:
        payload = parse_json(body.decode("utf-8"))
    except UnicodeDecodeError:
        return _errors(400, "The body is not UTF-8 text.")
    except ValueError as exc:
        return _errors(400, f"The body is not JSON: {json_error(exc)}")
    try:
        stored = ci_cases_store(dataset=dataset, payload=payload, by=request.api_token.created_by)
    except CiCasesRejected as rejected:
        return JsonResponse({"errors": rejected.errors}, status=rejected.status)
    return JsonResponse(
        {"run": stored.run.pk, "created": stored.created, "updated": stored.updated, "unchanged": stored.unchanged,
         "judgments": stored.judgments,
         "queue_url": request.build_absolute_uri(reverse("labeling:queue", kwargs={
             "project": request.project.slug, "slug": dataset.slug, "rubric_slug": stored.run.config.rubric.slug}))},
        status=201,
    )
