"""OTLP traces as cases, with no Django: reading an OTLP request's spans (protobuf or OTLP/JSON) and making one
case of one trace (docs/otlp.md).

A span is read once into its *pieces*: the few things a case takes from it (its messages, the tool call or
the documents it stands for, its model), JSON-shaped, so a trace whose spans come in several requests keeps
only those while it waits for its root span, never the span's other attributes. `trace_case` then makes the
case from a trace's pieces: the first user message is `input`, the last assistant message `output`, tool spans
`trace.toolCalls` (or, with no tool span, the calls the model's messages asked for: `tool_calls`), retrieval
spans `trace.retrievedSources` and their documents' text `trace.context`, the models `metadata`. A log record
carrying a GenAI event (labeling/otlp/logs.py) is read as a span of one event, a child of the span it names.

Three ways of writing what a model saw and said are read:
- the OpenTelemetry GenAI conventions as they are now: `gen_ai.input.messages` / `gen_ai.output.messages`
  (structured messages with `parts`), on the span or on an event;
- their older event form: `gen_ai.system.message`, `gen_ai.user.message`, `gen_ai.assistant.message`,
  `gen_ai.tool.message` and `gen_ai.choice` events (and `gen_ai.content.prompt` / `gen_ai.content.completion`),
  and the indexed `gen_ai.prompt.N.*` / `gen_ai.completion.N.*` attributes;
- OpenInference (Arize Phoenix): `llm.input_messages.N.message.*`, `llm.output_messages.N.message.*`
  (with `tool_calls.M.tool_call.*`), `input.value` / `output.value`, `tool.name`,
  `retrieval.documents.N.document.{id,content}`.
"""

import base64
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from labeling.importing.reading import json_error, parse_json


class OtlpBodyError(ValueError):
    """The body is not an OTLP traces request: nothing of it is used."""


class TraceProblem(ValueError):
    """A trace that cannot be a case; the message says why (the caller names the trace)."""


@dataclass
class Span:
    trace_id: str  # hex, as OTLP/JSON and every tracing UI write it
    span_id: str
    parent_span_id: str  # "" for a root span
    name: str
    start: int  # nanoseconds since the epoch
    end: int
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    service: str = ""


# ---------------------------------------------------------------------------------------------------
# Bounds, checked before a request's values become Python objects (docs/otlp.md, "Limits").


class OtlpBodyTooLarge(OtlpBodyError):
    """The body holds more than a bound allows (answered 413): the message names the bound and its setting."""


@dataclass(frozen=True)
class Limits:
    """What one request may hold. The defaults are the settings' (evalhub.settings, EVALHUB_OTLP_MAX_*)."""

    spans: int = 10_000  # spans in one request (the batch processor sends 512)
    attributes: int = 128  # attributes of one span, event, link, resource or scope (the OTel SDK's default)
    events: int = 128  # events of one span (the SDK's default), and links
    array: int = 1_000  # values of one array or key-value list attribute
    depth: int = 8  # arrays and key-value lists inside one another
    values: int = 200_000  # attribute values of every kind in the request, nested ones included


# The messages on the way to an attribute value, by field number (opentelemetry-proto's .proto files):
# field → (the child message, what a bound counts it as). Other fields are skipped by their length.
(_REQUEST, _RESOURCE_SPANS, _RESOURCE, _SCOPE_SPANS, _SCOPE, _SPAN, _EVENT, _LINK, _KEY_VALUE, _ANY, _ARRAY, _KVLIST,
 _LOGS_REQUEST, _RESOURCE_LOGS, _SCOPE_LOGS, _LOG_RECORD) = range(16)
_SCHEMA: dict[int, dict[int, tuple[int, str]]] = {
    _REQUEST: {1: (_RESOURCE_SPANS, "")},
    # The logs request (labeling/otlp/logs.py): a log record counts as a span, its body as an attribute value.
    _LOGS_REQUEST: {1: (_RESOURCE_LOGS, "")},
    _RESOURCE_LOGS: {1: (_RESOURCE, ""), 2: (_SCOPE_LOGS, "")},
    _SCOPE_LOGS: {1: (_SCOPE, ""), 2: (_LOG_RECORD, "spans")},
    _LOG_RECORD: {5: (_ANY, "attributes"), 6: (_KEY_VALUE, "attributes")},
    _RESOURCE_SPANS: {1: (_RESOURCE, ""), 2: (_SCOPE_SPANS, "")},
    _RESOURCE: {1: (_KEY_VALUE, "attributes")},
    _SCOPE_SPANS: {1: (_SCOPE, ""), 2: (_SPAN, "spans")},
    _SCOPE: {3: (_KEY_VALUE, "attributes")},
    _SPAN: {9: (_KEY_VALUE, "attributes"), 11: (_EVENT, "events"), 13: (_LINK, "events")},
    _EVENT: {3: (_KEY_VALUE, "attributes")},
    _LINK: {4: (_KEY_VALUE, "attributes")},
    _KEY_VALUE: {2: (_ANY, "")},
    _ANY: {5: (_ARRAY, ""), 6: (_KVLIST, "")},
    _ARRAY: {1: (_ANY, "array")},
    _KVLIST: {1: (_KEY_VALUE, "array")},
}
_WHAT = {_RESOURCE: "a resource", _SCOPE: "an instrumentation scope", _SPAN: "a span", _LOG_RECORD: "a log record",
         _EVENT: "an event",
         _LINK: "a link", _ARRAY: "an array attribute", _KVLIST: "a key-value list attribute"}
_SETTING = {"spans": "EVALHUB_OTLP_MAX_SPANS", "attributes": "EVALHUB_OTLP_MAX_ATTRIBUTES",
            "events": "EVALHUB_OTLP_MAX_EVENTS", "array": "EVALHUB_OTLP_MAX_ARRAY", "depth": "EVALHUB_OTLP_MAX_DEPTH",
            "values": "EVALHUB_OTLP_MAX_VALUES"}


_HINT = {"spans": "export smaller batches (the batch processor's max_export_batch_size)",
         "values": "export smaller batches (the batch processor's max_export_batch_size)",
         "attributes": "set the SDK's limits (OTEL_ATTRIBUTE_COUNT_LIMIT, OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT)",
         "events": "set the SDK's limits (OTEL_SPAN_EVENT_COUNT_LIMIT, OTEL_SPAN_LINK_COUNT_LIMIT)",
         "array": "record fewer values in one attribute", "depth": "record flatter attribute values"}


def _over(limits: Limits, bound: str, what: str) -> OtlpBodyTooLarge:
    return OtlpBodyTooLarge(f"{what} is over the limit of {getattr(limits, bound):,} ({_SETTING[bound]}): "
                            f"{_HINT[bound]}.")


def check_protobuf_bounds(body: bytes, limits: Limits, *, logs: bool = False) -> None:
    """Walk the protobuf wire format of a traces request (or with `logs`, a logs request), without building a
    message, down to its attribute values, and raise OtlpBodyTooLarge at the first bound passed. The walk stops
    there, so it costs at most about `limits.values` steps whatever the body holds (a body of 5M bools is refused
    after 1,000 of them)."""
    view = memoryview(body)
    totals = {"spans": 0, "values": 0}
    signal = "logs" if logs else "traces"

    def walk(start: int, end: int, kind: int, depth: int) -> None:
        fields, counts = _SCHEMA[kind], {"attributes": 0, "events": 0, "array": 0}
        position = start
        while position < end:
            tag, position = _varint(view, position, end, signal)
            number, wire = tag >> 3, tag & 7
            if wire == 0:
                _, position = _varint(view, position, end, signal)
                continue
            if wire == 1 or wire == 5:
                position += 8 if wire == 1 else 4
                continue
            if wire != 2:
                raise OtlpBodyError(f"the body is not an OTLP {signal} request in protobuf: wire type {wire}")
            length, position = _varint(view, position, end, signal)
            if position + length > end:
                raise OtlpBodyError(f"the body is not an OTLP {signal} request in protobuf: a field runs past its end")
            child = fields.get(number)
            if child is not None:
                child_kind, counted = child
                if counted == "spans":
                    totals["spans"] += 1
                    if totals["spans"] > limits.spans:
                        noun = "log records" if logs else "spans"
                        raise _over(limits, "spans", f"The number of {noun} in the request")
                elif counted:
                    counts[counted] += 1
                    if counts[counted] > getattr(limits, counted):
                        noun = {"attributes": "attributes", "events": "events or links", "array": "values"}[counted]
                        raise _over(limits, counted, f"The number of {noun} of {_WHAT[kind]}")
                if child_kind == _KEY_VALUE or counted == "array" or (kind == _LOG_RECORD and child_kind == _ANY):
                    totals["values"] += 1
                    if totals["values"] > limits.values:
                        raise _over(limits, "values", "The number of attribute values in the request")
                if child_kind in (_ARRAY, _KVLIST) and depth >= limits.depth:
                    raise _over(limits, "depth", "The nesting of arrays and key-value lists")
                walk(position, position + length, child_kind, depth + (child_kind in (_ARRAY, _KVLIST)))
            position += length
        if position != end:
            raise OtlpBodyError(f"the body is not an OTLP {signal} request in protobuf: a field runs past its end")

    walk(0, len(view), _LOGS_REQUEST if logs else _REQUEST, 0)


def _varint(view: memoryview, position: int, end: int, signal: str) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= end or shift > 63:
            raise OtlpBodyError(f"the body is not an OTLP {signal} request in protobuf: a number is cut short")
        byte = view[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7


def check_json_size(text: str, limits: Limits) -> None:
    """Refuse, before decoding, a JSON body that could hold more values than `limits.values` (a value is at
    most one more than the commas and opening brackets: counted at C speed, and commas in strings only make
    the count higher)."""
    upper = text.count(",") + text.count("[") + text.count("{")
    # OTLP/JSON writes each attribute value as an object ({"key", "value": {"intValue": …}}): about three
    # JSON values an attribute value, so the bound is three times the attribute values'.
    if upper > 3 * limits.values:
        raise _over(limits, "values", "The number of JSON values in the request (counted from its commas)")


# ---------------------------------------------------------------------------------------------------
# Reading a request.


def request_from_protobuf(body: bytes, limits: Limits | None = None) -> ExportTraceServiceRequest:
    """The request as the official exporters send it (application/x-protobuf), its bounds checked first
    (OtlpBodyTooLarge): the parsed message would take some 45 bytes a value, 229 MB for a body of 5M bools."""
    check_protobuf_bounds(body, limits or Limits())
    try:
        return ExportTraceServiceRequest.FromString(body)
    except (DecodeError, RecursionError) as exc:
        raise OtlpBodyError(f"the body is not an OTLP traces request in protobuf: {exc}") from None


_ID_FIELDS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")


def request_from_json(text: str, limits: Limits | None = None) -> ExportTraceServiceRequest:
    """The request in OTLP/JSON: strict JSON (docs/cases.md), ids as hex (not protobuf JSON's base64); its
    size bounded before it is decoded, the other bounds checked as a protobuf body's."""
    limits = limits or Limits()
    check_json_size(text, limits)
    try:
        value = parse_json(text)
    except ValueError as exc:
        raise OtlpBodyError(f"the body is not JSON: {json_error(exc)}") from None
    request = request_from_json_value(value)
    check_protobuf_bounds(request.SerializeToString(), limits)
    return request


def request_from_json_value(value: Any) -> ExportTraceServiceRequest:
    if not isinstance(value, dict):
        raise OtlpBodyError("the body is not an OTLP traces request: it must be a JSON object with resourceSpans")
    try:
        for span in _json_spans(value):
            for name in _ID_FIELDS:
                if name in span:
                    span[name] = _hex_as_base64(span[name], name)
            for link in span.get("links") or []:
                for name in _ID_FIELDS:
                    if isinstance(link, dict) and name in link:
                        link[name] = _hex_as_base64(link[name], name)
        return json_format.ParseDict(value, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    except (json_format.ParseError, TypeError, AttributeError, RecursionError) as exc:
        raise OtlpBodyError(f"the body is not an OTLP traces request: {str(exc)[:300]}") from None


def _json_spans(value: dict) -> Iterator[dict]:
    for resource_spans in _list(value.get("resourceSpans", value.get("resource_spans"))):
        for scope_spans in _list(resource_spans.get("scopeSpans", resource_spans.get("scope_spans"))):
            for span in _list(scope_spans.get("spans")):
                if isinstance(span, dict):
                    yield span


def _list(value: Any) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise TypeError(f"expected a list, found {type(value).__name__}")
    return [item for item in value if isinstance(item, dict)]


def _hex_as_base64(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a hex string")
    try:
        return base64.b64encode(bytes.fromhex(value)).decode()
    except ValueError:
        raise OtlpBodyError(f"{name} {value[:40]!r} is not hex") from None


def spans_of(request: ExportTraceServiceRequest) -> list[Span]:
    """Every span of the request, with its attributes and events as plain values."""
    spans = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        service = resource.get("service.name")
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(Span(
                    trace_id=span.trace_id.hex(), span_id=span.span_id.hex(), parent_span_id=span.parent_span_id.hex(),
                    name=span.name, start=span.start_time_unix_nano, end=span.end_time_unix_nano,
                    attributes=_attributes(span.attributes),
                    events=[(event.name, _attributes(event.attributes)) for event in span.events],
                    service=service if isinstance(service, str) else "",
                ))
    return spans


def _attributes(pairs: Iterable) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    if kind is None:
        return None
    if kind == "double_value" and not math.isfinite(value.double_value):
        return None  # NaN and infinities are no JSON values
    return getattr(value, kind)


# ---------------------------------------------------------------------------------------------------
# A span's pieces: what a case takes from it.

_OPENINFERENCE_MESSAGE = re.compile(
    r"llm\.(input|output)_messages\.(\d+)\.message\."
    r"(role|content|tool_call_id|tool_calls\.(\d+)\.tool_call\.(id|function\.name|function\.arguments))")
_INDEXED_MESSAGE = re.compile(
    r"gen_ai\.(prompt|completion)\.(\d+)\.(role|content|tool_call_id|tool_calls\.(\d+)\.(id|name|arguments))")
_OPENINFERENCE_DOCUMENT = re.compile(r"retrieval\.documents\.(\d+)\.document\.(id|content)")
_EVENT_ROLES = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool", "gen_ai.choice": "assistant"}
# What the indexed forms call a tool call's fields, as the structured forms call them.
_CALL_FIELDS = {"function.name": "name", "function.arguments": "arguments", "name": "name",
                "arguments": "arguments", "id": "id"}


@dataclass
class _Message:
    """One message as the case reads it: its text, the tool calls it asks for, the call it answers."""

    role: str
    text: str | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)  # {"id"?, "name", "argument"?}
    answers: str | None = None  # a tool message: the id of the call whose result it carries
    result: Any = None


def span_pieces(span: Span) -> dict[str, Any]:
    """The JSON-shaped part of a span that a case uses; `trace_case` reads a trace's pieces."""
    a = span.attributes
    operation = str(a.get("gen_ai.operation.name") or "").lower()
    openinference_kind = str(a.get("openinference.span.kind") or "").upper()
    messages = _messages(span)
    pieces: dict[str, Any] = {"span": span.span_id, "parent": span.parent_span_id, "start": span.start,
                              "end": span.end, "messages": [[m.role, m.text] for m in messages]}
    asked = [call for m in messages for call in m.calls]
    if asked:
        pieces["asked"] = asked
    answers = [[m.answers, m.result] for m in messages if m.answers]
    if answers:
        pieces["answers"] = answers
    if operation in ("chat", "text_completion", "generate_content") or openinference_kind == "LLM" or any(
            key in a for key in ("gen_ai.system", "gen_ai.provider.name", "gen_ai.request.model")):
        pieces["model_call"] = True  # a span of a model call: its messages may come as log records instead
    if operation == "execute_tool" or openinference_kind == "TOOL" or span.name.startswith("execute_tool "):
        pieces["tool"] = _tool_call(span)
    if operation == "retrieval" or openinference_kind == "RETRIEVER" or any(
            _OPENINFERENCE_DOCUMENT.fullmatch(key) for key in a):
        pieces["sources"], context = _documents(a)
        if context:
            pieces["context"] = context
    model = a.get("gen_ai.request.model") or a.get("llm.model_name") or a.get("gen_ai.response.model")
    if isinstance(model, str) and model:
        pieces["model"] = model
    if not span.parent_span_id:
        pieces["root"] = {"input": _text(a.get("input.value")), "output": _text(a.get("output.value")),
                          "service": span.service, "name": span.name}
    return pieces


def _messages(span: Span) -> list[_Message]:
    """Each message the span records, what went in before what came out; text None for a message without
    text (an assistant turn that only calls a tool)."""
    a = span.attributes
    found: list[_Message] = []
    found += _message_list(a.get("gen_ai.input.messages"))
    for name, attributes in span.events:
        if name in _EVENT_ROLES and name != "gen_ai.choice":
            found.append(_event_message(_EVENT_ROLES[name], attributes))
        elif name == "gen_ai.content.prompt":
            found += _message_list(attributes.get("gen_ai.prompt"))
        found += _message_list(attributes.get("gen_ai.input.messages"))
    found += _indexed(a, _OPENINFERENCE_MESSAGE, "input") + _indexed(a, _INDEXED_MESSAGE, "prompt")
    found += _message_list(a.get("gen_ai.output.messages"))
    for name, attributes in span.events:
        if name == "gen_ai.choice":
            found.append(_event_message("assistant", attributes))
        elif name == "gen_ai.content.completion":
            found += _message_list(attributes.get("gen_ai.completion"), role="assistant")
        found += _message_list(attributes.get("gen_ai.output.messages"), role="assistant")
    found += _indexed(a, _OPENINFERENCE_MESSAGE, "output") + _indexed(a, _INDEXED_MESSAGE, "completion")
    return found


def _json_or_value(value: Any) -> Any:
    """A JSON text parsed (instrumentations record structures as JSON strings); anything else as it is."""
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return parse_json(value)
        except ValueError:
            return value
    return value


def _message_list(value: Any, role: str = "") -> list[_Message]:
    """Structured messages: [{"role", "parts": [{"type": "text", "content"}]}] or [{"role", "content"}]."""
    value = _json_or_value(value)
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return []
    return [_structured(message, role or "assistant") for message in value if isinstance(message, dict)]


def _structured(message: dict, role: str) -> _Message:
    """A message as the GenAI conventions write it (`parts`: text, tool_call, tool_call_response) or as the
    provider's API does (`content`, `tool_calls: [{id, function: {name, arguments}}]`, `tool_call_id`)."""
    found = _Message(role=str(message.get("role") or role), text=_message_text(message))
    parts = message.get("parts")
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "tool_call":
            _add_call(found, part)
        elif part.get("type") == "tool_call_response" and isinstance(part.get("id"), str):
            found.answers, found.result = part["id"], _json_or_value(part.get("response", part.get("result")))
    calls = _json_or_value(message.get("tool_calls"))
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, dict):
            function = call.get("function")
            _add_call(found, {**call, **function} if isinstance(function, dict) else call)
    if found.role == "tool":
        call_id = message.get("tool_call_id", message.get("id"))
        if isinstance(call_id, str) and call_id:
            found.answers = call_id
            found.result = _json_or_value(message.get("content")) if found.result is None else found.result
    return found


def _add_call(message: _Message, call: dict) -> None:
    name = call.get("name")
    if not isinstance(name, str) or not name:
        return
    found: dict[str, Any] = {"name": name}
    if isinstance(call.get("id"), str) and call["id"]:
        found["id"] = call["id"]
    if call.get("arguments") is not None:
        found["argument"] = _json_or_value(call["arguments"])
    message.calls.append(found)


def _message_text(message: dict) -> str | None:
    parts = message.get("parts")
    if isinstance(parts, list):
        texts = [part.get("content") for part in parts
                 if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("content"), str)]
        return "\n".join(texts) if texts else None
    content = message.get("content")
    if isinstance(content, list):  # a provider's own content blocks: [{"type": "text", "text": ...}]
        texts = [block["text"] for block in content
                 if isinstance(block, dict) and isinstance(block.get("text"), str)]
        return "\n".join(texts) if texts else None
    return content if isinstance(content, str) else None


def _event_message(role: str, attributes: dict[str, Any]) -> _Message:
    """An older-form event (a span event or a log record's body): its text in `content`, `message.content`,
    `message` or `gen_ai.event.content`; a choice's `message` or an assistant event's `tool_calls` asking
    for tools; a tool event's `id` naming the call it answers."""
    inner = None
    for key in ("message", "gen_ai.event.content", "body"):
        value = _json_or_value(attributes.get(key))
        if isinstance(value, dict):
            inner = value.get("message") if isinstance(value.get("message"), dict) else value
            break
    found = _structured({"role": role, **attributes, **(inner or {})}, role)
    found.role = role
    found.text = _event_text(attributes)
    return found


def _event_text(attributes: dict[str, Any]) -> str | None:
    for key in ("content", "message.content"):
        if isinstance(attributes.get(key), str):
            return attributes[key]
    for key in ("message", "gen_ai.event.content", "body"):
        value = _json_or_value(attributes.get(key))
        if isinstance(value, dict):
            inner = value.get("message") if isinstance(value.get("message"), dict) else value
            return _message_text(inner)
        if isinstance(value, str):
            return value
    return None


def _indexed(attributes: dict[str, Any], pattern: re.Pattern[str], direction: str) -> list[_Message]:
    """Messages flattened into indexed attributes (`llm.input_messages.0.message.content`,
    `llm.output_messages.0.message.tool_calls.0.tool_call.function.name`), in index order."""
    by_index: dict[int, dict[str, Any]] = {}
    starts = (f"llm.{direction}_messages.", f"gen_ai.{direction}.")  # a cheap test before the pattern's
    for key, value in attributes.items():
        match = pattern.fullmatch(key) if key.startswith(starts) else None
        if not match or match[1] != direction:
            continue
        message = by_index.setdefault(int(match[2]), {})
        if match[4] is None:
            message[match[3]] = value
        else:
            message.setdefault("tool_calls", {}).setdefault(int(match[4]), {})[_CALL_FIELDS[match[5]]] = value
    default = "user" if direction in ("input", "prompt") else "assistant"
    found = []
    for _, message in sorted(by_index.items()):
        calls = [call for _, call in sorted(message.pop("tool_calls", {}).items())]
        found.append(_structured({**message, "tool_calls": calls}, default))
    return found


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _tool_call(span: Span) -> dict[str, Any]:
    """A tool span's call. OpenInference's `input.value` is the call's arguments; its `tool.parameters` is the
    tool's JSON schema (what any call may pass), never read as an argument."""
    a = span.attributes
    name = a.get("gen_ai.tool.name") or a.get("tool.name")
    if not isinstance(name, str) or not name:
        name = span.name.removeprefix("execute_tool ").strip()
    call: dict[str, Any] = {"name": name}
    for target, keys in (("argument", ("gen_ai.tool.call.arguments", "input.value")),
                         ("result", ("gen_ai.tool.call.result", "output.value"))):
        for key in keys:
            if key in a:
                call[target] = _json_or_value(a[key])
                break
    call_id = a.get("gen_ai.tool.call.id") or a.get("tool_call.id")
    if isinstance(call_id, str) and call_id:
        call["id"] = call_id
    return call


def _documents(attributes: dict[str, Any]) -> tuple[list[str], list[str]]:
    """A retrieval span's documents: their ids, and the text of those whose content was recorded."""
    ids: list[str] = []
    contents: list[str] = []
    documents = _json_or_value(attributes.get("gen_ai.retrieval.documents"))
    for document in documents if isinstance(documents, list) else []:
        if isinstance(document, dict):
            if isinstance(document.get("id"), str | int):
                ids.append(str(document["id"]))
            if isinstance(document.get("content"), str):
                contents.append(document["content"])
        elif isinstance(document, str):
            ids.append(document)
    indexed: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if match := _OPENINFERENCE_DOCUMENT.fullmatch(key):
            indexed.setdefault(int(match[1]), {})[match[2]] = value
    for _, document in sorted(indexed.items()):
        if isinstance(document.get("id"), str | int):
            ids.append(str(document["id"]))
        if isinstance(document.get("content"), str):
            contents.append(document["content"])
    return ids, contents


# ---------------------------------------------------------------------------------------------------
# A trace's pieces as a case.


def merged_pieces(*groups: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One trace's pieces from several requests, each span once (an exporter may send a batch again), in the
    order they came: the span order that breaks a tie of start times."""
    by_span: dict[str, dict[str, Any]] = {}
    for group in groups:
        for pieces in group:
            by_span.setdefault(pieces["span"], pieces)
    return list(by_span.values())


def has_root(pieces: Iterable[dict[str, Any]]) -> bool:
    """Whether the trace's root span has come: exporters send a span once it has ended."""
    return any("root" in p for p in pieces)


def waits_for_messages(pieces: list[dict[str, Any]]) -> bool:
    """Whether a trace whose root has come still waits for messages sent as log records: some model call's
    span carries no message and no log record of its answer (a `gen_ai.choice`, sent last) has come, and the
    root span has no input.value / output.value to be the case instead. Log records of one span are
    exported in the order they were made, so once a span's answer has come its other messages have too."""
    if not has_root(pieces):
        return False
    root = next(p["root"] for p in pieces if "root" in p)
    if root.get("input") is not None and root.get("output") is not None:
        return False
    answered = {p["parent"] for p in pieces if p.get("log") and any(role == "assistant" for role, _ in p["messages"])}
    return any(p.get("model_call") and not p["messages"] and p["span"] not in answered
               for p in pieces if not p.get("log"))


def trace_case(trace_id: str, pieces: list[dict[str, Any]]) -> dict[str, Any]:
    """The case one whole trace makes (the case format of docs/cases.md); TraceProblem when it has no user
    message to be the input or no assistant message to be the output."""
    by_start = sorted(pieces, key=lambda p: (p["start"], p["end"]))
    by_end = sorted(pieces, key=lambda p: (p["end"], p["start"]))
    root = next((p["root"] for p in by_start if "root" in p), {})
    question = next((text for p in by_start for role, text in p["messages"] if role == "user" and text is not None),
                    root.get("input"))
    answered = [(p, text) for p in by_end for role, text in p["messages"] if role == "assistant"]
    with_text = [(p, text) for p, text in answered if text is not None]
    if with_text:
        answering, answer = with_text[-1]
    elif root.get("output") is not None:
        answering, answer = next(p for p in pieces if "root" in p), root["output"]
    elif answered:
        answering, answer = answered[-1][0], ""  # the agent answered with no text: an empty answer
    else:
        answering, answer = None, None
    if question is None and answer is None:
        raise TraceProblem("has no messages: no gen_ai.input.messages / gen_ai.output.messages, gen_ai.* message "
                           "events or log records, llm.input_messages / llm.output_messages or input.value / "
                           "output.value")
    if question is None:
        raise TraceProblem("has no user message to be the case's input")
    if answer is None:
        raise TraceProblem("has no assistant message to be the case's output")
    trace: dict[str, Any] = {}
    calls = tool_calls(pieces)
    if calls:
        trace["toolCalls"] = calls
    sources = list(dict.fromkeys(source for p in by_start for source in p.get("sources", ())))
    if sources:
        trace["retrievedSources"] = sources
    context = list(dict.fromkeys(text for p in by_start for text in p.get("context", ())))
    if context:
        trace["context"] = "\n\n".join(context)
    models = list(dict.fromkeys(p["model"] for p in by_start if "model" in p))
    # The root span's id: a verdict exported back (judges/export/otlp.py) is parented to it.
    metadata: dict[str, Any] = {"otlp": {"spans": sum(1 for p in pieces if not p.get("log"))}}
    root_span = next((p["span"] for p in pieces if "root" in p), None)
    if root_span:
        metadata["otlp"]["root_span"] = root_span
    if root.get("service"):
        metadata["otlp"]["service"] = root["service"]
    if models:
        metadata["agent_model"] = answering.get("model", models[-1]) if answering else models[-1]
    if len(models) > 1:
        metadata["models"] = models
    return {"external_id": trace_id, "input": question, "output": answer, "trace": trace, "metadata": metadata}


def tool_calls(pieces: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trace's tool calls, `{name, argument, result}` in the order the agent made them.

    Tool spans are the calls where there are any; otherwise the calls the model's messages asked for, each
    with the result the tool message answering it carried. Never both: a call asked for and then run under a
    tool span is one call. Tool spans are ordered by start time, a tie by the order in which the messages
    asked for the calls (matched by call id, else by name and argument), then by span order."""
    by_start = sorted(pieces, key=lambda p: p["start"])  # stable: span order breaks a tie
    asked: dict[str, dict[str, Any]] = {}
    for p in by_start:
        for call in p.get("asked", ()):
            asked.setdefault(call.get("id") or _call_key(call), call)
    spans = [p["tool"] for p in by_start if "tool" in p]
    if not spans:
        results = {call_id: result for p in by_start for call_id, result in p.get("answers", ())}
        found = []
        for call in asked.values():
            made = {key: call[key] for key in ("name", "argument") if key in call}
            if call.get("id") in results and results[call["id"]] is not None:
                made["result"] = results[call["id"]]
            found.append(made)
        return found
    rank: dict[int, int] = {}  # a tool span (by position) → where its call was asked
    order = list(asked.values())
    for position, span in enumerate(spans):
        for index, call in enumerate(order):
            if index in rank.values():
                continue
            if (span.get("id") and span["id"] == call.get("id")) or _call_key(span) == _call_key(call):
                rank[position] = index
                break
    starts = [p["start"] for p in by_start if "tool" in p]
    ordered = sorted(range(len(spans)), key=lambda i: (starts[i], rank.get(i, len(order)), i))
    return [{key: spans[i][key] for key in ("name", "argument", "result") if key in spans[i]} for i in ordered]


def _call_key(call: dict[str, Any]) -> str:
    return json.dumps([call.get("name"), call.get("argument")], sort_keys=True, default=str)
