"""The CI command end to end: `evalhub-gate check` on an outputs file, cold and then with its cache.

    python benchmarks/bench_gate.py                    # 1,000 cases, 2 gate rubrics, concurrency 16, 100 ms
    python benchmarks/bench_gate.py --cases 200 --latency-ms 0 --runs 1

The installed console script runs as a subprocess (as in CI) against the fake provider answering in a
fixed latency. Each cold run asks the judge for every (case, rubric) with a fresh cache folder; the
cached run, over the same outputs with the last cold run's folder, must ask nothing.

Figures, the median of --runs cold runs (3 by default):
- judging time: the stand-in's first call to the end of its last, against the ideal
  calls × latency / concurrency (the rubrics share one concurrency cap: target ≤ 1.15×);
- the whole command's wall time, process start and SDK import included.
Printed and written to benchmarks/results/bench_gate.json.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from judges.engine import JudgeConfig  # noqa: E402
from judges.testing.fake_provider import FakeProvider  # noqa: E402

MODEL = "gpt-4o-mini-2024-07-18"


def gate_config(rubrics: int) -> dict:
    entries = []
    for i in range(rubrics):
        slug = f"rubric-{i}"
        judge = JudgeConfig.from_dict({
            "rubric": slug, "criteria": f"Criteria {i}: the answer states the 30-day window.",
            "layers": ["contract", "behavioral"], "contract_checks": ["answer_present"],
            "provider": "openai-compatible", "model": MODEL, "base_url_env": "EVALHUB_JUDGE_BENCH_URL",
            "api_key_env": "EVALHUB_JUDGE_BENCH_KEY",
            "params": {"temperature": 0, "max_tokens": 200},
        }).to_dict(include_hash=True)
        entries.append({"slug": slug, "criteria": judge["criteria"], "stage": "gate", "fail_closed": False,
                        "judge": judge, "prices": {MODEL: {"input_per_mtok": 0.15, "output_per_mtok": 0.6}}})
    return {"schema": "evalhub.gates/v1", "generated_at": "bench", "rubrics": entries}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--rubrics", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency-ms", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3, help="cold runs; the median is reported")
    args = parser.parse_args()
    command = Path(sys.executable).parent / "evalhub-gate"
    if not command.exists():
        sys.exit(f"{command} is missing: pip install -e . installs the console script")

    with FakeProvider() as fake, tempfile.TemporaryDirectory() as tmp:
        fake.control(latency_ms=args.latency_ms, rule={"kind": "answer_contains", "text": "30 days"})
        work = Path(tmp)
        (work / "gates.json").write_text(json.dumps(gate_config(args.rubrics)))
        with open(work / "outputs.jsonl", "w") as fh:
            for i in range(args.cases):
                fh.write(json.dumps({"external_id": f"pr-{i:05d}", "input": f"Can I return order {i}?",
                                     "output": f"Yes, order {i} can be returned within 30 days.",
                                     "category": "policy"}) + "\n")
        env = {**os.environ, "EVALHUB_JUDGE_BENCH_URL": fake.openai_base_url, "EVALHUB_JUDGE_BENCH_KEY": "sk-bench"}
        env.pop("GITHUB_ACTIONS", None)
        figures = {"cases": args.cases, "rubrics": args.rubrics, "concurrency": args.concurrency,
                   "latency_ms": args.latency_ms, "runs": args.runs}

        def gate(cache: str) -> dict:
            argv = [str(command), "check", "--config", "gates.json", "--outputs", "outputs.jsonl",
                    "--concurrency", str(args.concurrency), "--cache-dir", cache, "--junit", "junit.xml"]
            fake.reset()
            fake.control(latency_ms=args.latency_ms, rule={"kind": "answer_contains", "text": "30 days"})
            started = time.perf_counter()
            done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, check=False)
            seconds = time.perf_counter() - started
            if done.returncode != 0:
                sys.exit(f"evalhub-gate exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
            stats = fake.stats()
            judging = (stats["last_call_end"] - stats["first_call_at"]) if stats["total"] else 0.0
            return {"wall_seconds": round(seconds, 2), "judging_seconds": round(judging, 2),
                    "provider_calls": stats["total"], "max_in_flight": stats["max_in_flight"]}

        cold = [gate(f"cache-{run}") for run in range(args.runs)]
        cached = gate(f"cache-{args.runs - 1}")
        ideal = cold[0]["provider_calls"] * args.latency_ms / 1000 / args.concurrency
        judging = statistics.median(r["judging_seconds"] for r in cold)
        wall = statistics.median(r["wall_seconds"] for r in cold)
        figures.update({
            "cold_runs": cold, "cached": cached, "ideal_judging_seconds": round(ideal, 2),
            "median_judging_seconds": judging, "median_wall_seconds": wall,
            "judging_over_ideal": round(judging / ideal, 3) if ideal else None,
        })

    print(f"evalhub-gate: {args.cases} cases × {args.rubrics} gate rubrics, concurrency {args.concurrency}, "
          f"provider latency {args.latency_ms} ms, median of {args.runs} cold runs")
    for i, run in enumerate(cold, start=1):
        print(f"  cold {i}: judging {run['judging_seconds']:6.2f} s  wall {run['wall_seconds']:6.2f} s  "
              f"{run['provider_calls']} calls, at most {run['max_in_flight']} in flight")
    print(f"  judging (first call to last): {judging:.2f} s = {figures['judging_over_ideal']}× the ideal "
          f"calls × latency / concurrency = {ideal:.2f} s")
    print(f"  the whole command (process start and SDK import included): {wall:.2f} s")
    print(f"  cached: {cached['wall_seconds']:.2f} s, {cached['provider_calls']} provider calls")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_gate.json").write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
