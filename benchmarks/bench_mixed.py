"""A mixed run through the engine's batch path: contract, then semantic, then the behavioral judge on the
residue, 4,000 cases with 30 % sent to the judge.

    python benchmarks/bench_mixed.py                          # 4,000 cases, concurrency 8, 50 ms log-normal
    python benchmarks/bench_mixed.py --latency-shape fixed

One config of the three layers judges every case through `judge_batch` (`judge_many`): a tenth of the
cases fail a contract check (no embedding, no judge), the rest are embedded (answer and golden answer,
EMBED_BATCH texts to a call) and settled by their similarity, except 30 % of all cases, whose answers are
half-way to the golden answer (between `fail_below` and `pass_at`): those go to the behavioral judge. The
stand-in answers the embeddings and the judge with the same latency (log-normal, median 50 ms, sigma 0.8,
or fixed 50 ms). The ideal is the judge calls' latency as the stand-in served it, over the concurrency,
plus the wall time of the run's embeddings calls made alone (the same distinct texts, EMBED_BATCH to a
call, through `call_embeddings` on the same SDK client and concurrency, no engine); the target is 1.15×
it at most. CPU time is given for this process (`engine_cpu_s`, `alone_cpu_s`) and the stand-in
(`stand_in_cpu_s`): on the two-core machine they compete. With `--worker` (DATABASE_URL on PostgreSQL)
the same cases are also judged as a run's worker judges them (`judges.runs.worker.run_work_here`: chunks
read from the database, judgments and embeddings recorded; a database of its own, `--database`, dropped at
the end), its wall time over the same ideal and over the engine's. Figures are printed and written to
benchmarks/results/bench_mixed.json.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalhub python benchmarks/bench_mixed.py --worker
"""

import argparse
import json
import os
import resource
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_semantic import LATENCIES, measured, transport_alone  # noqa: E402
from judges.engine import MemoryCache, judge_batch  # noqa: E402
from judges.engine.semantic import EMBED_BATCH  # noqa: E402
from judges.testing.fake_provider import FakeProvider  # noqa: E402

EMBEDDINGS_MODEL = "text-embedding-3-small"
JUDGE_MODEL = "gpt-4o-mini-2024-07-18"
PRICES = {
    EMBEDDINGS_MODEL: {"input_per_mtok": 0.02, "output_per_mtok": 0.0},
    JUDGE_MODEL: {"input_per_mtok": 0.15, "output_per_mtok": 0.6},
}
RULE = {"kind": "answer_min_length", "chars": 80}  # the stand-in judge's verdict


def make_cases(n: int) -> list[dict]:
    """By i % 10: 0 fails the contract (a source other than the expected one); 1-3 are half-way to the
    golden answer (similarity ~0.53: the judge decides); 4-8 restate it (pass); 9 is unrelated (fail)."""
    cases = []
    for i in range(n):
        order = f"ORD-{i:05d}"
        kind = i % 10
        if kind in (1, 2, 3):
            output = f"Order {order} can be returned within 30 days; ask support about shipping labels and store credit."
        elif kind == 9:
            output = f"Please contact our support team by phone for help with anything else ({i})."
        else:
            output = f"Order {order}: yes, it can be returned within 30 days of delivery for a full refund."
        cases.append(
            {
                "external_id": f"mixed-{i:05d}",
                "input": f"Can I return order {order} after 20 days?",
                "output": output,
                "trace": {"retrievedSources": ["faq" if kind == 0 else "returns-policy"], "toolCalls": []},
                "golden_answer": f"Yes, order {order} can be returned within 30 days of delivery for a full refund.",
                "expected_source": "returns-policy",
                "expected_tool": None,
                "category": "policy",
            }
        )
    return cases


def config(dimensions: int) -> dict:
    return {
        "rubric": "returns-policy",
        "criteria": "The answer states the 30-day return window correctly.",
        "layers": ["contract", "semantic", "behavioral"],
        "contract_checks": ["answer_present", "no_tool_when_none_expected", "expected_source"],
        "semantic": {
            "provider": "openai-compatible",
            "model": EMBEDDINGS_MODEL,
            "base_url_env": "EVALHUB_JUDGE_BENCH_URL",
            "api_key_env": "EVALHUB_JUDGE_BENCH_KEY",
            "dimensions": dimensions,
            "pass_at": 0.8,
            "fail_below": 0.3,
        },
        "provider": "openai",
        "model": JUDGE_MODEL,
        "params": {"temperature": 0, "max_tokens": 200},
        "base_url_env": "EVALHUB_JUDGE_BENCH_URL",
        "api_key_env": "EVALHUB_JUDGE_BENCH_KEY",
        "timeout_s": 30,
    }


def worker_run_of(cases: list[dict], args: argparse.Namespace):
    """The cases and config saved to the benchmark's database; returns a function that judges them all in a
    new run, as the worker's task does, with nothing cached, and gives the run's outcomes."""
    from benchmarks._benchdb import bench_project, settle_after_bulk_load
    from evalhub.models import User
    from judges.configs import services as config_services
    from judges.models import CachedEmbedding, CachedJudgment, Run
    from judges.runs import services, worker
    from labeling.models import Case, Dataset, Rubric, case_split, labeled_content_hash

    spec = config(args.dimensions)
    lead = User.objects.create_user("bench-lead", password="x")
    project = bench_project("bench-mixed", leads=[lead])
    rubric = Rubric.objects.create(project=project, slug=spec["rubric"], name="Returns", criteria=spec["criteria"])
    saved = config_services.judge_config_save(rubric=rubric, by=lead,
                                              spec={k: v for k, v in spec.items() if k != "rubric"})  # fmt: skip
    dataset = Dataset.objects.create(project=project, slug="mixed", name="mixed")
    Case.objects.bulk_create(
        [
            Case(dataset=dataset, external_id=c["external_id"], input=c["input"], output=c["output"],
                 trace=c["trace"], golden_answer=c["golden_answer"], expected_source=c["expected_source"],
                 category=c["category"], split=case_split(c["external_id"]),
                 content_hash=labeled_content_hash(input=c["input"], output=c["output"], trace=c["trace"]))
            for c in cases
        ],
        batch_size=2000,
    )  # fmt: skip
    settle_after_bulk_load()

    def work() -> dict[str, int]:
        CachedJudgment.objects.all().delete()
        CachedEmbedding.objects.all().delete()
        run = services.run_start(config=saved, dataset=dataset, repeats=1, concurrency=args.concurrency,
                                 spend_cap_usd=None, by=lead)  # fmt: skip
        worker.run_work_here(run_id=run.pk)
        run = Run.objects.get(pk=run.pk)
        assert run.status == Run.Status.FINISHED and run.done == len(cases), (run.status, run.done)
        outcomes: dict[str, int] = {}
        for outcome in run.judgments.values_list("outcome", flat=True):
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        return outcomes

    return work


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency-ms", type=int, default=50, help="the median (log-normal) and the fixed latency")
    parser.add_argument("--latency-shape", choices=["lognormal", "fixed", "both"], default="both")
    parser.add_argument("--dimensions", type=int, default=256)
    parser.add_argument("--worker", action="store_true", help="also through a run's worker (PostgreSQL)")
    parser.add_argument("--database", default="evalhub_bench_mixed", help="the worker's database (dropped)")
    args = parser.parse_args()
    shapes = list(LATENCIES) if args.latency_shape == "both" else [args.latency_shape]

    cases = make_cases(args.n)
    embedded = [case for i, case in enumerate(cases) if i % 10]  # the contract settles the others
    items = [(case, 1) for case in cases]
    runs = {}
    with FakeProvider() as fake:
        env = {"EVALHUB_JUDGE_BENCH_URL": fake.openai_base_url, "EVALHUB_JUDGE_BENCH_KEY": "bench-key"}
        fake.control(rule=RULE)
        # Warm up outside the measured time: the SDK imported, connections open, the stand-in knowing
        # every text's words (it keeps them), so no measured run pays that for the others.
        judge_batch([({**cases[1], "output": "warm up"}, 1)], config(args.dimensions), concurrency=1, env=env)
        transport_alone(embedded, env, args.concurrency, args.dimensions)
        for shape in shapes:
            name, latency = LATENCIES[shape]
            fake.reset()
            fake.control(latency_ms=args.latency_ms, rule=RULE, **latency)
            run = measured(fake, lambda: judge_batch(items, config(args.dimensions), concurrency=args.concurrency,
                                                     prices=PRICES, env=env,
                                                     embedding_cache=MemoryCache(copies=False)))  # fmt: skip
            judged, wall, cpu, stand_in_cpu = run.value, run.wall, run.cpu, run.stand_in_cpu
            stats = fake.stats()
            served = stats["latency_ms_served_by_model"]
            judge_ideal = served.get(JUDGE_MODEL, 0.0) / 1000 / args.concurrency
            # The embeddings calls alone, their latencies drawn again from the same seed.
            fake.reset()
            fake.control(latency_ms=args.latency_ms, rule=RULE, **latency)
            peer = measured(fake, lambda: transport_alone(embedded, env, args.concurrency, args.dimensions))
            (alone, alone_cpu), stand_in_cpu_alone = peer.value, peer.stand_in_cpu
            alone_calls = fake.stats()["by_endpoint"].get("embeddings", 0)
            ideal = judge_ideal + alone
            by: dict[str, dict[str, int]] = {"outcome": {}, "layer": {}}
            for j in judged:
                by["outcome"][j.outcome] = by["outcome"].get(j.outcome, 0) + 1
                by["layer"][j.layer] = by["layer"].get(j.layer, 0) + 1
            runs[name] = {
                "embeddings_calls": stats["by_endpoint"].get("embeddings", 0),
                "judge_calls": sum(n for endpoint, n in stats["by_endpoint"].items() if endpoint != "embeddings"),
                "wall_s": round(wall, 2),
                "judge_ideal_s": round(judge_ideal, 2),
                "embeddings_alone_wall_s": round(alone, 2),
                "embeddings_alone_calls": alone_calls,
                "ideal_s": round(ideal, 2),
                "ratio": round(wall / ideal, 3),
                "within_target": wall / ideal <= 1.15,
                "engine_cpu_s": round(cpu, 2),
                "stand_in_cpu_s": None if stand_in_cpu is None else round(stand_in_cpu, 2),
                "alone_cpu_s": round(alone_cpu, 2),
                "alone_stand_in_cpu_s": None if stand_in_cpu_alone is None else round(stand_in_cpu_alone, 2),
                "server_max_in_flight": stats["max_in_flight"],
                "by_outcome": by["outcome"],
                "by_layer": by["layer"],
                "load_average_1min": round(os.getloadavg()[0], 2),
            }
        if args.worker:
            from benchmarks._benchdb import bench_database

            os.environ.update(env)  # the worker reads the config's variables from its environment
            with bench_database(args.database):
                work = worker_run_of(cases, args)
                for shape in shapes:
                    name, latency = LATENCIES[shape]
                    fake.reset()
                    fake.control(latency_ms=args.latency_ms, rule=RULE, **latency)
                    run = measured(fake, work)
                    outcomes, wall, cpu, stand_in_cpu = run.value, run.wall, run.cpu, run.stand_in_cpu
                    run = runs[name]
                    run["worker"] = {
                        "wall_s": round(wall, 2),
                        "ratio": round(wall / run["ideal_s"], 3),
                        "vs_engine": round(wall / run["wall_s"], 3),
                        "cpu_s": round(cpu, 2),
                        "stand_in_cpu_s": None if stand_in_cpu is None else round(stand_in_cpu, 2),
                        "by_outcome": outcomes,
                        "load_average_1min": round(os.getloadavg()[0], 2),
                    }

    result = {
        "n": args.n,
        "concurrency": args.concurrency,
        "latency_ms": args.latency_ms,
        "dimensions": args.dimensions,
        "batch": EMBED_BATCH,
        "target_ratio": 1.15,
        "runs": runs,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    print(json.dumps(result, indent=2))
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_mixed.json").write_text(json.dumps(result, indent=2) + "\n")
    if any(run["by_outcome"].get("not_evaluated") for run in runs.values()):
        sys.exit("some judgments were not evaluated")


if __name__ == "__main__":
    main()
