"""Import 100,000 cases from JSONL into PostgreSQL through `manage.py import_cases`, the path users get.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalhub python benchmarks/bench_import.py [--cases N]

It uses a database of its own on DATABASE_URL's server (`evalhub_bench` unless --database says
otherwise): created, migrated, and dropped at the end (--keep keeps it). With a few rubrics present
(the labeling queue's triggers add one tally row per case and rubric), it times:
1. importing the generated file into a new dataset (all created);
2. importing it again with --update (all unchanged: one bulk lookup, no writes);
3. importing a copy where every answer changed, with --update (all updated).
Target: step 1 under 30 s for 100,000 cases.
"""

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._benchdb import bench_database, bench_project  # noqa: E402  (after ROOT is on the path)


def write_cases(path: Path, n: int, *, answer: str) -> int:
    """A realistic file: a question, an answer, a trace with a tool call and sources, metadata."""
    rng = random.Random(7)
    categories = ["policy", "tools", "combined", "edge", "adversarial"]
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            order = rng.randint(1000, 99999)
            case = {
                "external_id": f"case-{i:06d}",
                "input": f"Hi, I bought shoes (order {order}) {rng.randint(1, 90)} days ago. Can I return them?",
                "output": f"{answer} Your order {order} is within our 30-day return window; I have started the return.",
                "trace": {
                    "toolCalls": [{"name": "lookup_order", "argument": {"order_id": order},
                                   "result": {"status": "delivered", "days_since_delivery": rng.randint(1, 90)}}],
                    "retrievedSources": ["policy-returns", f"faq-{rng.randint(1, 40)}"],
                    "context": "Returns are accepted within 30 days of delivery, unworn, with the receipt.",
                },
                "golden_answer": "Returns are accepted within 30 days of delivery.",
                "expected_behaviour": "Check the order's delivery date before promising a return.",
                "expected_tool": "lookup_order",
                "expected_tool_argument": {"order_id": order},
                "expected_source": "policy-returns",
                "category": categories[i % len(categories)],
                "metadata": {"agent_model": "gpt-4o-mini-2024-07-18", "ticket": i},
            }
            out.write(json.dumps(case) + "\n")
    return path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--rubrics", type=int, default=3, help="rubrics present during the import")
    parser.add_argument("--database", default="evalhub_bench", help="the benchmark's own database name")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database afterwards")
    args = parser.parse_args()

    with bench_database(args.database, keep=args.keep):
        from django.core.management import call_command

        from labeling.models import Case, CaseTally, Rubric

        project = bench_project()
        for i in range(args.rubrics):
            Rubric.objects.create(project=project, slug=f"rubric-{i}", name=f"Question {i}?", criteria="…")
        with tempfile.TemporaryDirectory() as folder:
            original, changed = Path(folder) / "cases.jsonl", Path(folder) / "changed.jsonl"
            size = write_cases(original, args.cases, answer="Yes.")
            write_cases(changed, args.cases, answer="Yes, of course.")
            print(f"{args.cases:,} cases, {size / 1e6:.1f} MB of JSONL, {args.rubrics} rubrics, "
                  f"database {args.database}")

            timings = []
            for label, path, extra in (
                ("import (all created)", original, []),
                ("re-import --update (all unchanged)", original, ["--update"]),
                ("re-import --update (all changed)", changed, ["--update"]),
            ):
                started = time.perf_counter()
                call_command("import_cases", "bench", str(path), *extra, project=project.slug,
                             stdout=open(os.devnull, "w"))
                seconds = time.perf_counter() - started
                timings.append(seconds)
                print(f"  {label:<38} {seconds:7.2f} s  {args.cases / seconds:>9,.0f} cases/s")
            assert Case.objects.filter(dataset__slug="bench").count() == args.cases
            assert CaseTally.objects.count() == args.cases * args.rubrics
            assert Case.objects.filter(output__startswith="Yes, of course.").count() == args.cases
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        verdict = "under" if timings[0] < 30 else "OVER"
        print(f"  peak memory {peak:,.0f} MB; first import {verdict} the 30 s target")


if __name__ == "__main__":
    main()
