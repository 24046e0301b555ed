"""The OTLP receiver under load: one token sends 20 requests a second of 1 MiB of root-less traces (their root
span never comes) for a minute, while /api/gates is read; on PostgreSQL and on SQLite. Loopback only, bounded.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalhub .venv/bin/python benchmarks/bench_otlp_load.py \
        [--database postgres|sqlite|both] [--seconds 60] [--rate 20] [--traces 900]

PostgreSQL: a database of its own on DATABASE_URL's server (`evalhub_bench_otlp_load`, dropped at the end);
SQLite: the embedded default in a temporary folder. gunicorn, 2 workers × 4 threads (as the other serving
benchmarks). The sender keeps to `--rate` requests a second with at most 8 in flight (a slower server lowers the
rate it gets, as an exporter's queue would); each request is `--traces` one-span traces padded to 1 MiB, so it is
under EVALHUB_OTLP_MAX_REQUEST_WAITING and the dataset fills to EVALHUB_OTLP_MAX_WAITING (then 429) while the
waits run out and are given up (EVALHUB_OTLP_TRACE_WAIT_SECONDS=10 here, the give-up run by the next request).
A reader GETs /api/gates 5 times a second throughout. Reported: the answers' statuses, the receiver's and
/api/gates' latency (p50, p99, max, how many over 1 s), the workers' peak memory, and the receiver's memory per
MiB of body (one worker's peak growth over one body of 1, 4 and 16 MiB). Writes
benchmarks/results/bench_otlp_load.<database>.json.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

MIB = 1 << 20
IN_FLIGHT = 8
GATES_PER_SECOND = 5


def rootless_body(traces: int, first: int, size: int = MIB, *, whole: bool = False) -> bytes:
    """`traces` one-span traces whose root span never comes, each a user message padded so the body is ~`size`;
    `whole`: each span is its trace's root, with an answer too (each trace is a case)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    pad = "x" * max(0, size // traces - 120)
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for i in range(first, first + traces):
        span = spans.add(trace_id=(i + 1).to_bytes(16, "big"), span_id=(i + 1).to_bytes(8, "big"),
                         parent_span_id=b"" if whole else b"\x01" * 8, name="chat", start_time_unix_nano=1,
                         end_time_unix_nano=2)
        message = [{"role": "user", "parts": [{"type": "text", "content": f"order {i} {pad}"}]}]
        span.attributes.add(key="gen_ai.input.messages").value.string_value = json.dumps(message)
        if whole:
            answer = [{"role": "assistant", "parts": [{"type": "text", "content": f"Order {i} ships today."}]}]
            span.attributes.add(key="gen_ai.output.messages").value.string_value = json.dumps(answer)
    return request.SerializeToString()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")


def latency(times: list[float]) -> dict:
    return {"n": len(times), "p50_s": round(percentile(times, 0.5), 3), "p99_s": round(percentile(times, 0.99), 3),
            "max_s": round(max(times), 3) if times else None, "over_1s": sum(t > 1 for t in times)}


def send(url: str, token: str, body: bytes, content_type: str = "application/x-protobuf") -> tuple[int, float]:
    request = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET", headers={
        "Authorization": f"Bearer {token}", "Content-Type": content_type})
    began = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            response.read()
            status = response.status
    except urllib.error.HTTPError as exc:
        exc.read()
        status = exc.code
    except OSError:
        status = 0
    return status, time.perf_counter() - began


def workers_of(master: int) -> list[int]:
    return [int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()]


def memory_mb(pid: int, field: str = "VmRSS") -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith(field + ":"))) / 1024


def load(base: str, master: int, tokens: dict, *, seconds: float, rate: float, traces: int) -> dict:
    otlp_url = f"{base}/api/otlp/v1/traces?dataset=agent-traces"
    bodies = [rootless_body(traces, first=i * traces) for i in range(int(seconds * rate) + 1)]
    statuses: dict[int, int] = {}
    otlp_times: list[float] = []
    gates_times: list[float] = []
    gates_statuses: dict[int, int] = {}
    peak = {"rss_mb": 0.0}
    stop = threading.Event()

    def read_gates() -> None:
        while not stop.is_set():
            status, took = send(f"{base}/api/gates", tokens["gates"], None)
            gates_times.append(took)
            gates_statuses[status] = gates_statuses.get(status, 0) + 1
            time.sleep(max(0.0, 1 / GATES_PER_SECOND - took))

    def watch_memory() -> None:
        while not stop.is_set():
            try:
                peak["rss_mb"] = max(peak["rss_mb"], *(memory_mb(pid) for pid in workers_of(master)))
            except (OSError, StopIteration, ValueError):
                pass
            time.sleep(0.2)

    def one(body: bytes) -> None:
        status, took = send(otlp_url, tokens["otlp"], body)
        otlp_times.append(took)
        statuses[status] = statuses.get(status, 0) + 1

    helpers = [threading.Thread(target=read_gates), threading.Thread(target=watch_memory)]
    for helper in helpers:
        helper.start()
    began = time.perf_counter()
    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        pending = []
        for i, body in enumerate(bodies):
            due = began + i / rate
            if due - began >= seconds:
                break
            time.sleep(max(0.0, due - time.perf_counter()))
            pending = [f for f in pending if not f.done()]
            if len(pending) >= IN_FLIGHT:  # the sender's queue is full: this request is not sent (as an exporter drops)
                statuses[-1] = statuses.get(-1, 0) + 1
                continue
            pending.append(pool.submit(one, body))
    wall = time.perf_counter() - began
    stop.set()
    for helper in helpers:
        helper.join()
    return {"seconds": round(wall, 1), "offered_per_s": rate, "sent": len(otlp_times),
            "sent_per_s": round(len(otlp_times) / wall, 1), "body_mib": round(len(bodies[0]) / MIB, 2),
            "traces_per_request": traces, "otlp_statuses": {str(k): v for k, v in sorted(statuses.items())},
            "otlp_latency": latency(otlp_times),
            "gates_statuses": {str(k): v for k, v in sorted(gates_statuses.items())},
            "gates_latency": latency(gates_times), "workers_peak_rss_mb": round(peak["rss_mb"], 1)}


def memory_per_mib(base: str, master: int, token: str) -> dict:
    """One worker's peak growth (its peak resident memory, reset before, less its memory before) over one body of
    1, 4 and 16 MiB of whole one-span traces (each a case: the receiver's whole path), the largest peak of the
    two workers (whichever took the request)."""
    found = {}
    for mib in (1, 4, 16):
        body = rootless_body(500 * mib, first=10_000_000 * mib, size=mib * MIB, whole=True)
        before = {}
        for pid in workers_of(master):
            Path(f"/proc/{pid}/clear_refs").write_text("5")  # resets VmHWM to the current VmRSS
            before[pid] = memory_mb(pid)
        status, took = send(f"{base}/api/otlp/v1/traces?dataset=memory", token, body)
        grown = max(memory_mb(pid, "VmHWM") - rss for pid, rss in before.items())
        found[f"{mib}_mib"] = {"status": status, "seconds": round(took, 2), "peak_growth_mb": round(grown, 1),
                               "mb_per_mib": round(grown / (len(body) / MIB), 1)}
    return found


def run(database: str, args: argparse.Namespace) -> dict:
    env = {"EVALHUB_OTLP_TRACE_WAIT_SECONDS": "10", "DJANGO_DEBUG": "0", "DJANGO_ALLOWED_HOSTS": "127.0.0.1"}
    os.environ.update(env)
    if database == "sqlite":
        folder = tempfile.mkdtemp(prefix="bench-otlp-load-")
        os.environ.pop("DATABASE_URL", None)
        os.environ.pop("CELERY_BROKER_URL", None)
        os.environ["EVALHUB_DATA_DIR"] = folder
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalhub.settings")
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        return measure(database, args)
    from _benchdb import bench_database

    with bench_database("evalhub_bench_otlp_load", keep=False, force_drop=True):
        return measure(database, args)


def measure(database: str, args: argparse.Namespace) -> dict:
    from _benchdb import bench_project
    from bench_post_cases import gunicorn

    from evalhub.models import ApiToken, Scope, User
    from labeling.models import Dataset, OtlpRefusal, OtlpTrace

    lead = User.objects.create_user(username="bench-lead", password="x")
    project = bench_project("bench-otlp-load", leads=[lead])
    Dataset.objects.create(project=project, slug="agent-traces", name="Agent traces")
    Dataset.objects.create(project=project, slug="memory", name="Memory")
    tokens = {"otlp": ApiToken.issue(project=project, name="agent", scopes=[Scope.CASES_WRITE], created_by=lead)[1],
              "gates": ApiToken.issue(project=project, name="ci", scopes=[Scope.GATES_READ], created_by=lead)[1]}
    results = ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    with gunicorn(results / f"bench_otlp_load.{database}.gunicorn.log") as (base, process):
        idle = latency([send(f"{base}/api/gates", tokens["gates"], None)[1] for _ in range(20)])
        loaded = load(base, process.pid, tokens, seconds=args.seconds, rate=args.rate, traces=args.traces)
        memory = memory_per_mib(base, process.pid, tokens["otlp"])
    figures = {"database": database, "gates_idle": idle, **loaded, "memory_per_mib_of_body": memory,
               "waiting_at_end": OtlpTrace.objects.filter(gave_up_at__isnull=True).count(),
               "given_up_at_end": OtlpTrace.objects.filter(gave_up_at__isnull=False).count(),
               "refusals": list(OtlpRefusal.objects.values("status", "requests", "traces", "why")),
               "cores": os.cpu_count(), "load_average_after": round(os.getloadavg()[0], 1)}
    (results / f"bench_otlp_load.{database}.json").write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", choices=("postgres", "sqlite", "both"), default="both")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=20.0, help="requests a second")
    parser.add_argument("--traces", type=int, default=900, help="root-less traces in each 1 MiB request")
    args = parser.parse_args()
    if args.database == "both":  # each database in a process of its own (Django is set up once a process)
        for database in ("postgres", "sqlite"):
            subprocess.run([sys.executable, __file__, "--database", database, "--seconds", str(args.seconds),
                            "--rate", str(args.rate), "--traces", str(args.traces)], check=True)
        return
    figures = run(args.database, args)
    summary = {key: figures[key] for key in ("database", "sent_per_s", "otlp_statuses", "otlp_latency",
                                             "gates_idle", "gates_latency", "gates_statuses", "workers_peak_rss_mb",
                                             "memory_per_mib_of_body")}
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
