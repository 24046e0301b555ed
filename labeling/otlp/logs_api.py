"""The OTLP logs receiver: `POST /api/otlp/v1/logs`, where an agent's OpenTelemetry log exporter sends the
GenAI events that carry its model calls' messages (docs/otlp.md, "Messages as log records"). The same token
(`cases:write`), dataset and body rules as the traces receiver (labeling/otlp/api.py), and the same answers:
200 with an ExportLogsServiceResponse whose partial_success names each trace refused and why; 400, 404, 413
or 415 with a google.rpc.Status. Records that are not GenAI message events are accepted and left alone.
"""

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

from evalhub.access import bounded_body, gunzipped, method_not_allowed, token_required
from evalhub.models import Scope
from labeling.otlp.api import JSON, PROTOBUF, _answer, _dataset_slug, _refused
from labeling.otlp.logs import log_pieces, logs_request_from_json, logs_request_from_protobuf
from labeling.otlp.services import otlp_receive
from labeling.otlp.traces import OtlpBodyError


@token_required(Scope.CASES_WRITE.value)
def otlp_logs(request: HttpRequest) -> HttpResponse:
    """POST /api/otlp/v1/logs?dataset=SLUG (or the X-Evalhub-Dataset header): protobuf or OTLP/JSON log
    records, gzip allowed; GenAI message events join their traces, whichever comes first."""
    if request.method != "POST":
        return method_not_allowed("POST")
    content_type = (request.content_type or "").strip().lower()
    if content_type not in (PROTOBUF, JSON):
        return _refused(415, f"Content-Type {content_type[:60]!r} is not accepted: send {PROTOBUF} (what the "
                             f"OTLP exporters send) or {JSON} (OTLP/JSON).", JSON)
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("identity", "gzip"):
        return _refused(415, f"Content-Encoding {encoding[:40]!r} is not accepted: send gzip or none.", content_type)
    slug, problem = _dataset_slug(request)
    if problem:
        return _refused(400, problem, content_type)
    dataset = request.project.datasets.filter(slug=slug).first()
    if dataset is None:
        return _refused(404, f"No dataset {slug[:100]!r}: create it in evalhub first.", content_type)
    limit = settings.EVALHUB_OTLP_MAX_BYTES
    body = bounded_body(request, limit)
    if body is None:
        return _refused(413, f"The body is over the limit of {limit:,} bytes (EVALHUB_OTLP_MAX_BYTES): export "
                             "smaller batches (the batch processor's max_export_batch_size).", content_type)
    if encoding == "gzip":
        try:
            unpacked = gunzipped(body, limit)
        except ValueError as exc:
            return _refused(400, f"The body is not gzip: {exc}", content_type)
        if unpacked is None:
            return _refused(413, f"The body unpacks to over {limit:,} bytes: export smaller batches.", content_type)
        body = unpacked
    try:
        if content_type == PROTOBUF:
            message = logs_request_from_protobuf(body)
        else:
            message = logs_request_from_json(body.decode("utf-8"))
        by_trace, _ = log_pieces(message)
    except UnicodeDecodeError:
        return _refused(400, "The body is not UTF-8 text.", content_type)
    except OtlpBodyError as exc:
        return _refused(400, f"The body is not OTLP logs: {exc}", content_type)
    outcome = otlp_receive(dataset=dataset, logs=by_trace)
    response = ExportLogsServiceResponse()
    if outcome.rejected or outcome.given_up:
        response.partial_success.rejected_log_records = outcome.rejected_spans
        response.partial_success.error_message = outcome.message()
    return _answer(response, content_type)
