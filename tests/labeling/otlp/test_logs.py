"""The OTLP logs receiver: GenAI message events sent as log records join their trace, whichever comes first;
a trace whose model calls carry no messages waits for them a bounded time, then is given up."""

import base64
import json
from datetime import timedelta

import pytest
from django.utils import timezone
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue, KeyValueList
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from evalhub.models import ApiToken, Scope
from labeling.models import Case, OtlpTrace
from tests.conftest import store_project
from tests.labeling.otlp.helpers import ANSWER, QUESTION, protobuf_body, recording_tracer

LOGS = "/api/otlp/v1/logs"
TRACES = "/api/otlp/v1/traces"
PROTOBUF = "application/x-protobuf"

pytestmark = pytest.mark.django_db


@pytest.fixture
def token(lead) -> str:
    return ApiToken.issue(project=store_project(), name="agent", scopes=[Scope.CASES_WRITE], created_by=lead)[1]


def post(client, url: str, body: bytes, token: str, content_type: str = PROTOBUF):
    return client.post(f"{url}?dataset=store-support", data=body, content_type=content_type,
                       headers={"Authorization": f"Bearer {token}"})


def silent_chat_trace(tracer) -> tuple[str, str, int]:
    """A model call's span as openai-v2 2.3b0 writes it with content capture on: no message on it.
    Returns (trace id, the chat span's id, its start)."""
    with tracer.start_as_current_span("invoke_agent shopnest") as root:
        with tracer.start_as_current_span("chat gpt-4o-mini") as chat:
            chat.set_attribute("gen_ai.operation.name", "chat")
            chat.set_attribute("gen_ai.system", "openai")
            chat.set_attribute("gen_ai.request.model", "gpt-4o-mini")
    context = chat.get_span_context()
    return format(root.get_span_context().trace_id, "032x"), format(context.span_id, "016x"), chat.start_time


def _any(value) -> AnyValue:
    if isinstance(value, dict):
        return AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key=k, value=_any(v)) for k, v in value.items()]))
    return AnyValue(string_value=value) if isinstance(value, str) else AnyValue(int_value=value)


def logs_request(trace_id: str, span_id: str, start: int, *, answer: bool = True) -> ExportLogsServiceRequest:
    """The records 2.3b0 emits for one call: the user's message, then the choice (event name as an attribute,
    as its SDK of the time wrote it, or in the record's event_name field)."""
    records = [("gen_ai.user.message", {"content": QUESTION})]
    if answer:
        records.append(("gen_ai.choice", {"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": ANSWER}}))
    request = ExportLogsServiceRequest()
    scope = request.resource_logs.add().scope_logs.add()
    scope.log_records.add(time_unix_nano=start + 1, body=_any("an application log line"))  # not GenAI: left alone
    for offset, (name, body) in enumerate(records, start=2):
        record = LogRecord(time_unix_nano=start + offset, trace_id=bytes.fromhex(trace_id),
                           span_id=bytes.fromhex(span_id), body=_any(body))
        if offset == 2:
            record.attributes.append(KeyValue(key="event.name", value=AnyValue(string_value=name)))
        else:
            record.event_name = name
        scope.log_records.append(record)
    return request


def as_json(request: ExportLogsServiceRequest) -> bytes:
    value = json_format.MessageToDict(request)
    for resource in value["resourceLogs"]:
        for scope in resource["scopeLogs"]:
            for record in scope["logRecords"]:
                for key in ("traceId", "spanId"):
                    if key in record:
                        record[key] = base64.b64decode(record[key]).hex()
    return json.dumps(value).encode()


def test_log_records_that_come_first_wait_for_their_trace(client, dataset, token):
    tracer, exporter = recording_tracer()
    trace_id, span_id, start = silent_chat_trace(tracer)

    answered = post(client, LOGS, as_json(logs_request(trace_id, span_id, start)), token, "application/json")
    assert answered.status_code == 200 and answered.json() == {}
    assert OtlpTrace.objects.filter(trace_id=trace_id).exists() and not Case.objects.exists()

    assert post(client, TRACES, protobuf_body(exporter.get_finished_spans()), token).status_code == 200
    case = Case.objects.get(external_id=trace_id)
    assert (case.input, case.output) == (QUESTION, ANSWER)
    assert case.metadata["otlp"]["spans"] == 2  # the log records are not spans
    assert not OtlpTrace.objects.exists()


def test_a_trace_whose_model_calls_carry_no_messages_waits_for_their_log_records(client, dataset, token):
    tracer, exporter = recording_tracer()
    trace_id, span_id, start = silent_chat_trace(tracer)

    assert post(client, TRACES, protobuf_body(exporter.get_finished_spans()), token).status_code == 200
    assert not Case.objects.exists()
    # The user's message alone does not end the wait: the call's answer is the record sent last.
    assert post(client, LOGS, logs_request(trace_id, span_id, start, answer=False).SerializeToString(),
                token).status_code == 200
    assert not Case.objects.exists()
    answered = post(client, LOGS, logs_request(trace_id, span_id, start).SerializeToString(), token)

    assert answered.status_code == 200
    assert not ExportLogsServiceResponse.FromString(answered.content).HasField("partial_success")
    case = Case.objects.get(external_id=trace_id)
    assert (case.input, case.output) == (QUESTION, ANSWER)
    assert not OtlpTrace.objects.exists()


def test_a_trace_whose_log_records_never_come_is_given_up_as_having_no_messages(client, dataset, token, settings):
    tracer, exporter = recording_tracer()
    trace_id, _, _ = silent_chat_trace(tracer)
    post(client, TRACES, protobuf_body(exporter.get_finished_spans()), token)
    waited = timedelta(seconds=settings.EVALHUB_OTLP_TRACE_WAIT_SECONDS + 1)
    OtlpTrace.objects.update(first_seen_at=timezone.now() - waited)

    other = ExportLogsServiceRequest()
    other.resource_logs.add().scope_logs.add().log_records.add(body=AnyValue(string_value="GET /health 200"))
    answered = post(client, LOGS, other.SerializeToString(), token)  # the dataset's next request, of another trace

    message = ExportLogsServiceResponse.FromString(answered.content).partial_success.error_message
    assert f"trace {trace_id} (an earlier request): has no messages" in message
    assert "log records did not come within 60 s" in message
    assert not Case.objects.exists()


@pytest.mark.parametrize("body, content_type, problem", [
    (b"\x0a\xff", PROTOBUF, "not an OTLP logs request in protobuf"),
    (b'{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"traceId": "zz"}]}]}]}', "application/json", "is not hex"),
    (b"[]", "application/json", "JSON object with resourceLogs"),
])
def test_a_body_that_is_not_otlp_logs_is_refused_and_nothing_is_kept(client, dataset, token, body, content_type,
                                                                     problem):
    answered = post(client, LOGS, body, token, content_type)

    assert answered.status_code == 400
    assert problem in answered.content.decode(errors="replace")
    assert not OtlpTrace.objects.exists()
