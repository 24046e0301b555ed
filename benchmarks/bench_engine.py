"""Throughput of the judging engine against the fake provider answering in a fixed latency.

    python benchmarks/bench_engine.py                 # 2,000 judgments, concurrency 16, 200 ms
    python benchmarks/bench_engine.py --n 200 --provider anthropic

The ideal wall time is n × latency / concurrency (25 s for the defaults); the target is within
1.10× of it. Peak memory is this process's maximum resident set size (the engine, its threads and
the SDK clients; the fake provider runs in its own process). The figures are printed and written
to benchmarks/results/bench_engine.json.
"""

import argparse
import json
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from judges.engine import judge_batch  # noqa: E402
from judges.testing.fake_provider import FakeProvider  # noqa: E402

MODELS = {"openai": "gpt-4o-mini-2024-07-18", "anthropic": "claude-haiku-4-5-20251001"}
PRICES = {
    "gpt-4o-mini-2024-07-18": {"input_per_mtok": 0.15, "output_per_mtok": 0.6},
    "claude-haiku-4-5-20251001": {"input_per_mtok": 1.0, "output_per_mtok": 5.0},
}


def make_cases(n: int) -> list[dict]:
    return [
        {
            "external_id": f"bench-{i:05d}",
            "input": f"Can I return order ORD-{i:05d} after 20 days?",
            "output": f"Yes: order ORD-{i:05d} is within the 30-day return window."
            + " Details follow." * (i % 7),
            "trace": {"retrievedSources": ["returns-policy"], "toolCalls": [], "context": "30-day returns."},
            "golden_answer": "Yes, returns are accepted within 30 days.",
            "expected_behaviour": "Cite the 30-day window.",
            "expected_tool": None,
            "expected_source": "returns-policy",
            "category": "policy",
        }
        for i in range(n)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--provider", choices=sorted(MODELS), default="openai")
    args = parser.parse_args()

    config = {
        "rubric": "returns-policy",
        "criteria": "The answer states the 30-day return window correctly.",
        "layers": ["contract", "behavioral"],
        "contract_checks": ["answer_present", "no_tool_when_none_expected", "expected_source"],
        "provider": args.provider,
        "model": MODELS[args.provider],
        "params": {"temperature": 0, "max_tokens": 200},
        "base_url_env": "EVALHUB_JUDGE_BENCH_URL",
        "api_key_env": "EVALHUB_JUDGE_BENCH_KEY",
        "timeout_s": 10,
    }
    cases = make_cases(args.n)
    with FakeProvider() as fake:
        fake.control(latency_ms=args.latency_ms, rule={"kind": "answer_min_length", "chars": 80})
        base_url = fake.anthropic_base_url if args.provider == "anthropic" else fake.openai_base_url
        env = {"EVALHUB_JUDGE_BENCH_URL": base_url, "EVALHUB_JUDGE_BENCH_KEY": "bench-key"}
        # Warm up: import the SDK and open a connection, outside the measured time.
        judge_batch([(cases[0], 0)], config, concurrency=1, env=env)
        fake.reset()
        fake.control(latency_ms=args.latency_ms, rule={"kind": "answer_min_length", "chars": 80})

        started = time.monotonic()
        judgments = judge_batch(
            [(case, 1) for case in cases], config, concurrency=args.concurrency, prices=PRICES, env=env
        )
        wall = time.monotonic() - started
        stats = fake.stats()

    ideal = args.n * args.latency_ms / 1000 / args.concurrency
    outcomes: dict[str, int] = {}
    for j in judgments:
        outcomes[j.outcome] = outcomes.get(j.outcome, 0) + 1
    latencies = sorted(j.latency_ms for j in judgments)
    result = {
        "n": args.n,
        "concurrency": args.concurrency,
        "latency_ms": args.latency_ms,
        "provider": args.provider,
        "wall_s": round(wall, 2),
        "ideal_s": round(ideal, 2),
        "ratio": round(wall / ideal, 3),
        "target_ratio": 1.10,
        "within_target": wall / ideal <= 1.10,
        "throughput_per_s": round(args.n / wall, 1),
        "judgment_latency_ms_p50": latencies[len(latencies) // 2],
        "judgment_latency_ms_p99": latencies[int(len(latencies) * 0.99) - 1],
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "outcomes": outcomes,
        "provider_calls": stats["total"],
        "server_max_in_flight": stats["max_in_flight"],
        "cost_usd": round(sum(j.cost_usd or 0 for j in judgments), 6),
    }
    print(json.dumps(result, indent=2))
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_engine.json").write_text(json.dumps(result, indent=2) + "\n")
    if outcomes.get("not_evaluated"):
        sys.exit("some judgments were not evaluated: the figures above do not measure a clean run")


if __name__ == "__main__":
    main()
