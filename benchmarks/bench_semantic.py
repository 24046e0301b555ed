"""The semantic layer at scale: 20,000 cases embedded through the stand-in's /v1/embeddings.

    python benchmarks/bench_semantic.py                       # 20,000 cases, concurrency 8, 50 ms
    python benchmarks/bench_semantic.py --n 2000 --latency-ms 200

A semantic-only config judges every case: the batch embeds each distinct text once, EMBED_BATCH texts
to a call, `concurrency` calls at a time, with the stand-in's latency log-normal (real providers' is
heavy-tailed; median 50 ms, sigma 0.8) and then fixed at 50 ms. The ideal wall time is the latency the
stand-in served, summed, over the concurrency: the provider's time alone; the target is within 1.15× of
it. Each latency model also runs the same batches of texts through the provider call alone
(`call_embeddings` on the same SDK client and concurrency, no engine): `vs_transport` is the engine's
wall time over that peer's, what the engine adds to the HTTP calls (target: 1.15× at most).
`engine_cpu_s` is this process's CPU time in the run (the engine and the SDK), `transport_alone_cpu_s`
the peer's; `stand_in_cpu_s` and `transport_alone_stand_in_cpu_s` are the stand-in's (another process,
on the same machine: on a two-core machine the two compete). The stand-in is warmed with every text
first (it keeps each text's words). `--latency-shape lognormal|fixed` runs one latency model. A second run, of another config version
(pass_at moved, so the judgment cache cannot answer) sharing the embedding cache, must make 0 calls.
The stand-in's vectors are a hashed bag of words, not a model's. Figures are printed and written to
benchmarks/results/bench_semantic.json.
"""

import argparse
import json
import os
import resource
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from judges.engine import MemoryCache, judge_batch  # noqa: E402
from judges.engine.providers import ClientPool, call_embeddings, resolve_endpoint  # noqa: E402
from judges.engine.semantic import EMBED_BATCH, texts_to_embed  # noqa: E402
from judges.testing.fake_provider import FakeProvider  # noqa: E402

MODEL = "text-embedding-3-small"
PRICES = {MODEL: {"input_per_mtok": 0.02, "output_per_mtok": 0.0}}
GOLDEN = [f"Yes, order {k} can be returned within 30 days of delivery for a full refund." for k in range(200)]


def make_cases(n: int) -> list[dict]:
    """Every answer its own text; 200 golden answers shared; every tenth case has a second reference."""
    cases = []
    for i in range(n):
        case = {
            "external_id": f"bench-{i:05d}",
            "input": f"Can I return order ORD-{i:05d} after 20 days?",
            "output": f"Order ORD-{i:05d}: yes, it can be returned within 30 days for a refund."
            + (" Shipping is free." if i % 3 else " Keep the receipt."),
            "golden_answer": GOLDEN[i % len(GOLDEN)],
            "category": "policy",
            "metadata": {"references": [f"Returns of ORD-{i:05d} are accepted for 30 days."]} if i % 10 == 0 else {},
        }
        cases.append(case)
    return cases


def config(pass_at: float, dimensions: int) -> dict:
    return {
        "rubric": "returns-policy",
        "criteria": "The answer states the 30-day return window correctly.",
        "layers": ["semantic"],
        "semantic": {
            "provider": "openai-compatible",
            "model": MODEL,
            "base_url_env": "EVALHUB_JUDGE_BENCH_URL",
            "api_key_env": "EVALHUB_JUDGE_BENCH_KEY",
            "dimensions": dimensions,
            "pass_at": pass_at,
        },
        "timeout_s": 30,
    }


def transport_alone(cases: list[dict], env: dict, concurrency: int, dimensions: int) -> tuple[float, float]:
    """Wall and CPU time (this process's) of the engine's embeddings calls made with no engine: every
    distinct text, in the order the engine sends them, EMBED_BATCH to a call, `concurrency` calls at a time."""
    texts = list(dict.fromkeys(text for case in cases for text in texts_to_embed(case)))
    batches = [texts[i : i + EMBED_BATCH] for i in range(0, len(texts), EMBED_BATCH)]
    s = config(0.6, dimensions)["semantic"]
    endpoint = resolve_endpoint(
        provider=s["provider"], base_url_env=s["base_url_env"], api_key_env=s["api_key_env"], env=env, timeout_s=30
    )
    clients = ClientPool()
    client = clients.get(endpoint)
    started, cpu = time.monotonic(), time.process_time()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(
            pool.map(
                lambda batch: call_embeddings(client, endpoint, model=MODEL, inputs=batch, dimensions=dimensions),
                batches,
            )
        )
    wall, cpu = time.monotonic() - started, time.process_time() - cpu
    clients.close()
    return wall, cpu


def cpu_seconds(pid: int) -> float | None:
    """A process's CPU time (user and system) from /proc; None where there is no /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Measured:
    value: Any
    wall: float
    cpu: float  # this process's
    stand_in_cpu: float | None  # the stand-in's over the same time; None where there is no /proc


def measured(fake, work) -> Measured:
    """`work()` timed: its wall time, this process's CPU and the stand-in's beside it."""
    stand_in = cpu_seconds(fake.proc.pid)
    started, cpu = time.monotonic(), time.process_time()
    value = work()
    wall, cpu = time.monotonic() - started, time.process_time() - cpu
    after = cpu_seconds(fake.proc.pid)
    return Measured(value, wall, cpu, None if stand_in is None or after is None else after - stand_in)


LATENCIES = {
    "lognormal": ("log-normal (median 50 ms, sigma 0.8)", {"latency_sigma": 0.8, "latency_seed": 7}),
    "fixed": ("fixed 50 ms", {"latency_sigma": 0}),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency-ms", type=int, default=50, help="the median (log-normal) and the fixed latency")
    parser.add_argument("--dimensions", type=int, default=256)
    parser.add_argument("--latency-shape", choices=["lognormal", "fixed", "both"], default="both")
    args = parser.parse_args()
    shapes = list(LATENCIES) if args.latency_shape == "both" else [args.latency_shape]

    cases = make_cases(args.n)
    items = [(case, 1) for case in cases]
    runs = {}
    with FakeProvider() as fake:
        env = {"EVALHUB_JUDGE_BENCH_URL": fake.openai_base_url, "EVALHUB_JUDGE_BENCH_KEY": "bench-key"}
        # Warm up: import the SDK and open a connection, outside the measured time (its text is not a case's).
        judge_batch([({**cases[0], "output": "warm up"}, 1)], config(0.6, args.dimensions), concurrency=1, env=env)
        # The stand-in reads each text's words once (it keeps them): warmed here, so no measured run pays
        # that for the others and the stand-in's CPU is what serving the calls costs.
        transport_alone(cases, env, args.concurrency, args.dimensions)

        def judge_all(pass_at: float, embeddings: MemoryCache) -> list:
            config_ = config(pass_at, args.dimensions)
            return judge_batch(items, config_, concurrency=args.concurrency, prices=PRICES, env=env,
                               embedding_cache=embeddings)  # fmt: skip

        for shape in shapes:
            name, latency = LATENCIES[shape]
            fake.reset()
            fake.control(latency_ms=args.latency_ms, **latency)
            embeddings = MemoryCache(copies=False)
            run = measured(fake, lambda: judge_all(0.6, embeddings))
            first, wall, cpu, stand_in_cpu = run.value, run.wall, run.cpu, run.stand_in_cpu
            stats = fake.stats()
            ideal = stats["latency_ms_served"] / 1000 / args.concurrency
            fake.reset()  # the same latencies again (seeded), for the peer
            fake.control(latency_ms=args.latency_ms, **latency)
            alone = measured(fake, lambda: transport_alone(cases, env, args.concurrency, args.dimensions))
            (transport, transport_cpu), stand_in_cpu_alone = alone.value, alone.stand_in_cpu
            outcomes: dict[str, int] = {}
            for j in first:
                outcomes[j.outcome] = outcomes.get(j.outcome, 0) + 1
            runs[name] = {
                "calls": stats["by_endpoint"].get("embeddings", 0),
                "wall_s": round(wall, 2),
                "ideal_s": round(ideal, 2),
                "ratio": round(wall / ideal, 3),
                "within_target": wall / ideal <= 1.15,
                "transport_alone_wall_s": round(transport, 2),
                "transport_alone_ratio": round(transport / ideal, 3),
                "vs_transport": round(wall / transport, 3),
                "vs_transport_within_target": wall / transport <= 1.15,
                "engine_cpu_s": round(cpu, 2),
                "stand_in_cpu_s": None if stand_in_cpu is None else round(stand_in_cpu, 2),
                "transport_alone_cpu_s": round(transport_cpu, 2),
                "transport_alone_stand_in_cpu_s": None if stand_in_cpu_alone is None else round(stand_in_cpu_alone, 2),
                "load_average_1min": round(os.getloadavg()[0], 2),
                "server_max_in_flight": stats["max_in_flight"],
                "outcomes": outcomes,
            }

        # Another config version (pass_at moved, so the judgment cache cannot answer) sharing the last
        # run's embedding cache: every text is known, no call is made.
        before = fake.stats()["total"]
        started = time.monotonic()
        second = judge_all(0.7, embeddings)
        wall_cached = time.monotonic() - started
        calls_cached = fake.stats()["total"] - before

    texts = len(
        {c["output"] for c in cases}
        | {c["golden_answer"] for c in cases}
        | {r for c in cases for r in c["metadata"].get("references", [])}
    )
    result = {
        "n": args.n,
        "concurrency": args.concurrency,
        "latency_ms": args.latency_ms,
        "dimensions": args.dimensions,
        "batch": EMBED_BATCH,
        "distinct_texts": texts,
        "calls_if_unbatched": texts,
        "target_ratio": 1.15,
        "runs": runs,
        "tokens": sum(j.input_tokens for j in first),
        "cost_usd": round(sum(j.cost_usd or 0 for j in first), 6),
        "billed_calls": sum(j.provider_calls for j in first),
        "second_run_calls": calls_cached,
        "second_run_wall_s": round(wall_cached, 2),
        "second_run_similarities_equal": [j.similarity for j in first] == [j.similarity for j in second],
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(result, indent=2))
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_semantic.json").write_text(json.dumps(result, indent=2) + "\n")
    if any(run["outcomes"].get("not_evaluated") for run in runs.values()) or calls_cached:
        sys.exit("some judgments were not evaluated, or the second run called the provider")


if __name__ == "__main__":
    main()
