"""The OTLP receiver: 10,000 agent traces of 5 spans each sent by the official OTLP/HTTP exporter to gunicorn.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalhub .venv/bin/python benchmarks/bench_otlp.py [--traces N]

A database of its own on DATABASE_URL's server (`evalhub_bench_otlp`, dropped at the end), gunicorn (2 workers ×
4 threads, as benchmarks/bench_post_cases.py runs it). The traces are recorded with the OpenTelemetry SDK first
(not timed): invoke_agent → chat → retrieval → execute_tool → chat, as the GenAI conventions write them. They are
then exported in batches of 512 spans in the order the spans ended, one export at a time, as the SDK's
BatchSpanProcessor sends them (so a trace may straddle two requests and wait for its root span), each export timed
with the exporter's own `export` (encoding and HTTP included), and the encoding alone, so the receiver's share is
each export less its encoding. Reported: traces per second, the median and p95 time per request, and, as the
peer, the same cases (read back from the database) posted to the ingest API (POST /api/datasets/<slug>/cases)
in as many requests: the ratio says what reading spans costs over writing the cases alone. Writes
benchmarks/results/bench_otlp.json.
"""

import argparse
import json
import os
import statistics
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _benchdb import bench_database, bench_project  # noqa: E402
from bench_post_cases import gunicorn  # noqa: E402

BATCH_SPANS = 512  # the BatchSpanProcessor's max_export_batch_size


def record(n: int) -> list:
    """n agent traces of five spans, ended in order, with their questions and answers varied."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.labeling.otlp.helpers import genai_trace

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench")
    for i in range(n):
        genai_trace(tracer, question=f"Can I return the shoes from order A-{i}? They arrived {i % 40} days ago.",
                    answer=f"Order A-{i} is {'within' if i % 40 < 30 else 'outside'} the 30-day return window.")
    return list(exporter.get_finished_spans())


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def encoding_times(spans: list) -> list[float]:
    """The client's own share of each export: encoding the batch as the exporter does, without sending it."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    times = []
    for start in range(0, len(spans), BATCH_SPANS):
        began = time.perf_counter()
        encode_spans(spans[start:start + BATCH_SPANS]).SerializePartialToString()
        times.append(time.perf_counter() - began)
    return times


def export_all(spans: list, base: str, token: str) -> list[float]:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    exporter = OTLPSpanExporter(endpoint=f"{base}/api/otlp/v1/traces?dataset=agent-traces",
                                headers={"Authorization": f"Bearer {token}"}, timeout=120)
    times = []
    for start in range(0, len(spans), BATCH_SPANS):
        began = time.perf_counter()
        result = exporter.export(spans[start:start + BATCH_SPANS])
        times.append(time.perf_counter() - began)
        if result != SpanExportResult.SUCCESS:
            sys.exit(f"the export of spans {start}… failed")
    return times


def ingest_all(cases: list[dict], requests: int, base: str, token: str) -> list[float]:
    size = -(-len(cases) // requests)
    times = []
    for start in range(0, len(cases), size):
        body = json.dumps(cases[start:start + size]).encode()
        request = urllib.request.Request(f"{base}/api/datasets/ingested/cases", data=body, method="POST", headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        began = time.perf_counter()
        with urllib.request.urlopen(request, timeout=120) as response:
            response.read()
        times.append(time.perf_counter() - began)
    return times


def summary(times: list[float], traces: int) -> dict:
    wall = sum(times)
    return {"requests": len(times), "wall_s": round(wall, 2), "traces_per_s": round(traces / wall, 1),
            "median_request_s": round(statistics.median(times), 3), "p95_request_s": round(percentile(times, 0.95), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=10_000)
    parser.add_argument("--keep", action="store_true", help="keep the benchmark's database")
    args = parser.parse_args()

    began = time.perf_counter()
    spans = record(args.traces)
    print(f"recorded {len(spans):,} spans of {args.traces:,} traces in {time.perf_counter() - began:.1f} s (not timed)")
    results = ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    with bench_database("evalhub_bench_otlp", keep=args.keep, force_drop=True):
        from evalhub.models import ApiToken, Scope, User
        from labeling.models import Case, Dataset, OtlpTrace

        lead = User.objects.create_user(username="bench-lead", password="x")
        project = bench_project("bench-otlp", leads=[lead])
        otlp_set = Dataset.objects.create(project=project, slug="agent-traces", name="Agent traces")
        Dataset.objects.create(project=project, slug="ingested", name="The same cases through the ingest API")
        token = ApiToken.issue(project=project, name="bench", scopes=[Scope.CASES_WRITE], created_by=lead)[1]
        with gunicorn(results / "bench_otlp.gunicorn.log") as (base, _):
            load_before = os.getloadavg()[0]
            exports = export_all(spans, base, token)
            encoding = encoding_times(spans)
            otlp = summary(exports, args.traces)
            # The receiver's share: each export less the client's encoding of the same batch.
            receiver = summary([max(e - c, 1e-6) for e, c in zip(exports, encoding, strict=True)], args.traces)
            written = Case.objects.filter(dataset=otlp_set).count()
            waiting = OtlpTrace.objects.count()
            columns = ("external_id", "input", "output", "trace", "metadata")
            cases = [dict(zip(columns, row, strict=True))
                     for row in Case.objects.filter(dataset=otlp_set).order_by("pk").values_list(*columns)]
            ingest = summary(ingest_all(cases, otlp["requests"], base, token), args.traces)
            load_after = os.getloadavg()[0]
    figures = {
        "traces": args.traces, "spans": len(spans), "batch_spans": BATCH_SPANS, "cases_written": written,
        "traces_split_over_two_requests": sum(spans[i - 1].context.trace_id == spans[i].context.trace_id
                                              for i in range(BATCH_SPANS, len(spans), BATCH_SPANS)),
        "traces_still_waiting": waiting, "otlp_export": otlp, "client_encoding_s": round(sum(encoding), 2),
        "otlp_receiver": receiver, "ingest_api_same_cases": ingest,
        "receiver_over_ingest_wall": round(receiver["wall_s"] / ingest["wall_s"], 2),
        "receiver_over_ingest_p95": round(receiver["p95_request_s"] / ingest["p95_request_s"], 2),
        "load_average": [round(load_before, 1), round(load_after, 1)], "cores": os.cpu_count(),
    }
    (results / "bench_otlp.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    if written != args.traces or waiting:
        sys.exit(f"expected {args.traces} cases and none waiting; got {written} and {waiting} waiting")


if __name__ == "__main__":
    main()
