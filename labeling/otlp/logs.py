"""OTLP log records as a trace's messages, with no Django (docs/otlp.md, "Messages as log records").

Some instrumentations send what the model saw and said not on the spans but as GenAI *events* carried by the
Logs API: opentelemetry-instrumentation-openai-v2 before the latest conventions (2.3b0 with
OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true) sends a `gen_ai.user.message`, `gen_ai.choice`, …
log record per message, each carrying the trace and span id of the model call's span. Each such record is
read as one piece of its trace, like a span's: it is a child of the span it names, stamped with the record's
time, and its messages are read by the same code as a span's events (labeling/otlp/traces.py). Records of
other events (an application's own logs) are not GenAI messages and are left alone.
"""

import hashlib
import json
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from labeling.importing.reading import json_error, parse_json
from labeling.otlp.traces import (  # the traces' own readers: one way to read OTLP/JSON's lists and hex ids
    Limits,
    OtlpBodyError,
    Span,
    _attributes,
    _hex_as_base64,
    _list,
    _value,
    check_json_size,
    check_protobuf_bounds,
    span_pieces,
)

# The events whose records carry a trace's messages: the older GenAI event names, and the latest conventions'
# one event per call with gen_ai.input.messages / gen_ai.output.messages.
GENAI_EVENTS = frozenset({
    "gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message",
    "gen_ai.choice", "gen_ai.content.prompt", "gen_ai.content.completion",
    "gen_ai.client.inference.operation.details",
})
_ID_FIELDS = ("traceId", "spanId", "trace_id", "span_id")


def logs_request_from_protobuf(body: bytes, limits: Limits | None = None) -> ExportLogsServiceRequest:
    """Its bounds checked first, as a traces request's (labeling.otlp.traces.Limits)."""
    check_protobuf_bounds(body, limits or Limits(), logs=True)
    try:
        return ExportLogsServiceRequest.FromString(body)
    except (DecodeError, RecursionError) as exc:
        raise OtlpBodyError(f"the body is not an OTLP logs request in protobuf: {exc}") from None


def logs_request_from_json(text: str, limits: Limits | None = None) -> ExportLogsServiceRequest:
    """OTLP/JSON logs, ids in hex as in traces; bounded before decoding and after, as a traces request."""
    limits = limits or Limits()
    check_json_size(text, limits)
    try:
        value = parse_json(text)
    except ValueError as exc:
        raise OtlpBodyError(f"the body is not JSON: {json_error(exc)}") from None
    if not isinstance(value, dict):
        raise OtlpBodyError("the body is not an OTLP logs request: it must be a JSON object with resourceLogs")
    try:
        for resource_logs in _list(value.get("resourceLogs", value.get("resource_logs"))):
            for scope_logs in _list(resource_logs.get("scopeLogs", resource_logs.get("scope_logs"))):
                for record in _list(scope_logs.get("logRecords", scope_logs.get("log_records"))):
                    for name in _ID_FIELDS:
                        if name in record:
                            record[name] = _hex_as_base64(record[name], name)
        request = json_format.ParseDict(value, ExportLogsServiceRequest(), ignore_unknown_fields=True)
    except (json_format.ParseError, TypeError, AttributeError, ValueError, RecursionError) as exc:
        raise OtlpBodyError(f"the body is not an OTLP logs request: {str(exc)[:300]}") from None
    check_protobuf_bounds(request.SerializeToString(), limits, logs=True)
    return request


def log_pieces(request: ExportLogsServiceRequest) -> tuple[dict[str, list[dict[str, Any]]], int]:
    """The GenAI message records of the request as pieces by trace id (hex), and how many other records
    there were (not GenAI messages: left alone). A record without a trace id is kept under the id ""."""
    by_trace: dict[str, list[dict[str, Any]]] = {}
    others = 0
    for resource_logs in request.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                attributes = _attributes(record.attributes)
                name = record.event_name or attributes.pop("event.name", None) or ""
                if name not in GENAI_EVENTS:
                    others += 1
                    continue
                body = _value(record.body)
                body = _json_or(body)
                payload = {**attributes, **(body if isinstance(body, dict) else {"content": body})}
                trace_id, span_id = record.trace_id.hex(), record.span_id.hex()
                when = record.time_unix_nano or record.observed_time_unix_nano
                # The record's own id: the same record sent again (an exporter's retry) counts once.
                digest = hashlib.sha256(json.dumps([span_id, when, name, payload], sort_keys=True, default=str)
                                        .encode()).hexdigest()[:16]
                span = Span(trace_id=trace_id, span_id=f"log-{digest}", parent_span_id=span_id or "log", name=name,
                            start=when, end=when, events=[(name, payload)])
                by_trace.setdefault(trace_id if trace_id.strip("0") else "", []).append(
                    {**span_pieces(span), "log": True})
    return by_trace, others


def _json_or(value: Any) -> Any:
    if isinstance(value, str) and value[:1] == "{":
        try:
            return parse_json(value)
        except ValueError:
            return value
    return value
