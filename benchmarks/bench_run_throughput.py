"""Runs at full speed: a run through a real Celery worker against the engine alone, and both against the ideal.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalhub CELERY_BROKER_URL=redis://127.0.0.1:6379/6 \\
        .venv/bin/python benchmarks/bench_run_throughput.py [--small 800] [--large 20000] [--times 5]

It uses a database of its own on DATABASE_URL's server (`evalhub_bench_throughput`, dropped at the end),
the broker of CELERY_BROKER_URL (its queue is emptied first: give it a Redis db or a RabbitMQ vhost of its
own), the scripted stand-in provider in its own process and one worker (`--concurrency=2`). Every judgment
is a behavioral call (2 repeats a case, concurrency 16, no retries), with two latency models: log-normal
(median 200 ms, sigma 0.8, seeded) and a fixed 200 ms. For each:
1. `--small` judgments, `--times` times: the engine alone (`judge_batch` in this process) and then a run
   through the worker, on the same cases with the same seeded latencies. A run's time is from its row's
   creation to its `finished_at` (queueing, claims, recording and all);
2. `--large` judgments through the worker, once, sampling the worker's memory and timing the run page's
   progress partial while it works (`--engine-large` also times the engine alone there);
3. two runs of `--small` judgments at once (two models, each its own run and cap of 16), on the same worker.
The ideal is the latency the stand-in served, summed, over the concurrency: what a batch with no overhead
at all would take. Results go to benchmarks/results/bench_run_throughput.json.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._benchdb import bench_database, bench_project  # noqa: E402  (after ROOT is on the path)

CONCURRENCY = 16
REPEATS = 2
MODELS = ("bench-judge-a", "bench-judge-b")
LATENCIES = {
    "log-normal (median 200 ms, sigma 0.8)": {"latency_ms": 200, "latency_sigma": 0.8},
    "fixed 200 ms": {"latency_ms": 200, "latency_sigma": 0},
}


def rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except FileNotFoundError:
        pass
    return 0


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU time of these processes so far."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except FileNotFoundError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


def process_tree(root: int) -> list[int]:
    """The worker's main process and its pool's children."""
    pids = [root]
    for pid in pids:
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as children:
                pids += [int(c) for c in children.read().split()]
        except FileNotFoundError:
            pass
    return pids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=800, help="judgments of the repeated comparison")
    parser.add_argument("--large", type=int, default=20_000, help="judgments of the long run (0: skip it)")
    parser.add_argument("--times", type=int, default=5, help="how many times the small comparison runs")
    parser.add_argument("--pair", type=int, help="judgments of each of the two runs at once (default: --small)")
    parser.add_argument("--engine-large", action="store_true", help="time the engine alone at --large too")
    parser.add_argument("--only", choices=["log-normal", "fixed"], help="one latency model only")
    parser.add_argument("--timeline", action="store_true", help="print the two runs' judgments recorded a second")
    parser.add_argument("--database", default="evalhub_bench_throughput")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_run_throughput.json"))
    args = parser.parse_args()
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not broker.startswith(("redis://", "amqp://")):
        sys.exit("Set CELERY_BROKER_URL=redis://… or amqp://…: the benchmark runs a real worker on a broker.")

    from judges.testing.fake_provider import FakeProvider

    with FakeProvider() as fake, bench_database(
        args.database, env={"DJANGO_ALLOWED_HOSTS": "testserver"}, force_drop=True
    ):
        env = {"EVALHUB_JUDGE_BENCH_URL": fake.openai_base_url, "EVALHUB_JUDGE_BENCH_KEY": "sk-bench-not-a-real-key"}
        os.environ.update(env)
        results = run_benchmark(args, fake, broker)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"\nwritten to {args.out}")


def run_benchmark(args, fake, broker: str) -> dict:
    from django.conf import settings
    from django.test import Client
    from django.urls import reverse

    from evalhub.models import User
    from judges.configs import services as config_services
    from judges.configs.cases import engine_case
    from judges.engine import judge_batch
    from judges.models import CachedJudgment, Judgment, Run
    from judges.runs import services
    from labeling.models import Case, Dataset, Rubric, case_split, labeled_content_hash
    from tests.judges.workers import empty_broker

    lead = User.objects.create_user("bench-lead", password="x")
    project = bench_project("bench-throughput", leads=[lead])
    rubric = Rubric.objects.create(project=project, slug="returns", name="Returns right?",
                                   criteria="The 30-day window is stated.")

    def dataset_of(slug: str, cases: int) -> Dataset:
        dataset = Dataset.objects.create(project=project, slug=slug, name=slug)
        rows = []
        for i in range(cases):
            external_id, question = f"{slug}-{i:06d}", f"Can I return order {slug}-{i}?"
            output = f"Yes: order {slug}-{i} can be returned within 30 days of delivery."
            rows.append(Case(dataset=dataset, external_id=external_id, input=question, output=output,
                             split=case_split(external_id),
                             content_hash=labeled_content_hash(input=question, output=output, trace={})))
        Case.objects.bulk_create(rows, batch_size=2000)
        return dataset

    def config_of(model: str):
        return config_services.judge_config_save(rubric=rubric, by=lead, spec={
            "layers": ["behavioral"], "provider": "openai", "model": model, "base_url_env": "EVALHUB_JUDGE_BENCH_URL",
            "api_key_env": "EVALHUB_JUDGE_BENCH_KEY", "timeout_s": 60, "max_attempts": 1,
            "params": {"temperature": 0, "max_tokens": 100},
        })

    small = dataset_of("small", args.small // REPEATS)
    pair_size = args.pair or args.small
    pair_datasets = (small, dataset_of("other", args.small // REPEATS)) if pair_size == args.small else (
        dataset_of("pair-a", pair_size // REPEATS), dataset_of("pair-b", pair_size // REPEATS))
    large = dataset_of("large", args.large // REPEATS) if args.large else None
    configs = [config_of(model) for model in MODELS]
    warm = dataset_of("warm", CONCURRENCY)

    empty_broker(broker)
    db = settings.DATABASES["default"]
    worker_env = {
        **os.environ, "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "CELERY_BROKER_URL": broker, "EVALHUB_DATA_DIR": str(Path(settings.DATA_DIR) / "bench-worker"),
    }
    worker_env.pop("DJANGO_ALLOWED_HOSTS", None)
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "evalhub", "worker", "--concurrency=2", "--loglevel=WARNING",
         "--hostname=bench@%h"],
        cwd=ROOT, env=worker_env, start_new_session=True,
    )
    client = Client()
    client.force_login(lead)

    def start(config, dataset) -> Run:
        return services.run_start(config=config, dataset=dataset, repeats=REPEATS, concurrency=CONCURRENCY,
                                  spend_cap_usd=None, by=lead)

    def wait_finished(runs: list[Run], on_poll=None) -> None:
        while True:
            statuses = set(Run.objects.filter(pk__in=[r.pk for r in runs]).values_list("status", flat=True))
            if statuses == {Run.Status.FINISHED}:
                break
            if Run.Status.CANCELLED in statuses:
                raise SystemExit("a benchmark run was cancelled")
            if on_poll is not None:
                on_poll()
            time.sleep(0.2)
        for run in runs:
            run.refresh_from_db()

    def stand_in(latency: dict, seed: int) -> None:
        fake.reset()
        fake.control(latency_seed=seed, **latency)

    def via_worker(config, dataset, latency: dict, seed: int, on_poll=None) -> dict:
        CachedJudgment.objects.all().delete()  # every judgment is a call, as in the engine's batch
        stand_in(latency, seed)
        cpu = cpu_seconds(process_tree(worker.pid))
        run = start(config, dataset)
        wait_finished([run], on_poll)
        stats = fake.stats()
        seconds = (run.finished_at - run.created_at).total_seconds()
        assert run.done == run.total == stats["total"], (run.done, run.total, stats["total"])
        return {"seconds": seconds, "ideal": stats["latency_ms_served"] / 1000 / CONCURRENCY,
                "peak_in_flight": stats["max_in_flight"],
                "cpu_ms_per_judgment": (cpu_seconds(process_tree(worker.pid)) - cpu) * 1000 / run.total}

    def engine_alone(config, dataset, latency: dict, seed: int) -> dict:
        items = [(engine_case(case), r) for case in dataset.cases.order_by("pk")
                 for r in range(1, REPEATS + 1)]
        stand_in(latency, seed)
        started, cpu = time.perf_counter(), time.process_time()
        judgments = judge_batch(items, config.spec, concurrency=CONCURRENCY)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        stats = fake.stats()
        assert all(j.evaluated for j in judgments) and stats["total"] == len(items)
        return {"seconds": seconds, "ideal": stats["latency_ms_served"] / 1000 / CONCURRENCY,
                "peak_in_flight": stats["max_in_flight"], "cpu_ms_per_judgment": cpu * 1000 / len(items)}

    results: dict = {"concurrency": CONCURRENCY, "repeats": REPEATS, "broker": broker.split("://")[0],
                     "small": args.small, "large": args.large, "latencies": {}}
    try:
        # Warm both sides (imports, first connections) before anything is timed.
        via_worker(configs[0], warm, {"latency_ms": 10, "latency_sigma": 0}, 0)
        engine_alone(configs[0], warm, {"latency_ms": 10, "latency_sigma": 0}, 0)
        for name, latency in LATENCIES.items():
            if args.only and not name.startswith(args.only):
                continue
            print(f"\n{name}, concurrency {CONCURRENCY}")
            out = results["latencies"][name] = {"small": []}
            for i in range(args.times):
                engine = engine_alone(configs[0], small, latency, seed=i + 1)
                run = via_worker(configs[0], small, latency, seed=i + 1)
                out["small"].append({"engine": engine, "worker": run})
                print(f"  {args.small:>6} judgments #{i + 1}: engine {engine['seconds']:6.2f} s "
                      f"({engine['seconds'] / engine['ideal']:.3f}× ideal {engine['ideal']:.2f} s), "
                      f"worker {run['seconds']:6.2f} s ({run['seconds'] / run['ideal']:.3f}× ideal), "
                      f"worker/engine {run['seconds'] / engine['seconds']:.3f}, peak {run['peak_in_flight']}; "
                      f"CPU ms/judgment engine {engine['cpu_ms_per_judgment']:.2f}, "
                      f"worker {run['cpu_ms_per_judgment']:.2f}; load {os.getloadavg()[0]:.1f}")
            rows = out["small"]
            out["small_median"] = {
                "engine_s": statistics.median(r["engine"]["seconds"] for r in rows),
                "worker_s": statistics.median(r["worker"]["seconds"] for r in rows),
                "worker_over_engine": statistics.median(r["worker"]["seconds"] / r["engine"]["seconds"] for r in rows),
                "worker_over_ideal": statistics.median(r["worker"]["seconds"] / r["worker"]["ideal"] for r in rows),
                "engine_over_ideal": statistics.median(r["engine"]["seconds"] / r["engine"]["ideal"] for r in rows),
            }
            m = out["small_median"]
            print(f"  median of {args.times}: worker/engine {m['worker_over_engine']:.3f} (target ≤ 1.05), "
                  f"worker/ideal {m['worker_over_ideal']:.3f} (≤ 1.25), engine/ideal {m['engine_over_ideal']:.3f}")

            # Two runs at once on the one worker: each its own model, run and cap.
            CachedJudgment.objects.all().delete()
            stand_in(latency, seed=99)
            cpu = cpu_seconds(process_tree(worker.pid))
            pair = [start(configs[0], pair_datasets[0]), start(configs[1], pair_datasets[1])]
            wait_finished(pair)
            cpu = cpu_seconds(process_tree(worker.pid)) - cpu
            stats = fake.stats()
            together = (max(r.finished_at for r in pair) - min(r.created_at for r in pair)).total_seconds()
            ideal = stats["latency_ms_served"] / 1000 / (2 * CONCURRENCY)
            t0 = min(r.created_at for r in pair)
            if args.timeline:
                for r in pair:
                    per_second = Counter(int((at - t0).total_seconds()) for at in
                                         Judgment.objects.filter(run=r).values_list("created_at", flat=True))
                    print("   run", r.pk, "recorded per second:", [per_second[i] for i in range(max(per_second) + 1)])
            out["two_runs"] = {"judgments_each": pair_size, "seconds": together, "ideal": ideal,
                               "over_ideal": together / ideal, "worker_cpu_s": cpu,
                               "load_average": os.getloadavg()[0],
                               "peak_in_flight_by_model": stats["max_in_flight_by_model"],
                               "runs": [{"started_s": (r.started_at - t0).total_seconds(),
                                         "finished_s": (r.finished_at - t0).total_seconds(),
                                         # This run's own ideal: its own latency served over its own cap.
                                         "own_ideal_s": stats["latency_ms_served_by_model"][model] / 1000 / CONCURRENCY}
                                        for r, model in zip(pair, MODELS, strict=True)]}
            print(f"  two runs of {pair_size} at once: {together:.2f} s, {together / ideal:.3f}× the ideal of both "
                  f"({ideal:.2f} s; target ≤ 1.15), peak in flight per run {stats['max_in_flight_by_model']}, "
                  "each run's time over its own ideal "
                  f"{[round(r['finished_s'] / r['own_ideal_s'], 3) for r in out['two_runs']['runs']]}, "
                  f"worker CPU {cpu:.1f} s, load {os.getloadavg()[0]:.1f}")

            if large is not None:
                memory = {pid: 0 for pid in process_tree(worker.pid)}
                progress_ms: list[float] = []

                def sample(memory=memory, progress_ms=progress_ms) -> None:
                    # Every 0.2 s: the worker's memory, and the progress partial as the run page polls it.
                    for pid in process_tree(worker.pid):
                        memory[pid] = max(memory.get(pid, 0), rss_kb(pid))
                    running = Run.objects.order_by("-pk").values_list("pk", flat=True).first()
                    began = time.perf_counter()
                    response = client.get(reverse("judges:run_progress", args=[project.slug, running]))
                    progress_ms.append((time.perf_counter() - began) * 1000)
                    assert response.status_code in (200, 286)  # 286: finished, polling stops

                run = via_worker(configs[0], large, latency, seed=1, on_poll=sample)
                out["large"] = {
                    **run, "over_ideal": run["seconds"] / run["ideal"],
                    "worker_peak_rss_mb": round(max(memory.values()) / 1024, 1),
                    "worker_rss_mb_by_process": {str(p): round(kb / 1024, 1) for p, kb in memory.items()},
                    "progress_partial_ms_median": statistics.median(progress_ms),
                    "progress_partial_ms_p95": sorted(progress_ms)[int(len(progress_ms) * 0.95)],
                    "progress_partial_polls": len(progress_ms),
                }
                g = out["large"]
                print(f"  {args.large:>6} judgments: worker {run['seconds']:.1f} s, {g['over_ideal']:.3f}× ideal "
                      f"{run['ideal']:.1f} s (target ≤ 1.15), peak in flight {run['peak_in_flight']}")
                print(f"  worker peak RSS {g['worker_peak_rss_mb']} MB; progress partial median "
                      f"{g['progress_partial_ms_median']:.1f} ms, p95 {g['progress_partial_ms_p95']:.1f} ms "
                      f"over {len(progress_ms)} polls")
                if args.engine_large:
                    engine = engine_alone(configs[0], large, latency, seed=1)
                    out["large"]["engine"] = engine
                    print(f"  {args.large:>6} judgments, engine alone: {engine['seconds']:.1f} s, "
                          f"{engine['seconds'] / engine['ideal']:.3f}× ideal")
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
    return results


if __name__ == "__main__":
    main()
