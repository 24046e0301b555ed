"""The OTLP receiver: `POST /api/otlp/v1/traces`, where an agent's OpenTelemetry exporter sends its spans
(docs/otlp.md), with a `cases:write` token like the ingest API, into a dataset of the token's project only.

Answers as OTLP/HTTP expects, in the content type of the request: 200 with an ExportTraceServiceResponse,
whose partial_success names each trace that could not be a case and why; 400, 404, 413 or 415 with a
google.rpc.Status saying what was wrong with the request as a whole (nothing of it is used then); 429 with
`Retry-After` and the Status's RetryInfo when the dataset holds as many traces waiting for their root span as
it may, or when the server process is receiving as many requests as it may at once (a retry after that delay
may be taken). Every refusal is counted for the lead's page of refused traces.
"""

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from google.protobuf import json_format
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from evalhub.access import bounded_body, gunzipped, method_not_allowed, token_required
from evalhub.models import Scope
from labeling.models import Dataset
from labeling.otlp.services import otlp_receive, record_refusal
from labeling.otlp.traces import (
    Limits,
    OtlpBodyError,
    OtlpBodyTooLarge,
    request_from_json,
    request_from_protobuf,
    spans_of,
)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
DATASET_HEADER = "X-Evalhub-Dataset"
_CODES = {400: code_pb2.INVALID_ARGUMENT, 404: code_pb2.NOT_FOUND, 413: code_pb2.RESOURCE_EXHAUSTED,
          415: code_pb2.INVALID_ARGUMENT, 429: code_pb2.RESOURCE_EXHAUSTED}


def _answer(message: Message, content_type: str, status: int = 200) -> HttpResponse:
    if content_type == PROTOBUF:
        return HttpResponse(message.SerializeToString(), content_type=PROTOBUF, status=status)
    return HttpResponse(json_format.MessageToJson(message, indent=None), content_type=JSON, status=status)


def _refused(status: int, text: str, content_type: str, *, retry_after: int = 0) -> HttpResponse:
    """A google.rpc.Status; with `retry_after`, the delay OTLP/HTTP's retry rules read: the Retry-After header
    and, in the Status's details, a google.rpc.RetryInfo."""
    message = status_pb2.Status(code=_CODES[status], message=text)
    if retry_after:
        message.details.add().Pack(error_details_pb2.RetryInfo(retry_delay=Duration(seconds=retry_after)))
    response = _answer(message, content_type, status)
    if retry_after:
        response["Retry-After"] = str(retry_after)
    return response


def _refused_body(dataset: Dataset, status: int, text: str, content_type: str) -> HttpResponse:
    """A request refused for its body, counted for the lead's page (a line a day and reason: the text's first
    sentence, `The body is not OTLP traces`; the text whole as the detail)."""
    record_refusal(dataset=dataset, why=text.split(":", 1)[0], detail=text, status=status, now=timezone.now())
    return _refused(status, text, content_type)


def _limits() -> Limits:
    return Limits(spans=settings.EVALHUB_OTLP_MAX_SPANS, attributes=settings.EVALHUB_OTLP_MAX_ATTRIBUTES,
                  events=settings.EVALHUB_OTLP_MAX_EVENTS, array=settings.EVALHUB_OTLP_MAX_ARRAY,
                  depth=settings.EVALHUB_OTLP_MAX_DEPTH, values=settings.EVALHUB_OTLP_MAX_VALUES)


@token_required(Scope.CASES_WRITE.value)  # the plain string, so the 403 message names 'cases:write'
def otlp_traces(request: HttpRequest) -> HttpResponse:
    """POST /api/otlp/v1/traces?dataset=SLUG (or the X-Evalhub-Dataset header): protobuf or OTLP/JSON spans,
    gzip allowed; each trace becomes a case of the dataset when its root span has come."""
    return _otlp_request(request, TRACES)


@dataclass(frozen=True)
class _Signal:
    """What differs between the traces and the logs receiver: how a body is read, and the answer's type."""

    name: str  # "traces" or "logs", in messages
    read: Callable[[bytes, str, Limits], dict[str, Any]]  # the body → otlp_receive's spans= or logs=
    answer: Callable[[], Message]
    rejected_field: str  # the partial_success count: rejected_spans or rejected_log_records


def _read_traces(body: bytes, content_type: str, limits: Limits) -> dict[str, Any]:
    message = request_from_protobuf(body, limits) if content_type == PROTOBUF else request_from_json(
        body.decode("utf-8"), limits)
    return {"spans": spans_of(message)}


TRACES = _Signal("traces", _read_traces, ExportTraceServiceResponse, "rejected_spans")


def _otlp_request(request: HttpRequest, signal: _Signal) -> HttpResponse:
    """The receivers' one path: method, content type and encoding, the token's project's dataset, a free place
    among the process's receives, then the body (bounded before it is built) and otlp_receive."""
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
    # The token's project's dataset only: another project's is refused as one that does not exist.
    dataset = request.project.datasets.filter(slug=slug).first()
    if dataset is None:
        return _refused(404, f"No dataset {slug[:100]!r}: create it in evalhub first.", content_type)
    # A few receives at once a server process, so its other threads stay free for everyone else's requests (the
    # receive is CPU work that would take them all); the others are asked to retry, before a byte is read.
    if not _RECEIVING.acquire(blocking=False):
        return _refused(429, "The receiver is busy with other requests (EVALHUB_OTLP_CONCURRENCY): retry in 1 s.",
                        content_type, retry_after=1)
    try:
        return _receive(request, dataset, content_type, encoding, signal)
    finally:
        _RECEIVING.release()


_RECEIVING = threading.BoundedSemaphore(settings.EVALHUB_OTLP_CONCURRENCY)


def _receive(request: HttpRequest, dataset: Dataset, content_type: str, encoding: str,
             signal: _Signal) -> HttpResponse:
    limit = settings.EVALHUB_OTLP_MAX_BYTES
    # The declared length is checked before a byte is read, and never more than the limit is read.
    body = bounded_body(request, limit)
    if body is None:
        return _refused_body(dataset, 413, f"The body is over the limit of {limit:,} bytes (EVALHUB_OTLP_MAX_BYTES): "
                                           "export smaller batches (the batch processor's max_export_batch_size).",
                             content_type)
    if encoding == "gzip":
        try:
            unpacked = gunzipped(body, limit)
        except ValueError as exc:
            return _refused_body(dataset, 400, f"The body is not gzip: {exc}", content_type)
        if unpacked is None:
            return _refused_body(dataset, 413, f"The body unpacks to over {limit:,} bytes: export smaller batches.",
                                 content_type)
        body = unpacked
    try:
        # The bounds are checked before the values are built (labeling.otlp.traces.Limits).
        received = signal.read(body, content_type, _limits())
    except UnicodeDecodeError:
        return _refused_body(dataset, 400, "The body is not UTF-8 text.", content_type)
    except OtlpBodyTooLarge as exc:
        return _refused_body(dataset, 413, f"The body holds too much: {exc}", content_type)
    except OtlpBodyError as exc:
        return _refused_body(dataset, 400, f"The body is not OTLP {signal.name}: {exc}", content_type)
    del body  # what was read from it is all that is used from here
    outcome = otlp_receive(dataset=dataset, **received)
    if outcome.refused is not None:
        status, why, retry_after = outcome.refused
        return _refused(status, f"Nothing of the request was used: {why}.", content_type, retry_after=retry_after)
    response = signal.answer()
    if outcome.rejected or outcome.given_up:
        setattr(response.partial_success, signal.rejected_field, outcome.rejected_spans)
        response.partial_success.error_message = outcome.message()
    return _answer(response, content_type)


def _dataset_slug(request: HttpRequest) -> tuple[str, str | None]:
    """The dataset the request names, by ?dataset= or the header (both only if they agree), or what is wrong."""
    query, header = request.GET.get("dataset", "").strip(), request.headers.get(DATASET_HEADER, "").strip()
    if query and header and query != header:
        return "", (f"The dataset is named twice, as {query[:100]!r} (?dataset=) and {header[:100]!r} "
                    f"({DATASET_HEADER}).")
    if not (query or header):
        return "", f"Name the dataset: ?dataset=SLUG on the endpoint, or the {DATASET_HEADER} header."
    return query or header, None
