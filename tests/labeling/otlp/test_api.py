"""The OTLP receiver: the official exporter's requests become cases; a split trace is joined; what cannot be
used is refused with OTLP/HTTP's answers, and nothing of it is written."""

import gzip
import json
import socket
import subprocess
import sys
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.urls import reverse
from django.utils import timezone
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from evalhub.models import ApiToken, Scope
from labeling.datasets.services import dataset_set_redaction
from labeling.models import Case, OtlpTrace
from labeling.otlp.services import otlp_give_up
from labeling.otlp.tasks import give_up_waited_traces
from tests.conftest import store_project
from tests.labeling.otlp.helpers import (
    ANSWER,
    QUESTION,
    genai_trace,
    json_body,
    openinference_trace,
    protobuf_body,
    recording_tracer,
    silent_trace,
)

URL = "/api/otlp/v1/traces"
PROTOBUF = "application/x-protobuf"


@pytest.fixture
def token(lead) -> str:
    return ApiToken.issue(project=store_project(), name="agent", scopes=[Scope.CASES_WRITE], created_by=lead)[1]


def post(client, body: bytes, token: str | None, *, content_type: str = PROTOBUF, query: str = "?dataset=store-support",
         **headers):
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return client.post(URL + query, data=body, content_type=content_type, headers=headers)


def partial_success(response) -> tuple[int, str]:
    assert response.status_code == 200, response.content
    if response["Content-Type"] == "application/json":
        answer = response.json().get("partialSuccess", {})
        return int(answer.get("rejectedSpans", 0)), answer.get("errorMessage", "")
    answer = ExportTraceServiceResponse.FromString(response.content)
    return answer.partial_success.rejected_spans, answer.partial_success.error_message


def post_nothing(client, token):
    """A request with no spans (in OTLP/JSON: the test client sends no Content-Type with an empty body)."""
    return post(client, b'{"resourceSpans": []}', token, content_type="application/json")


def test_the_route_is_the_one_exporters_are_pointed_at():
    assert reverse("labeling:api_otlp_traces") == URL


@pytest.mark.django_db(transaction=True)
def test_the_official_exporter_sends_traces_and_they_become_cases(live_server, dataset, lead, token, monkeypatch):
    # Configured as docs/otlp.md says: the endpoint and headers from the environment, gzip on.
    dataset_set_redaction(dataset=dataset, kinds=["email"], by=lead)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{live_server.url}{URL}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS",
                       f"Authorization=Bearer%20{token},X-Evalhub-Dataset={dataset.slug}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    tracer = provider.get_tracer("agent")

    genai_id, openinference_id = genai_trace(tracer), openinference_trace(tracer)
    assert provider.force_flush(10_000)
    provider.shutdown()

    cases = {case.external_id: case for case in Case.objects.filter(dataset=dataset)}
    assert set(cases) == {genai_id, openinference_id}
    genai = cases[genai_id]
    # The dataset's redaction applies: the address is a placeholder, the same one in the input and the output.
    assert genai.input == QUESTION.replace("jane.doe@example.com", "[EMAIL_1]")
    assert genai.output == ANSWER.replace("jane.doe@example.com", "[EMAIL_1]")
    assert genai.trace["toolCalls"] == [{"name": "lookup_order", "argument": {"order_id": "A-1001"},
                                         "result": {"status": "delivered", "days_since_delivery": 12}}]
    assert genai.metadata["agent_model"].startswith("gpt-4o-mini")
    assert cases[openinference_id].trace["retrievedSources"] == ["returns-policy", "shipping-faq"]
    assert not OtlpTrace.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_body_over_the_limit_is_refused_before_it_is_read(live_server, dataset, token):
    # 50 MB declared, 64 KiB sent: the 413 comes back while the client still holds the rest.
    address = urlsplit(live_server.url)
    with socket.create_connection((address.hostname, address.port), timeout=10) as connection:
        connection.sendall(
            f"POST {URL}?dataset={dataset.slug} HTTP/1.1\r\nHost: {address.netloc}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: {PROTOBUF}\r\nContent-Length: {50 * 1024 * 1024}\r\n"
            "\r\n".encode() + b"\x00" * 65536)
        answer = connection.recv(65536)
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < _length(answer):
            answer += connection.recv(65536)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413")
    assert b"over the limit of 20,971,520 bytes" in body
    assert not Case.objects.exists() and not OtlpTrace.objects.exists()


def _length(answer: bytes) -> int:
    head = answer.partition(b"\r\n\r\n")[0].decode().lower()
    return next((int(line.split(":")[1]) for line in head.split("\r\n") if line.startswith("content-length:")), 0)


@pytest.mark.django_db
def test_otlp_json_becomes_a_case_and_is_answered_in_json(client, dataset, token):
    tracer, exporter = recording_tracer()
    trace_id = genai_trace(tracer)

    response = post(client, json_body(exporter.get_finished_spans()), token, content_type="application/json")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == {}  # nothing refused: no partial success
    case = Case.objects.get(dataset=dataset)
    assert (case.external_id, case.input, case.output) == (trace_id, QUESTION, ANSWER)
    assert case.trace["retrievedSources"] == ["returns-policy"]


@pytest.mark.django_db
def test_a_trace_split_over_two_requests_is_joined_when_its_root_span_comes(client, dataset, lead, token):
    dataset_set_redaction(dataset=dataset, kinds=["email"], by=lead)
    tracer, exporter = recording_tracer()
    trace_id = genai_trace(tracer)
    spans = exporter.get_finished_spans()  # in the order they ended: the root span last
    children, root = spans[:-1], spans[-1:]

    assert partial_success(post(client, protobuf_body(children), token)) == (0, "")
    waiting = OtlpTrace.objects.get()
    assert not Case.objects.exists() and waiting.trace_id == trace_id
    assert "jane.doe" not in json.dumps(waiting.pieces)  # kept redacted while it waits
    by_header = post(client, protobuf_body(root), token, query="", X_Evalhub_Dataset=dataset.slug)
    assert partial_success(by_header) == (0, "")

    case = Case.objects.get()
    assert case.external_id == trace_id and case.metadata["otlp"]["spans"] == 5
    # One map across both requests: the address of the first is the placeholder of the second's answer.
    assert (case.input, case.output) == (QUESTION.replace("jane.doe@example.com", "[EMAIL_1]"),
                                         ANSWER.replace("jane.doe@example.com", "[EMAIL_1]"))
    assert case.trace["toolCalls"][0]["name"] == "lookup_order"
    assert not OtlpTrace.objects.exists()


@pytest.mark.django_db
def test_a_trace_whose_root_does_not_come_in_time_is_given_up_and_named_once(client, dataset, token, settings):
    tracer, exporter = recording_tracer()
    trace_id = genai_trace(tracer)
    children, root = exporter.get_finished_spans()[:-1], exporter.get_finished_spans()[-1:]
    post(client, protobuf_body(children), token)

    # The periodic task gives it up once the wait has run out (not before).
    assert otlp_give_up() == 0
    later = timezone.now() + timedelta(seconds=settings.EVALHUB_OTLP_TRACE_WAIT_SECONDS + 1)
    assert otlp_give_up(now=later) == 1
    assert OtlpTrace.objects.get().pieces == []  # nothing of its text is kept

    rejected, message = partial_success(post(client, protobuf_body(root), token))
    assert rejected == 1
    assert f"trace {trace_id}: was given up" in message and "did not come within 60 s" in message
    assert f"trace {trace_id} (an earlier request)" in message
    assert not Case.objects.exists()
    assert partial_success(post_nothing(client, token)) == (0, "")  # named once


@pytest.mark.django_db
def test_beat_runs_the_give_up_task_which_gives_up_what_waited_too_long(client, dataset, token, settings):
    # A worker's registry, in a fresh interpreter (this one may have imported the task already): the task beat
    # names is there once the worker has imported the autodiscovered modules.
    script = ("import django; django.setup(); from evalhub.celery import app; app.loader.import_default_modules(); "
              f"print({settings.CELERY_BEAT_SCHEDULE['otlp-give-up']['task']!r} in app.tasks)")
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    assert found.stdout.strip() == "True", found.stderr
    settings.EVALHUB_OTLP_TRACE_WAIT_SECONDS = 0
    tracer, exporter = recording_tracer()
    genai_trace(tracer)
    post(client, protobuf_body(exporter.get_finished_spans()[:-1]), token)

    assert give_up_waited_traces() == 1 and give_up_waited_traces() == 0
    assert OtlpTrace.objects.get().gave_up_at is not None


@pytest.mark.django_db
def test_the_next_request_gives_up_what_waited_too_long(client, dataset, token, settings):
    settings.EVALHUB_OTLP_TRACE_WAIT_SECONDS = 0
    tracer, exporter = recording_tracer()
    trace_id = genai_trace(tracer)
    post(client, protobuf_body(exporter.get_finished_spans()[:-1]), token)

    _, message = partial_success(post_nothing(client, token))

    assert message.startswith(f"trace {trace_id} (an earlier request): incomplete")
    assert OtlpTrace.objects.get().gave_up_at is not None


@pytest.mark.django_db
def test_a_trace_without_messages_is_refused_by_id_and_the_others_are_written(client, dataset, token):
    tracer, exporter = recording_tracer()
    silent_id, good_id = silent_trace(tracer), genai_trace(tracer)

    rejected, message = partial_success(post(client, protobuf_body(exporter.get_finished_spans()), token))

    assert rejected == 2  # the silent trace's two spans
    assert message.startswith(f"trace {silent_id}: has no messages")
    assert list(Case.objects.values_list("external_id", flat=True)) == [good_id]
    assert not OtlpTrace.objects.exists()


@pytest.mark.django_db
def test_a_trace_that_makes_no_valid_case_is_refused_by_the_writer_and_the_others_are_written(client, dataset, token):
    tracer, exporter = recording_tracer()
    bad_id = genai_trace(tracer, question="a NUL \x00 in the question")
    good_id = genai_trace(tracer)

    rejected, message = partial_success(post(client, protobuf_body(exporter.get_finished_spans()), token))

    assert (rejected, message) == (5, f"trace {bad_id}: makes no valid case: input: contains a NUL character")
    assert list(Case.objects.values_list("external_id", flat=True)) == [good_id]


@pytest.mark.django_db
def test_a_trace_sent_again_is_not_written_twice(client, dataset, token):
    tracer, exporter = recording_tracer()
    trace_id = genai_trace(tracer)
    body = protobuf_body(exporter.get_finished_spans())
    post(client, body, token)

    rejected, message = partial_success(post(client, body, token))

    assert rejected == 5 and message.startswith(f"trace {trace_id}: is a case of this dataset already")
    assert Case.objects.count() == 1


def _status(response) -> status_pb2.Status:
    if response["Content-Type"] == PROTOBUF:
        return status_pb2.Status.FromString(response.content)
    return status_pb2.Status(**response.json())


@pytest.mark.django_db
@pytest.mark.parametrize("body, content_type, query, headers, status, message", [
    (b"\xff\x00 not protobuf", PROTOBUF, "?dataset=store-support", {}, 400, "not an OTLP traces request in protobuf"),
    (b"{\"resourceSpans\": [", "application/json", "?dataset=store-support", {}, 400, "not JSON"),
    (b"\xff\xfe", "application/json", "?dataset=store-support", {}, 400, "not UTF-8"),
    (b"resourceSpans", "text/plain", "?dataset=store-support", {}, 415, "'text/plain' is not accepted"),
    (b"\x1f\x8b not gzip", PROTOBUF, "?dataset=store-support", {"Content-Encoding": "gzip"}, 400, "not gzip"),
    (b"x", PROTOBUF, "?dataset=store-support", {"Content-Encoding": "br"}, 415, "'br' is not accepted"),
    (b"x", PROTOBUF, "", {}, 400, "Name the dataset"),
    (b"x", PROTOBUF, "?dataset=store-support", {"X-Evalhub-Dataset": "other"}, 400, "named twice"),
    (b"x", PROTOBUF, "?dataset=nope", {}, 404, "No dataset 'nope'"),
], ids=["garbage", "bad-json", "not-utf8", "content-type", "bad-gzip", "encoding", "no-dataset", "two-datasets",
        "unknown-dataset"])
def test_a_request_that_cannot_be_used_is_refused_with_a_status(client, dataset, token, body, content_type, query,
                                                                headers, status, message):
    response = post(client, body, token, content_type=content_type, query=query, **headers)

    assert response.status_code == status
    # In the request's content type when evalhub reads it (protobuf or JSON), else JSON.
    assert response["Content-Type"] == (content_type if content_type != "text/plain" else "application/json")
    assert message in _status(response).message
    assert not Case.objects.exists() and not OtlpTrace.objects.exists()


@pytest.mark.django_db
def test_a_gzip_bomb_is_refused_without_unpacking_it(client, dataset, token, settings):
    settings.EVALHUB_OTLP_MAX_BYTES = 1 << 20
    bomb = gzip.compress(b"\x00" * (8 << 20))  # 8 MiB of zeros in a few KiB

    response = post(client, bomb, token, Content_Encoding="gzip")

    assert response.status_code == 413 and "unpacks to over 1,048,576 bytes" in _status(response).message


@pytest.mark.django_db
def test_a_token_without_cases_write_is_refused(client, dataset, lead):
    tracer, exporter = recording_tracer()
    genai_trace(tracer)
    reader = ApiToken.issue(project=store_project(), name="reader", scopes=[Scope.CASES_READ], created_by=lead)[1]
    body = protobuf_body(exporter.get_finished_spans())

    assert post(client, body, None).status_code == 401
    refused = post(client, body, reader)
    assert refused.status_code == 403 and "lacks the scope 'cases:write'" in refused.json()["error"]
    assert not Case.objects.exists() and not OtlpTrace.objects.exists()


# --- projects: the receiver writes into a dataset of its token's project only ---------------------------------------


@pytest.mark.django_db
def test_a_dataset_of_another_project_is_refused_as_an_unknown_one(client, dataset, other_lead):
    from labeling.models import Dataset

    theirs = Dataset.objects.create(project=other_lead.memberships.get().project, slug="their-traffic", name="x")
    their_token = ApiToken.issue(project=theirs.project, name="agent", scopes=[Scope.CASES_WRITE],
                                 created_by=other_lead)[1]
    tracer, exporter = recording_tracer()
    genai_trace(tracer)
    body = protobuf_body(exporter.get_finished_spans())

    refused = post(client, body, their_token, query=f"?dataset={dataset.slug}")
    unknown = post(client, body, their_token, query="?dataset=never-made")

    assert refused.status_code == unknown.status_code == 404
    assert _status(refused).message == f"No dataset {dataset.slug!r}: create it in evalhub first."
    assert _status(unknown).message == "No dataset 'never-made': create it in evalhub first."
    assert not Case.objects.exists() and not OtlpTrace.objects.exists()
    # The same spans with the header naming their own dataset are theirs.
    assert post(client, body, their_token, query="", X_Evalhub_Dataset="their-traffic").status_code == 200
    assert list(Case.objects.values_list("dataset", flat=True)) == [theirs.pk]


@pytest.mark.django_db
def test_the_same_slug_in_two_projects_is_the_tokens_projects(client, dataset, token, other_lead):
    from labeling.models import Dataset

    twin = Dataset.objects.create(project=other_lead.memberships.get().project, slug=dataset.slug, name="twin")
    tracer, exporter = recording_tracer()
    genai_trace(tracer)

    assert post(client, protobuf_body(exporter.get_finished_spans()), token).status_code == 200

    assert Case.objects.filter(dataset=dataset).count() == 1 and not Case.objects.filter(dataset=twin).exists()
