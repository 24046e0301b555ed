"""The receiver's bounds, through gunicorn (docs/otlp.md, "Limits"): what waits for a root span is bounded per
request and per dataset and answered with OTLP's retry rules; what a body holds is bounded before its values are
built; the waiting traces are given up in short batches by one run at a time."""

import gzip
import json
import threading
import time
from datetime import timedelta

import httpx
import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from evalhub.models import ApiToken, Scope
from labeling.models import Case, OtlpRefusal, OtlpTrace
from labeling.otlp import services
from labeling.otlp.services import otlp_give_up
from tests.conftest import store_project
from tests.labeling.otlp.served import gunicorn

URL = "/api/otlp/v1/traces?dataset=store-support"
PROTOBUF = "application/x-protobuf"


@pytest.fixture
def token(lead) -> str:
    return ApiToken.issue(project=store_project(), name="agent", scopes=[Scope.CASES_WRITE], created_by=lead)[1]


def rootless(n: int, *, first: int = 0) -> bytes:
    """n traces of one span each whose root span never comes (each span has a parent), as an agent's child
    spans are exported before the root's: a user message each, as the GenAI conventions write it."""
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for i in range(first, first + n):
        span = spans.add(trace_id=(i + 1).to_bytes(16, "big"), span_id=(i + 1).to_bytes(8, "big"),
                         parent_span_id=b"\x01" * 8, name="chat gpt-4o", start_time_unix_nano=1, end_time_unix_nano=2)
        message = [{"role": "user", "parts": [{"type": "text", "content": f"Where is order A-{i}?"}]}]
        span.attributes.add(key="gen_ai.input.messages").value.string_value = json.dumps(message)
    return request.SerializeToString()


def post(base: str, token: str, body: bytes, *, content_type: str = PROTOBUF, **headers: str) -> httpx.Response:
    return httpx.post(base + URL, content=body, timeout=60, headers={
        "Authorization": f"Bearer {token}", "Content-Type": content_type, **headers})


def status_of(response: httpx.Response) -> status_pb2.Status:
    if response.headers["content-type"] == PROTOBUF:
        return status_pb2.Status.FromString(response.content)
    return status_pb2.Status(message=response.json()["message"])


@pytest.mark.django_db(transaction=True)
def test_twenty_thousand_rootless_traces_are_refused_at_once_and_nothing_waits(dataset, token, tmp_path):
    body = rootless(20_000)  # 5 MiB, under the body's limit: what took 91 s and 222 MB, and held the database
    with gunicorn(tmp_path) as served:
        began = time.monotonic()
        response = post(served.base, token, body)
        took = time.monotonic() - began

    assert response.status_code == 413, response.text
    assert "The number of spans in the request is over the limit of 10,000 (EVALHUB_OTLP_MAX_SPANS)" in (
        status_of(response).message)
    assert took < 30  # a coarse bound (it used to be 91 s); the speed is benchmarks/bench_otlp_load.py's
    assert not OtlpTrace.objects.exists() and not Case.objects.exists()
    refusal = OtlpRefusal.objects.get(dataset=dataset)
    assert (refusal.status, refusal.requests) == (413, 1) and "EVALHUB_OTLP_MAX_SPANS" in refusal.detail


@pytest.mark.django_db(transaction=True)
def test_a_dataset_full_of_waiting_traces_answers_429_with_the_retry_delay(dataset, token, tmp_path):
    with gunicorn(tmp_path, EVALHUB_OTLP_MAX_WAITING="3000", EVALHUB_OTLP_MAX_REQUEST_WAITING="2000") as served:
        too_many = post(served.base, token, rootless(2_001))
        first = post(served.base, token, rootless(1_500))
        second = post(served.base, token, rootless(1_500, first=1_500))
        over = post(served.base, token, rootless(1, first=3_000))
        in_json = post(served.base, token, json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{
            "traceId": "ab" * 16, "spanId": "cd" * 8, "parentSpanId": "ef" * 8, "name": "chat"}]}]}]}).encode(),
            content_type="application/json")

    # One request may leave at most 2,000 traces waiting: it can never be taken, so 413 (no retry).
    assert too_many.status_code == 413 and "EVALHUB_OTLP_MAX_REQUEST_WAITING" in status_of(too_many).message
    assert first.status_code == second.status_code == 200
    # The dataset holds 3,000: the next is 429, with the delay in Retry-After and in the Status's RetryInfo.
    assert over.status_code == 429 and 1 <= int(over.headers["Retry-After"]) <= 60
    status = status_of(over)
    assert "over the limit of 3,000 (EVALHUB_OTLP_MAX_WAITING)" in status.message
    retry = error_details_pb2.RetryInfo()
    assert status.details[0].Unpack(retry) and retry.retry_delay.seconds == int(over.headers["Retry-After"])
    assert in_json.status_code == 429 and in_json.headers["content-type"] == "application/json"
    assert OtlpTrace.objects.filter(dataset=dataset).count() == 3_000  # nothing of the refused requests
    whys = dict(OtlpRefusal.objects.values_list("status", "requests"))
    assert whys == {413: 1, 429: 2}


@pytest.mark.django_db(transaction=True)
def test_waiting_traces_are_given_up_in_short_batches_and_the_next_request_takes_one(dataset, token, tmp_path,
                                                                                     settings):
    settings.EVALHUB_OTLP_GIVE_UP_BATCH, settings.EVALHUB_OTLP_TRACE_WAIT_SECONDS = 400, 1
    with gunicorn(tmp_path, EVALHUB_OTLP_TRACE_WAIT_SECONDS="1", EVALHUB_OTLP_GIVE_UP_BATCH="400",
                  EVALHUB_OTLP_MAX_REQUEST_WAITING="2000") as served:
        assert post(served.base, token, rootless(1_900)).status_code == 200
        time.sleep(1.5)
        # The dataset's next request gives up one batch, not all 1,900 (the rest is the periodic task's).
        answer = post(served.base, token, rootless(1, first=5_000))
    assert answer.status_code == 200
    assert OtlpTrace.objects.filter(gave_up_at__isnull=False).count() == 400

    later = timezone.now() + timedelta(seconds=5)
    with CaptureQueriesContext(connection) as queries:
        assert otlp_give_up(now=later) == 1_501
    updates = [q["sql"] for q in queries if q["sql"].startswith('UPDATE "labeling_otlptrace" SET "problem"')]
    assert len(updates) == 4  # 400 + 400 + 400 + 301, each its own transaction
    assert not OtlpTrace.objects.filter(gave_up_at__isnull=True).exists()
    given_up = OtlpRefusal.objects.get(why__startswith="incomplete")
    assert (given_up.traces, given_up.requests) == (1_901, 0)  # their spans are not counted: pieces not read


@pytest.mark.django_db(transaction=True)
def test_the_give_up_never_waits_for_a_dataset_a_request_holds_nor_runs_twice(dataset, settings):
    settings.EVALHUB_OTLP_TRACE_WAIT_SECONDS = 1
    OtlpTrace.objects.bulk_create([OtlpTrace(dataset=dataset, trace_id=f"{i:032x}", pieces=[{"span": "1"}],
                                             first_seen_at=timezone.now() - timedelta(minutes=5)) for i in range(10)])
    held, release = threading.Event(), threading.Event()

    def hold_the_dataset() -> None:  # as a request does while it writes
        from django.db import transaction

        from labeling.models import Dataset
        try:
            with transaction.atomic():
                Dataset.objects.select_for_update().get(pk=dataset.pk)
                held.set()
                release.wait(30)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold_the_dataset)
    holder.start()
    try:
        assert held.wait(10)
        began = time.monotonic()
        assert otlp_give_up() == 0  # skipped, not waited for
        assert time.monotonic() - began < 5
    finally:
        release.set()
        holder.join()
    # A run that finds another still working does nothing (the advisory lock is held by another connection).
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [services._GIVE_UP_LOCK])
        assert otlp_give_up() is None
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [services._GIVE_UP_LOCK])
    finally:
        other.close()
    assert otlp_give_up() == 10


@pytest.mark.django_db(transaction=True)
def test_amplified_bodies_are_refused_before_their_values_are_built(dataset, token, tmp_path):
    # 1.15M intValues in one array attribute: 18.6 MiB of OTLP/JSON, 46 KiB gzipped (329 MB and 30 s before).
    values = ",".join(['{"intValue":"1"}'] * 1_150_000)
    json_bomb = gzip.compress(('{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"' + "ab" * 16 + '",'
                               '"spanId":"' + "cd" * 8 + '","name":"x","attributes":[{"key":"k","value":'
                               '{"arrayValue":{"values":[' + values + ']}}}]}]}]}]}').encode(), 9)
    # 5M bools in protobuf (19 MiB; 340 MB before): parsed by protobuf alone that is 229 MB.
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
    array = span.attributes.add(key="k").value.array_value.values
    for _ in range(5_000_000):
        array.add(bool_value=True)
    bools = request.SerializeToString()
    del request, span, array
    many_attributes = ExportTraceServiceRequest()
    span = many_attributes.resource_spans.add().scope_spans.add().spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
    for i in range(129):
        span.attributes.add(key=f"a{i}").value.int_value = i

    with gunicorn(tmp_path) as served:
        post(served.base, token, rootless(1))  # the worker warmed up: imports and a connection
        before = served.worker_rss_mb()
        answers = [post(served.base, token, json_bomb, content_type="application/json", **{"Content-Encoding": "gzip"}),
                   post(served.base, token, bools),
                   post(served.base, token, many_attributes.SerializeToString())]
        grown = served.worker_rss_mb() - before

    assert [answer.status_code for answer in answers] == [413, 413, 413]
    messages = [status_of(answer).message for answer in answers]
    assert "JSON values in the request (counted from its commas) is over the limit of 200,000" in messages[0]
    assert "values of an array attribute is over the limit of 1,000 (EVALHUB_OTLP_MAX_ARRAY)" in messages[1]
    assert "attributes of a span is over the limit of 128 (EVALHUB_OTLP_MAX_ATTRIBUTES)" in messages[2]
    # A coarse bound: the bodies themselves (19 MiB read, 18.6 MiB unpacked and its text) are held for a moment.
    assert grown < 120, f"the worker grew by {grown:.0f} MB"
    assert not OtlpTrace.objects.filter(trace_id="01" * 16).exists()


@pytest.mark.django_db
def test_a_server_process_receives_a_few_requests_at_once_and_asks_the_others_to_retry(client, dataset, token,
                                                                                      settings):
    from labeling.otlp import api

    held = 0
    while api._RECEIVING.acquire(blocking=False):  # as many receives as the process takes are under way
        held += 1
    try:
        busy = client.post(URL, data=rootless(1), content_type=PROTOBUF, headers={"Authorization": f"Bearer {token}"})
    finally:
        for _ in range(held):
            api._RECEIVING.release()
    free = client.post(URL, data=rootless(1), content_type=PROTOBUF, headers={"Authorization": f"Bearer {token}"})

    assert held == settings.EVALHUB_OTLP_CONCURRENCY == 1
    assert busy.status_code == 429 and busy["Retry-After"] == "1"
    assert "busy with other requests (EVALHUB_OTLP_CONCURRENCY)" in status_pb2.Status.FromString(busy.content).message
    assert free.status_code == 200 and OtlpTrace.objects.count() == 1


@pytest.mark.django_db
def test_new_waiting_traces_are_inserted_once_never_updated_after(client, dataset, token):
    # The rows bulk_create had just inserted were once updated again in one CASE of as many branches as rows
    # (23 of the 32 s of a request of 20,000 traces): now inserted with their final values, in batches of 500.
    with CaptureQueriesContext(connection) as queries:
        answer = client.post(URL, data=rootless(900), content_type=PROTOBUF,
                             headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200 and OtlpTrace.objects.count() == 900
    writes = [q["sql"] for q in queries if "labeling_otlptrace" in q["sql"].split(" WHERE ")[0]
              and q["sql"].startswith(("INSERT", "UPDATE"))]
    assert [sql.split(" ")[0] for sql in writes] == ["INSERT", "INSERT"]  # 500 + 400, and no UPDATE
