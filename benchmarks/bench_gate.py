"""The CI command end to end: `evalhub-gate check` on an outputs file, cold and then with its cache.

    python benchmarks/bench_gate.py                    # 1,000 cases, 2 rubrics, concurrency 16, 100 ms
    python benchmarks/bench_gate.py --cases 200 --latency-ms 0

The installed console script runs as a subprocess (as in CI) against the fake provider answering in a
fixed latency. The first run asks the judge for every (case, rubric); the second, over the same
outputs with the same cache folder, must ask nothing. The ideal cold wall time is
cases × rubrics × latency / concurrency; the figures are printed and written to
benchmarks/results/bench_gate.json.
"""

import argparse
import json
import os
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
        argv = [str(command), "check", "--config", "gates.json", "--outputs", "outputs.jsonl",
                "--concurrency", str(args.concurrency), "--cache-dir", "cache", "--junit", "junit.xml"]
        figures = {"cases": args.cases, "rubrics": args.rubrics, "concurrency": args.concurrency,
                   "latency_ms": args.latency_ms}
        for name in ("cold", "cached"):
            before = fake.stats()["total"]
            started = time.perf_counter()
            done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, check=False)
            seconds = time.perf_counter() - started
            if done.returncode != 0:
                sys.exit(f"evalhub-gate exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
            calls = fake.stats()["total"] - before
            figures[name] = {"seconds": round(seconds, 2), "provider_calls": calls,
                             "judgments_per_s": round(args.cases * args.rubrics / seconds, 1)}
        ideal = args.cases * args.rubrics * args.latency_ms / 1000 / args.concurrency
        figures["ideal_cold_seconds"] = round(ideal, 2)

    print(f"evalhub-gate: {args.cases} cases × {args.rubrics} rubrics, concurrency {args.concurrency}, "
          f"provider latency {args.latency_ms} ms")
    for name in ("cold", "cached"):
        f = figures[name]
        print(f"  {name:6}  {f['seconds']:7.2f} s  {f['provider_calls']:6} provider calls  "
              f"{f['judgments_per_s']:8.1f} judgments/s")
    print(f"  ideal cold time (cases × rubrics × latency / concurrency): {ideal:.2f} s")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_gate.json").write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
