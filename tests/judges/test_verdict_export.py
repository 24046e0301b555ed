"""Verdicts out: a run's judgments reach the project's OTLP endpoint as `gen_ai.evaluation.result` events,
parented to the judged trace's root span, sent by a real Celery worker after they are recorded and retried
when the backend fails. The endpoint is a small local OTLP/HTTP receiver that parses the protobuf."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

from judges.configs import services as config_services
from judges.export.otlp import ExportProblem, Verdict, destination, verdicts_request
from judges.export.tasks import export_label
from judges.models import Judgment, Run, VerdictExport
from judges.runs import services
from labeling.otlp.services import otlp_receive
from labeling.otlp.traces import request_from_protobuf, spans_of
from labeling.queue.services import label_submit
from tests.judges.helpers import behavioral_spec
from tests.judges.workers import broker_url, empty_broker, fresh, kill, queue_run_work, start_worker, wait_for
from tests.labeling.otlp.helpers import genai_trace, protobuf_body, recording_tracer


class OtlpReceiver(ThreadingHTTPServer):
    """An OTLP/HTTP logs endpoint: keeps each request's records and headers; answers 503 to the first
    `failures` requests, as a backend that is briefly down."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.requests: list[tuple[dict, ExportLogsServiceRequest]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.lock:
                    receiver.requests.append((dict(self.headers), ExportLogsServiceRequest.FromString(body)))
                    failing = len(receiver.requests) <= receiver.failures
                answer = b"" if failing else ExportLogsServiceResponse().SerializeToString()
                self.send_response(503 if failing else 200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1/logs"


@pytest.fixture
def receiver():
    server = OtlpReceiver(failures=1)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _attributes(record) -> dict:
    return {pair.key: getattr(pair.value, pair.value.WhichOneof("value")) for pair in record.attributes}


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_runs_verdicts_reach_the_projects_otlp_endpoint_beside_the_judged_trace(
        tmp_path, project, dataset, rubric, lead, fake_provider, receiver, monkeypatch):
    tracer, exporter = recording_tracer()
    trace_id = genai_trace(tracer)
    spans = spans_of(request_from_protobuf(protobuf_body(exporter.get_finished_spans())))
    root_span = next(span.span_id for span in spans if not span.parent_span_id)
    assert otlp_receive(dataset=dataset, spans=spans).written == 1
    monkeypatch.setenv("EVALHUB_EXPORT_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("EVALHUB_EXPORT_OTLP_HEADERS", "Authorization=Bearer%20backend-key")
    VerdictExport.objects.create(project=project, endpoint_env="EVALHUB_EXPORT_OTLP_ENDPOINT",
                                 headers_env="EVALHUB_EXPORT_OTLP_HEADERS")
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    url = broker_url("redis")
    empty_broker(url)
    worker = start_worker(tmp_path, "worker", broker=url, EVALHUB_OUTBOUND_ALLOW_PRIVATE="1")
    try:
        run = services.run_start(config=config, dataset=dataset, repeats=1, concurrency=2, spend_cap_usd=None,
                                 by=lead)
        queue_run_work(url, run.pk)
        wait_for(lambda: fresh(lambda: Run.objects.get(pk=run.pk).status) == Run.Status.FINISHED, 60,
                 "the run to finish")
        # The first send meets a 503; the task tries again.
        wait_for(lambda: len(receiver.requests) >= 2, 60, "the verdicts to be sent again after a 503")
    finally:
        kill(worker)

    judgment = Judgment.objects.get(run=run)
    headers, request = receiver.requests[-1]
    assert request == receiver.requests[0][1]  # the same events, sent again
    assert headers["Authorization"] == "Bearer backend-key"
    [record] = request.resource_logs[0].scope_logs[0].log_records
    assert record.event_name == "gen_ai.evaluation.result"
    assert (record.trace_id.hex(), record.span_id.hex()) == (trace_id, root_span)
    assert _attributes(record) == {
        "event.name": "gen_ai.evaluation.result",
        "gen_ai.evaluation.name": rubric.slug,
        "gen_ai.evaluation.score.label": judgment.outcome,
        "gen_ai.evaluation.score.value": 1.0 if judgment.outcome == "pass" else 0.0,
        "gen_ai.evaluation.explanation": judgment.reason,
        "evalhub.evaluator.kind": "judge",
        "evalhub.evaluator.config_version": config.version,
        "evalhub.case.external_id": trace_id,
        "evalhub.run.id": run.pk,
    }


@pytest.mark.parametrize("endpoint_env, problem", [
    ("DATABASE_URL", "not an allowed variable"),
    ("EVALHUB_SECRET_KEY", "not an allowed variable"),
    ("EVALHUB_EXPORT_UNSET", "is not set"),
])
def test_an_export_names_only_its_own_variables_and_says_what_is_missing(endpoint_env, problem, monkeypatch):
    monkeypatch.delenv("EVALHUB_EXPORT_UNSET", raising=False)
    with pytest.raises(ExportProblem, match=problem):
        destination(VerdictExport(endpoint_env=endpoint_env))


def test_a_case_not_from_otlp_is_exported_without_a_parent():
    request = verdicts_request([Verdict(rubric="r", outcome="fail", reason="why", kind="human",
                                        external_id="case-7", root_span="", time_unix_nano=1)])

    record = request.resource_logs[0].scope_logs[0].log_records[0]
    assert (record.trace_id, record.span_id) == (b"", b"")
    assert _attributes(record)["gen_ai.evaluation.score.label"] == "fail"


@pytest.mark.django_db
def test_a_reviewers_verdict_is_exported_as_a_humans(project, dataset, rubric, reviewer, receiver, monkeypatch,
                                                     settings, django_capture_on_commit_callbacks):
    settings.EVALHUB_OUTBOUND_ALLOW_PRIVATE = True
    receiver.failures = 0
    tracer, exporter = recording_tracer()
    trace_id = genai_trace(tracer)
    otlp_receive(dataset=dataset, spans=spans_of(request_from_protobuf(protobuf_body(exporter.get_finished_spans()))))
    case = dataset.cases.get()
    monkeypatch.setenv("EVALHUB_EXPORT_OTLP_ENDPOINT", receiver.url)
    VerdictExport.objects.create(project=project, endpoint_env="EVALHUB_EXPORT_OTLP_ENDPOINT")

    with django_capture_on_commit_callbacks() as queued:
        submitted = label_submit(case=case, rubric=rubric, reviewer=reviewer, verdict="fail",
                                 note="quotes a 14-day window", content_hash=case.content_hash)
    assert len(queued) == 1  # the export, queued once the label is committed
    assert export_label(submitted.label.pk) == 1  # what the worker runs

    [record] = receiver.requests[0][1].resource_logs[0].scope_logs[0].log_records
    attributes = _attributes(record)
    assert record.trace_id.hex() == trace_id
    assert attributes["evalhub.evaluator.kind"] == "human"
    assert attributes["gen_ai.evaluation.score.label"] == "fail"
    assert attributes["gen_ai.evaluation.explanation"] == "quotes a 14-day window"
    assert "evalhub.evaluator.config_version" not in attributes


@pytest.mark.django_db
def test_a_private_endpoint_is_refused_unless_the_instance_allows_it(project, dataset, rubric, reviewer, receiver,
                                                                    monkeypatch, settings):
    settings.EVALHUB_OUTBOUND_ALLOW_PRIVATE = False
    receiver.failures = 0
    case = dataset.cases.create(external_id="c1", input="q", output="a")
    monkeypatch.setenv("EVALHUB_EXPORT_OTLP_ENDPOINT", receiver.url)  # 127.0.0.1: loopback
    VerdictExport.objects.create(project=project, endpoint_env="EVALHUB_EXPORT_OTLP_ENDPOINT")
    submitted = label_submit(case=case, rubric=rubric, reviewer=reviewer, verdict="pass",
                             content_hash=case.content_hash)

    assert export_label(submitted.label.pk) == 0  # refused, logged, not retried
    assert receiver.requests == []
    settings.EVALHUB_OUTBOUND_ALLOW_PRIVATE = True
    assert export_label(submitted.label.pk) == 1
