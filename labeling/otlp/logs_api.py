"""The OTLP logs receiver: `POST /api/otlp/v1/logs`, where an agent's OpenTelemetry log exporter sends the
GenAI events that carry its model calls' messages (docs/otlp.md, "Messages as log records"). The traces
receiver's one path (labeling/otlp/api.py): the same token (`cases:write`), dataset, size and bound rules and
the same answers: 200 with an ExportLogsServiceResponse whose partial_success names each trace refused and why;
400, 404, 413, 415 or 429 with a google.rpc.Status. Records that are not GenAI message events are accepted and
left alone.
"""

from typing import Any

from django.http import HttpRequest, HttpResponse
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

from evalhub.access import token_required
from evalhub.models import Scope
from labeling.otlp.api import PROTOBUF, _otlp_request, _Signal
from labeling.otlp.logs import log_pieces, logs_request_from_json, logs_request_from_protobuf
from labeling.otlp.traces import Limits


def _read_logs(body: bytes, content_type: str, limits: Limits) -> dict[str, Any]:
    message = logs_request_from_protobuf(body, limits) if content_type == PROTOBUF else logs_request_from_json(
        body.decode("utf-8"), limits)
    by_trace, _ = log_pieces(message)
    return {"logs": by_trace}


LOGS = _Signal("logs", _read_logs, ExportLogsServiceResponse, "rejected_log_records")


@token_required(Scope.CASES_WRITE.value)
def otlp_logs(request: HttpRequest) -> HttpResponse:
    """POST /api/otlp/v1/logs?dataset=SLUG (or the X-Evalhub-Dataset header): protobuf or OTLP/JSON log
    records, gzip allowed; GenAI message events join their traces, whichever comes first."""
    return _otlp_request(request, LOGS)
