"""One batch path: the same semantic-only cases judged by the engine, by a run's worker and by the CI command.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalhub .venv/bin/python benchmarks/bench_paths.py \\
        [--n 4000] [--concurrency 8] [--latency-ms 50] [--latency-shape lognormal|fixed] [--rounds 3]

All go through `judges.engine.judge_many`: the engine's `judge_batch` in this process (no database, an
embedding cache in memory; then again writing a cache folder, as the CI command does), a run worked as the
worker's task works it (`judges.runs.worker.run_work_here`: the lease, the window, chunks read from
PostgreSQL, judgments and embeddings recorded), and the CI command's `judge_all` (a cache folder on disk, as
`evalhub-gate check` keeps it). Each starts with nothing cached, against the scripted stand-in's
/v1/embeddings with the same seeded log-normal latency (median `--latency-ms`, sigma 0.8; `--latency-shape fixed`:
each call waits `--latency-ms` exactly). The cache folders are written whole (flushed) inside the timing. Printed for
each: embeddings calls, wall time, the ideal (latency served / concurrency) and each path over the
engine's: the CI command over the engine writing the same cache folder is what its own orchestration adds;
the rest is what the caches and the recording cost. Each path starts from a collected heap, and after the
worker's writes the database is vacuumed and checkpointed outside the timings (else that work runs beside the
next path). It uses a database of its own (`evalhub_bench_paths`, dropped at the end). Results go to benchmarks/results/bench_paths.json.
"""

import argparse
import gc
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._benchdb import bench_database, bench_project, settle_after_bulk_load  # noqa: E402
from benchmarks.bench_semantic import config, cpu_seconds, make_cases  # noqa: E402

CACHE_KEY = b"a test cache key, 32 bytes long!!"  # the gate step's secret (FolderCache signs with it)

LATENCIES = {"lognormal": {"latency_sigma": 0.8, "latency_seed": 11}, "fixed": {"latency_sigma": 0}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency-ms", type=int, default=50)
    parser.add_argument("--latency-shape", choices=sorted(LATENCIES), default="lognormal",
                        help="the stand-in's latency: log-normal (median --latency-ms, sigma 0.8) or fixed")
    parser.add_argument("--dimensions", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=1,
                        help="run the paths in turn this many times; each ratio is the median of the rounds'")
    parser.add_argument("--database", default="evalhub_bench_paths")
    parser.add_argument("--paths", default="engine,folder,worker,gate",
                        help="which paths, of engine, folder, worker, gate (the engine always: the others' peer); "
                             "worker alone runs first and prints how far the process's peak memory rose during it")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_paths.json"))
    args = parser.parse_args()

    from judges.testing.fake_provider import FakeProvider

    with FakeProvider() as fake, bench_database(args.database):
        env = {"EVALHUB_JUDGE_BENCH_URL": fake.openai_base_url, "EVALHUB_JUDGE_BENCH_KEY": "bench-key"}
        os.environ.update(env)
        results = measure(args, fake, env)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"\nwritten to {args.out}")


def measure(args, fake, env: dict) -> dict:
    from evalhub.models import User
    from judges.configs import services as config_services
    from judges.engine import FolderCache, JudgeConfig, MemoryCache, judge_batch
    from judges.gate.config import GateRubric
    from judges.gate.judging import judge_all
    from judges.models import CachedEmbedding, CachedJudgment, Run
    from judges.runs import services, worker
    from labeling.models import Case, Dataset, Rubric, case_split, labeled_content_hash

    spec = config(0.6, args.dimensions)
    cases = make_cases(args.n)
    lead = User.objects.create_user("bench-lead", password="x")
    project = bench_project("bench-paths", leads=[lead])
    rubric = Rubric.objects.create(project=project, slug=spec["rubric"], name="Returns", criteria=spec["criteria"])
    saved = config_services.judge_config_save(
        rubric=rubric, by=lead, spec={k: v for k, v in spec.items() if k != "rubric"}
    )
    dataset = Dataset.objects.create(project=project, slug="paths", name="paths")
    Case.objects.bulk_create(
        [
            Case(dataset=dataset, external_id=c["external_id"], input=c["input"], output=c["output"],
                 golden_answer=c["golden_answer"], category=c["category"], metadata=c["metadata"],
                 split=case_split(c["external_id"]),
                 content_hash=labeled_content_hash(input=c["input"], output=c["output"], trace={}))
            for c in cases
        ],
        batch_size=2000,
    )
    settle_after_bulk_load()

    def stand_in() -> None:
        fake.reset()
        fake.control(latency_ms=args.latency_ms, **LATENCIES[args.latency_shape])

    def timed(label: str, work) -> dict:
        stand_in()
        stand_in_cpu = cpu_seconds(fake.proc.pid)
        started, cpu = time.monotonic(), time.process_time()
        outcomes = work()
        wall, cpu = time.monotonic() - started, time.process_time() - cpu
        stand_in_cpu = None if stand_in_cpu is None else cpu_seconds(fake.proc.pid) - stand_in_cpu
        stats = fake.stats()
        ideal = stats["latency_ms_served"] / 1000 / args.concurrency
        row = {"calls": stats["by_endpoint"].get("embeddings", 0), "wall_s": round(wall, 2),
               "ideal_s": round(ideal, 2), "vs_ideal": round(wall / ideal, 3), "outcomes": outcomes,
               "cpu_s": round(cpu, 2), "stand_in_cpu_s": None if stand_in_cpu is None else round(stand_in_cpu, 2)}
        print(f"  {label:<28} {row['calls']:>4} calls  {wall:6.2f} s  ({row['vs_ideal']:.2f}× ideal {ideal:.2f} s; "
              f"CPU here {cpu:.2f} s, the stand-in's {row['stand_in_cpu_s']} s)")
        return row

    def tally(outcomes) -> dict:
        counts: dict[str, int] = {}
        for outcome in outcomes:
            counts[outcome] = counts.get(outcome, 0) + 1
        return counts

    def engine() -> dict:
        judgments = judge_batch([(c, 1) for c in cases], spec, concurrency=args.concurrency, env=env,
                                embedding_cache=MemoryCache(copies=False))
        return tally(j.outcome for j in judgments)

    def engine_with_folder() -> dict:
        with tempfile.TemporaryDirectory() as folder, FolderCache(Path(folder), key=CACHE_KEY) as cache:
            judgments = judge_batch([(c, 1) for c in cases], spec, concurrency=args.concurrency, env=env,
                                    cache=cache, embedding_cache=cache.subfolder("embeddings"))
            cache.flush()  # inside the timing: the packs are written
        return tally(j.outcome for j in judgments)

    def run_worker() -> dict:
        CachedJudgment.objects.all().delete()
        CachedEmbedding.objects.all().delete()
        run = services.run_start(config=saved, dataset=dataset, repeats=1, concurrency=args.concurrency,
                                 spend_cap_usd=None, by=lead)
        worker.run_work_here(run_id=run.pk)
        run = Run.objects.get(pk=run.pk)
        assert run.status == Run.Status.FINISHED and run.done == len(cases), (run.status, run.done)
        return tally(run.judgments.values_list("outcome", flat=True))

    def gate() -> dict:
        rubrics = [GateRubric(spec["rubric"], "gate", False, JudgeConfig.from_dict(saved.spec), {}, None)]
        with tempfile.TemporaryDirectory() as folder, FolderCache(Path(folder), key=CACHE_KEY) as cache:
            results = judge_all(rubrics, cases, repeats=1, concurrency=args.concurrency, cache=cache, env=env)
            cache.flush()  # as evalhub-gate check closes it once judged
        return tally(c.verdict for c in results[0].cases)

    print(f"{args.n} semantic-only cases, concurrency {args.concurrency}, load average {os.getloadavg()[0]:.1f}, "
          + (f"log-normal latency (median {args.latency_ms} ms, sigma 0.8)" if args.latency_shape == "lognormal"
             else f"fixed latency ({args.latency_ms} ms)"))
    judge_batch([({**cases[0], "output": "warm up"}, 1)], spec, concurrency=1, env=env)  # the SDK's import
    chosen = set(args.paths.split(",")) | {"engine"}
    paths = [(name, label, work) for name, label, work in (
        ("engine", "engine (judge_batch)", engine),
        ("folder", "engine, a cache folder", engine_with_folder),
        ("worker", "worker (run_work_here)", run_worker),
        ("gate", "CI command (judge_all)", gate),
    ) if name in chosen]
    if chosen == {"engine", "worker"}:  # the worker first: its peak is its own, not hidden under the engine's
        paths.reverse()
    rounds: dict[str, list[dict]] = {label: [] for _, label, _ in paths}
    for number in range(1, args.rounds + 1):  # the paths in turn, each round: a shared machine's load hits all
        if args.rounds > 1:
            print(f" round {number} (load average {os.getloadavg()[0]:.1f})")
        for name, label, work in paths:
            gc.collect()  # each path starts from the same heap, not with the garbage of the path before it
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            row = timed(label, work)
            if name == "worker":  # its rows' vacuum and checkpoint now, not in the background of the next path
                settle_after_bulk_load()
            row["peak_rise_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before)
            rounds[label].append(row)
    if chosen == {"engine", "worker"}:
        print(f"  the worker's peak memory rose {rounds['worker (run_work_here)'][0]['peak_rise_mb']} MB over the "
              f"process's peak before it (the cases and the engine's run); compare --n 4000 with --n 20000")
    engine_rows = rounds["engine (judge_batch)"]
    folder_rows = rounds.get("engine, a cache folder")
    rows = {}
    for label, mine in rounds.items():
        # Each round's ratio to the engine's run of the same round, then the median over the rounds.
        vs_engine = [r["wall_s"] / e["wall_s"] for r, e in zip(mine, engine_rows, strict=True)]
        cpu_vs_engine = [r["cpu_s"] / e["cpu_s"] for r, e in zip(mine, engine_rows, strict=True) if e["cpu_s"]]
        vs_folder = ([r["wall_s"] / f["wall_s"] for r, f in zip(mine, folder_rows, strict=True)] if folder_rows
                     else [float("nan")])
        row = rows[label] = {
            "wall_s": statistics.median(r["wall_s"] for r in mine),
            "cpu_s": statistics.median(r["cpu_s"] for r in mine),
            "stand_in_cpu_s": statistics.median(r["stand_in_cpu_s"] or 0 for r in mine),
            "vs_engine": round(statistics.median(vs_engine), 3),
            "cpu_vs_engine": round(statistics.median(cpu_vs_engine), 3) if cpu_vs_engine else None,
            "vs_engine_with_folder": round(statistics.median(vs_folder), 3),
            "rounds": mine,
        }
        target = " (target ≤ 1.10× the engine)" if label.startswith(("worker", "CI command")) else ""
        spread = f" (rounds {min(vs_engine):.2f}–{max(vs_engine):.2f})" if len(mine) > 1 else ""
        print(f"  {label:<28} {row['vs_engine']:.2f}× the engine{spread}{target}, CPU here {row['cpu_vs_engine']}× "
              f"the engine's, {row['vs_engine_with_folder']:.2f}× the engine writing the same cache folder; "
              f"median {row['wall_s']:.2f} s, CPU here {row['cpu_s']:.2f} s, the stand-in's {row['stand_in_cpu_s']:.2f} s")
    return {"n": args.n, "concurrency": args.concurrency, "latency_ms": args.latency_ms, "latency_shape": args.latency_shape,
            "rounds": args.rounds, "load_average": os.getloadavg(), "paths": rows}


if __name__ == "__main__":
    main()
