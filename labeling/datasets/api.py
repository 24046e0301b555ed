"""The cases API: scripts push cases with a `cases:write` token, through the file import's own rules;
pipelines fetch a dataset's cases (to run their agent on) with a `cases:read` token, and what the dataset
does to cases on the way in (its redaction) with either. Every endpoint answers for the token's project only:
a dataset of another project is 404 in the words of an unknown one."""

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from evalhub.access import method_not_allowed, token_required
from evalhub.models import Scope
from evalhub.params import MAX_ID, whole
from labeling.datasets.exporting import case_lines
from labeling.datasets.forms import case_filters
from labeling.datasets.selectors import pipeline_cases
from labeling.importing import ImportRejected, RowError
from labeling.importing.cases import cases_import_items
from labeling.importing.reading import parse_json_items

TRUE_VALUES = {"1", "true", "yes", "on"}
CASE_FILTERS = ("category", "split", "kind", "sample", "seed")
MAX_SEED_CHARS = 200


@token_required(one_of=(Scope.CASES_READ.value, Scope.CASES_WRITE.value))
def dataset_read(request: HttpRequest, slug: str) -> JsonResponse:
    """GET /api/datasets/<slug>: the dataset's name and what it redacts from incoming cases.

    The CI command redacts with these kinds before it judges what it will post, so the posted case and its
    judgments are of the same text (docs/gate.md).
    """
    if request.method != "GET":
        return method_not_allowed("GET")
    dataset = request.project.datasets.filter(slug=slug).first()
    if dataset is None:
        return JsonResponse({"error": f"No dataset {slug!r}."}, status=404)
    return JsonResponse({"dataset": dataset.slug, "name": dataset.name, "redact": list(dataset.redact_kinds)})


@login_not_required  # each method's view checks its own token scope
@csrf_exempt
def dataset_cases(request: HttpRequest, slug: str) -> HttpResponse:
    """/api/datasets/<slug>/cases: GET reads the cases (cases:read), POST ingests them (cases:write)."""
    if request.method == "GET":
        return cases_read(request, slug)
    if request.method == "POST":
        return cases_ingest(request, slug)
    response = JsonResponse({"error": "Use GET to read cases or POST to ingest them."}, status=405)
    response["Allow"] = "GET, POST"
    return response


@token_required(Scope.CASES_READ.value)
def cases_read(request: HttpRequest, slug: str) -> HttpResponse:
    """GET /api/datasets/<slug>/cases?category=&split=&kind=&sample=N&seed=S: the cases file as JSONL.

    One case per line in the case format without its answer (docs/gate.md); the labels never.
    The filters first, then the stable sample. 400 with every bad parameter as {"field", "message"}.
    """
    dataset = request.project.datasets.filter(slug=slug).first()
    if dataset is None:
        return JsonResponse({"error": f"No dataset {slug!r}."}, status=404)
    filters, errors = _pipeline_arguments(request.GET)
    if errors:
        return JsonResponse({"errors": [{"field": name, "message": message} for name, message in errors]},
                            status=400)
    response = StreamingHttpResponse(case_lines(pipeline_cases(dataset=dataset, **filters)),
                                     content_type="application/x-ndjson; charset=utf-8")
    response["Cache-Control"] = "no-store"
    return response


def _pipeline_arguments(query) -> tuple[dict, list[tuple[str, str]]]:
    """The pipeline_cases arguments from a query string (the case list's filters, then the sample), or every
    problem with it."""
    errors: list[tuple[str, str]] = []
    for name in query:
        if name not in CASE_FILTERS:
            errors.append((name, f"is not a filter (known: {', '.join(CASE_FILTERS)})"))
        elif len(query.getlist(name)) > 1:
            errors.append((name, "is given more than once"))
    filters, problems = case_filters(query, page=False)
    errors += problems
    sample, seed = query.get("sample"), query.get("seed")
    if sample is not None:
        if (count := whole(sample, low=1, high=MAX_ID)) is None:
            errors.append(("sample", "must be a whole number of cases, 1 or more"))
        else:
            filters["sample"] = count
        if seed is None:
            errors.append(("seed", "is required with sample: the same seed picks the same cases"))
    if seed is not None:
        if sample is None:
            errors.append(("seed", "only goes with sample"))
        elif len(seed) > MAX_SEED_CHARS:
            errors.append(("seed", f"must be at most {MAX_SEED_CHARS} characters"))
        filters["seed"] = seed
    return filters, errors


def _body_error(status: int, message: str) -> JsonResponse:
    return JsonResponse({"errors": [{"index": None, "field": None, "message": message}]}, status=status)


@token_required(Scope.CASES_WRITE.value)  # the plain string, so the 403 message names 'cases:write'
def cases_ingest(request: HttpRequest, slug: str) -> JsonResponse:
    """POST /api/datasets/<slug>/cases: one case object or a list of them; ?update=1 to re-import.

    201 with counts, or 400 with every error as {"index", "field", "message"}; nothing is written then.
    """
    if request.method != "POST":
        response = JsonResponse({"error": "Use POST."}, status=405)
        response["Allow"] = "POST"
        return response
    dataset = request.project.datasets.filter(slug=slug).first()
    if dataset is None:
        return JsonResponse({"error": f"No dataset {slug!r}: create it in evalhub first."}, status=404)
    limit = settings.EVALHUB_IMPORT_MAX_BYTES
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    # Read the stream ourselves (request.body stops at DATA_UPLOAD_MAX_MEMORY_SIZE, meant for forms).
    body = request.read(limit + 1) if declared <= limit else b""
    if declared > limit or len(body) > limit:
        return _body_error(413, f"The body is over the limit of {limit:,} bytes: send smaller batches.")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return _body_error(400, "The body is not UTF-8 text.")
    errors: list[RowError] = []
    items = parse_json_items(text, errors)  # a bad item is an error at its index, like a bad line in a file
    try:
        result = cases_import_items(
            dataset=dataset, items=items, errors=errors, update=request.GET.get("update", "").lower() in TRUE_VALUES
        )
    except ImportRejected as rejected:
        return JsonResponse({"errors": [error.as_api() for error in rejected.errors]}, status=400)
    return JsonResponse(
        {"dataset": dataset.slug, "created": result.created, "updated": result.updated,
         "unchanged": result.unchanged},
        status=201,
    )
