"""A large run through the real machinery, then its pages, estimate, export and import, timed.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalhub python benchmarks/bench_run_pages.py [--cases N]

It uses a database of its own on DATABASE_URL's server (`evalhub_bench_runs` unless --database says
otherwise): created, migrated, and dropped at the end (--keep keeps it). With N cases (default
10,000) and 2 repeats it times:
1. a contract-only run judged in this process exactly as a worker does (run_work_here);
2. the run page (first page, a filtered page, the last page), the polled progress partial, the run list;
3. the start form's estimate of a behavioral config over the dataset (prompts of 20 cases, a cache
   lookup of every (case, repeat));
4. exporting the run's judgments to JSONL, and importing that file back as an external run.
The pages' query counts do not grow with the rows (the tests pin them); this shows the time.
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._benchdb import bench_database, bench_project  # noqa: E402  (after ROOT is on the path)


def timed(label: str, fn, *, repeat: int = 1):
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    print(f"  {label:<52} {best * 1000:9.1f} ms" + (f" (best of {repeat})" if repeat > 1 else ""))
    return result, best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--database", default="evalhub_bench_runs", help="the benchmark's own database name")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database afterwards")
    args = parser.parse_args()

    with bench_database(args.database, keep=args.keep, env={"DJANGO_ALLOWED_HOSTS": "testserver"}):
        from django.conf import settings
        from django.core.management import call_command
        from django.test import Client
        from django.urls import reverse

        from evalhub.demo.judges import _create_run
        from evalhub.models import User
        from judges.configs import services as config_services
        from judges.models import Judgment, ModelPrice, Run
        from judges.runs import worker
        from judges.runs.selectors import run_estimate
        from labeling.models import Case, Dataset, Rubric, case_split, labeled_content_hash

        settings.EVALHUB_CHUNK_CASES = 200
        lead = User.objects.create_user("bench-lead", password="x")
        project = bench_project(leads=[lead])
        dataset = Dataset.objects.create(project=project, slug="bench", name="Bench")
        rubric = Rubric.objects.create(project=project, slug="tool-use", name="Tools right?",
                                       criteria="The right tool is called.")
        cases = []
        for i in range(args.cases):
            external_id = f"case-{i:06d}"
            output = "" if i % 7 == 0 else f"Order {i} shipped on Monday and arrives on Friday."
            trace = {"toolCalls": [{"name": "lookup_order", "argument": {"order_id": i}, "result": "shipped"}]}
            cases.append(Case(
                dataset=dataset, external_id=external_id, input=f"Where is order {i}?", output=output, trace=trace,
                expected_tool="lookup_order", expected_tool_argument={"order_id": i}, category="tools",
                split=case_split(external_id),
                content_hash=labeled_content_hash(input=f"Where is order {i}?", output=output, trace=trace),
            ))
        Case.objects.bulk_create(cases, batch_size=2000)
        total = args.cases * args.repeats
        print(f"{args.cases:,} cases × {args.repeats} repeats = {total:,} judgments, database {args.database}")

        config = config_services.judge_config_save(
            rubric=rubric, by=lead,
            spec={"layers": ["contract"], "contract_checks": ["answer_present", "expected_tool",
                                                              "expected_tool_argument"]},
        )
        run = _create_run(config=config, dataset=dataset, by=lead)
        Run.objects.filter(pk=run.pk).update(repeats=args.repeats, total=total)

        _, seconds = timed("contract-only run, judged and recorded", lambda: worker.run_work_here(run_id=run.pk))
        run.refresh_from_db()
        assert run.status == Run.Status.FINISHED and Judgment.objects.filter(run=run).count() == total
        print(f"  {'':<52} {total / seconds:9,.0f} judgments/s")

        client = Client()
        client.force_login(lead)
        url = reverse("judges:run_detail", args=[project.slug, run.pk])
        last = (total + 49) // 50
        for label, query in (("run page, first page", {}), ("run page, verdict fail + case search", {
                "outcome": "fail", "q": "case-0001"}), (f"run page, last page ({last})", {"page": last})):
            response, _ = timed(label, lambda q=query: client.get(url, q), repeat=5)
            assert response.status_code == 200
        timed("progress partial", lambda: client.get(reverse("judges:run_progress", args=[project.slug, run.pk])),
              repeat=5)
        timed("run list", lambda: client.get(reverse("judges:run_list", args=[project.slug])), repeat=5)

        behavioral = config_services.judge_config_save(
            rubric=rubric, by=lead,
            spec={"layers": ["behavioral"], "provider": "openai", "model": "gpt-4o-mini-2024-07-18",
                  "params": {"temperature": 0, "max_tokens": 300}},
        )
        ModelPrice.objects.create(model="gpt-4o-mini-2024-07-18", input_per_mtok=0.15, output_per_mtok=0.6,
                                  updated_by=lead)
        estimate, _ = timed(
            f"estimate, behavioral ({total:,} cache keys looked up)",
            lambda: run_estimate(config=behavioral, dataset=dataset, repeats=args.repeats), repeat=3,
        )
        print(f"  {'':<52} ${estimate.cost_usd} for {estimate.calls:,} calls "
              f"(~{estimate.input_tokens_per_call} tokens in, ≤ 300 out each)")

        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "judgments.jsonl"
            timed("export_judgments to JSONL",
                  lambda: call_command("export_judgments", str(run.pk), str(path), stdout=open(os.devnull, "w")))
            print(f"  {'':<52} {path.stat().st_size / 1e6:9.1f} MB")
            timed("import_judgments of that file (an external run)",
                  lambda: call_command("import_judgments", "bench", str(path), rubric="tool-use", project=project.slug,
                                       stdout=open(os.devnull, "w"), stderr=open(os.devnull, "w")))
        external = Run.objects.filter(config__external=True).get()
        assert Judgment.objects.filter(run=external).count() == total


if __name__ == "__main__":
    main()
