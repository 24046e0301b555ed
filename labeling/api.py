"""The ingest API: scripts push cases with a `cases:write` token, through the file import's own rules."""

from django.conf import settings
from django.http import HttpRequest, JsonResponse

from evalhub.access import token_required
from evalhub.models import Scope
from labeling.importing import ImportRejected, RowError
from labeling.importing.cases import cases_import_items
from labeling.importing.reading import parse_json_items
from labeling.models import Dataset

TRUE_VALUES = {"1", "true", "yes", "on"}


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
    dataset = Dataset.objects.filter(slug=slug).first()
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
