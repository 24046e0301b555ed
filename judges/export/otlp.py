"""Verdicts out as OpenTelemetry `gen_ai.evaluation.result` events (docs/otlp.md, "Verdicts out"), so they show
beside the agent's trace in Phoenix, Langfuse or any OTLP backend.

A project names where they go (`VerdictExport`: the names of the environment variables holding the OTLP/HTTP
logs endpoint and its headers, read by the worker, never stored). After the worker records a batch of
judgments (judges.runs.worker.judgments_record) the export task sends them, one log record each, through
evalhub/outbound.py (http(s), no private address unless the instance allows it), retried with backoff when
the backend fails or cannot be reached. A case that came from OTLP (its `external_id` is the trace id, its
metadata keeps the root span's id) has its event parented to that root span.

The convention's attributes: `gen_ai.evaluation.name` (the rubric's slug), `gen_ai.evaluation.score.label`
(pass / fail), `gen_ai.evaluation.score.value` (1.0 / 0.0), `gen_ai.evaluation.explanation` (the reason).
It names no evaluator yet, so evalhub adds, under its own namespace: `evalhub.evaluator.kind` (judge or
human: a backend must tell a model's verdict from a reviewer's), `evalhub.evaluator.config_version` (which
judge config version gave it: verdicts of two versions are not comparable), `evalhub.run.id` and
`evalhub.case.external_id` (to find it again in evalhub).
"""

import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

log = logging.getLogger(__name__)

EVENT = "gen_ai.evaluation.result"
SCOPE = "evalhub"
# The variables an export may name: the OTel exporter's own, or evalhub's export ones (never the app's secrets).
ENV_NAME = re.compile(r"^(OTEL_EXPORTER_OTLP_|EVALHUB_EXPORT_)[A-Z0-9_]+$")
_HEX = re.compile(r"^[0-9a-f]+$")


class ExportProblem(ValueError):
    """The export cannot be sent as configured (a name not allowed, a variable not set): retrying won't help."""


@dataclass(frozen=True)
class Verdict:
    """One verdict to export: who gave it, on which case, under which rubric and config version."""

    rubric: str
    outcome: str  # pass / fail / not_evaluated
    reason: str
    kind: str  # judge / human
    external_id: str
    root_span: str
    time_unix_nano: int
    config_version: int | None = None
    run_id: int | None = None


def env_name_problem(name: str) -> str | None:
    if not ENV_NAME.match(name):
        return (f"{name[:60]!r} is not an allowed variable: name one starting OTEL_EXPORTER_OTLP_ or "
                "EVALHUB_EXPORT_")
    return None


def _string(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def verdicts_request(verdicts: Iterable[Verdict]) -> ExportLogsServiceRequest:
    """The OTLP logs request of these verdicts, one `gen_ai.evaluation.result` record each."""
    request = ExportLogsServiceRequest()
    resource = request.resource_logs.add()
    resource.resource.attributes.append(_string("service.name", "evalhub"))
    scope = resource.scope_logs.add()
    scope.scope.name = SCOPE
    for verdict in verdicts:
        record = LogRecord(time_unix_nano=verdict.time_unix_nano, event_name=EVENT)
        if len(verdict.external_id) == 32 and len(verdict.root_span) == 16 and _HEX.match(
                verdict.external_id + verdict.root_span):
            record.trace_id, record.span_id = bytes.fromhex(verdict.external_id), bytes.fromhex(verdict.root_span)
        attributes = [_string("event.name", EVENT), _string("gen_ai.evaluation.name", verdict.rubric),
                      _string("evalhub.evaluator.kind", verdict.kind),
                      _string("evalhub.case.external_id", verdict.external_id)]
        if verdict.outcome in ("pass", "fail"):
            attributes += [_string("gen_ai.evaluation.score.label", verdict.outcome),
                           KeyValue(key="gen_ai.evaluation.score.value",
                                    value=AnyValue(double_value=1.0 if verdict.outcome == "pass" else 0.0))]
        else:
            attributes.append(_string("error.type", verdict.outcome))
        if verdict.reason:
            attributes.append(_string("gen_ai.evaluation.explanation", verdict.reason))
        if verdict.config_version is not None:
            attributes.append(KeyValue(key="evalhub.evaluator.config_version",
                                       value=AnyValue(int_value=verdict.config_version)))
        if verdict.run_id is not None:
            attributes.append(KeyValue(key="evalhub.run.id", value=AnyValue(int_value=verdict.run_id)))
        record.attributes.extend(attributes)
        scope.log_records.append(record)
    return request


def _headers(text: str) -> dict[str, str]:
    """OTEL_EXPORTER_OTLP_HEADERS' form: `key=value,key2=value2`, URL-encoded."""
    headers = {}
    for pair in text.split(","):
        key, sep, value = pair.partition("=")
        if sep and key.strip():
            headers[unquote(key.strip())] = unquote(value.strip())
    return headers


def destination(export) -> tuple[str, dict[str, str]]:
    """The endpoint and headers a VerdictExport names, read from the environment now; ExportProblem when a
    name is not allowed or not set."""
    for name in filter(None, (export.endpoint_env, export.headers_env)):
        problem = env_name_problem(name)
        if problem:
            raise ExportProblem(problem)
    endpoint = os.environ.get(export.endpoint_env, "").strip()
    if not endpoint:
        raise ExportProblem(f"{export.endpoint_env} is not set in the worker's environment")
    headers = _headers(os.environ.get(export.headers_env, "")) if export.headers_env else {}
    return endpoint, headers
