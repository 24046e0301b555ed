"""Calibration figures and the run report page on 20,000 labeled cases × 5 repeats in PostgreSQL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalhub python benchmarks/bench_report.py [--cases N]

It uses a database of its own on DATABASE_URL's server (`evalhub_bench_report` unless --database says
otherwise): created, migrated, filled with bulk_create, and dropped at the end (--keep keeps it).
The data: every case labeled by one reviewer, one in ten by a second (a few disagreeing); one finished
run with K repeats, about 88 % agreement, some flips and not-evaluated judgments. It times:
1. `run_figures` (the frames' three queries, reviewer agreement, stale checks, pandas): median of 5;
2. the report page, GET /runs/<id>/report/ through Django's test client (the whole server side:
   middleware, session, queries, pandas, template): median and p95 of 20, first views (cache cleared
   before each) and cached views (filtering and paging the same report); the htmx table partial; and
   the rubric's config page with its versions chart.
Targets: figures under 1 s, the page's server time under 0.5 s. Figures are printed and written to
benchmarks/results/bench_report.json.
"""

import argparse
import json
import random
import resource
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._benchdb import (  # noqa: E402  (after ROOT is on the path)
    bench_database,
    bench_project,
    bulk_cases,
    finished_run,
    p95,
    settle_after_bulk_load,
    timed,
)

REASON = "The answer {} the 30-day return window and checks the order's delivery date before promising a return."


def build(n_cases: int, repeats: int):
    """The dataset, labels and one finished run, written with bulk_create. Returns (run, lead)."""
    from django.utils import timezone

    from evalhub.models import User
    from judges.models import Judgment
    from labeling.models import Dataset, Label, Rubric

    rng = random.Random(6)
    lead = User.objects.create_user(username="lena", password="x")
    rita = User.objects.create_user(username="rita", password="x")
    rob = User.objects.create_user(username="rob", password="x")
    project = bench_project(leads=[lead], reviewers=[rita, rob])
    dataset = Dataset.objects.create(project=project, slug="bench", name="Bench")
    rubric = Rubric.objects.create(project=project, slug="return-policy",
                                   name="Does the answer follow the return policy?",
                                   criteria="Pass when the answer states the 30-day return window correctly.")
    past = timezone.now() - timedelta(days=1)
    cases = bulk_cases(dataset, n_cases, lambda i: f"Can I return order {i} after {i % 60} days?",
                       lambda i: f"Order {i}: returns within 30 days.", created_at=past)
    human = {case.pk: ("fail" if rng.random() < 0.3 else "pass") for case in cases}
    labels = [Label(case=c, rubric=rubric, reviewer=rita, verdict=human[c.pk], content_hash=c.content_hash)
              for c in cases]
    for c in cases[::10]:  # a second reviewer on one case in ten, disagreeing on one in twenty of those
        verdict = human[c.pk] if rng.random() > 0.05 else ("pass" if human[c.pk] == "fail" else "fail")
        labels.append(Label(case=c, rubric=rubric, reviewer=rob, verdict=verdict, content_hash=c.content_hash))
    Label.objects.bulk_create(labels, batch_size=5000)

    run = finished_run(rubric=rubric, dataset=dataset, lead=lead, repeats=repeats, judgments=n_cases * repeats,
                       started_at=past)
    batch = []
    for case in cases:
        right = human[case.pk]
        wrong = "pass" if right == "fail" else "fail"
        kind = rng.random()
        for repeat in range(1, repeats + 1):
            if kind < 0.10:
                outcome = wrong  # a consistent disagreement
            elif kind < 0.13:
                outcome = wrong if repeat % 2 else right  # a flip
            elif rng.random() < 0.005:
                outcome = "not_evaluated"
            else:
                outcome = right
            batch.append(Judgment(
                run=run, case=case, repeat=repeat, outcome=outcome, layer="behavioral",
                reason=REASON.format("states" if outcome == "pass" else "omits") if outcome != "not_evaluated" else "",
                error="timeout" if outcome == "not_evaluated" else "", input_tokens=420, output_tokens=38,
            ))
        if len(batch) >= 10_000:
            Judgment.objects.bulk_create(batch)
            batch = []
    Judgment.objects.bulk_create(batch)
    return run, lead


def arguments(description: str, database: str) -> argparse.Namespace:
    """The command line of this benchmark and of those built on its run (bench_probes.py)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pages", type=int, default=20, help="page requests to time")
    parser.add_argument("--database", default=database, help="the benchmark's own database name")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database afterwards")
    return parser.parse_args()


def build_settled(args: argparse.Namespace):
    """`build`, then the load settled (see `settle_after_bulk_load`), saying how long it took. Returns (run, lead)."""
    started = time.perf_counter()
    run, lead = build(args.cases, args.repeats)
    settle_after_bulk_load()
    print(f"{args.cases:,} cases × {args.repeats} repeats = {args.cases * args.repeats:,} judgments, "
          f"built in {time.perf_counter() - started:.1f} s (database {args.database})")
    return run, lead


def main() -> None:
    args = arguments(__doc__, "evalhub_bench_report")
    with bench_database(args.database, keep=args.keep):
        from django.core.cache import cache
        from django.test import Client
        from django.test.utils import setup_test_environment
        from django.urls import reverse

        from judges.calibration.metrics import calibration_figures
        from judges.calibration.selectors import run_figures, run_frames
        from judges.models import Run

        run, lead = build_settled(args)

        def fresh_run():
            return Run.objects.select_related("config__rubric", "dataset").get(pk=run.pk)

        figures = run_figures(run=fresh_run())  # warm-up (imports, connection), not measured
        figure_times = timed(lambda: run_figures(run=fresh_run()), 5)
        frame_times = timed(lambda: run_frames(run=fresh_run()), 5)
        cases, judgments = run_frames(run=fresh_run())
        pandas_times = timed(lambda: calibration_figures(judgments, cases=cases), 5)

        setup_test_environment()  # the test client's host, 'testserver', is allowed
        client = Client()
        client.force_login(lead)
        project = run.dataset.project.slug
        url = reverse("judges:run_report", args=[project, run.pk])
        assert client.get(url).status_code == 200  # warm-up: templates compiled, session cached

        def page(path: str, cold: bool = False, **headers):
            def get():
                if cold:
                    cache.clear()  # the first view of a report, or the first after its evidence changed
                response = client.get(path, headers=headers)
                assert response.status_code == 200, response.status_code
            return get

        pages = {
            "report page, first view (cold)": page(url, cold=True),
            "report page, again (cached)": page(url),
            "report page, false passes only (cached)": page(url + "?only=false_pass"),
            "report table partial, htmx (cached)": page(url + "?only=flips", **{"HX-Request": "true",
                                                                               "HX-Target": "disagreements"}),
            "rubric config page with versions chart": page(reverse("judges:config_list",
                                                                   args=[project, "return-policy"])),
        }
        page_times = {name: timed(get, args.pages) for name, get in pages.items()}

        result = {
            "cases": args.cases, "repeats": args.repeats, "judgments": args.cases * args.repeats,
            "n": figures["n"], "agreement": figures["agreement"], "flip_rate": figures["flip_rate"],
            "coverage": figures["coverage"],
            "run_figures_median_s": round(statistics.median(figure_times), 3),
            "run_frames_median_s": round(statistics.median(frame_times), 3),
            "calibration_figures_pandas_median_s": round(statistics.median(pandas_times), 3),
            "pages": {
                name: {"median_s": round(statistics.median(t), 3), "p95_s": round(p95(t), 3)}
                for name, t in page_times.items()
            },
            "targets": {"run_figures_s": 1.0, "report_page_s": 0.5},
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        }
        print(f"  figures: n {figures['n']:,}, agreement {figures['agreement']:.4f}, "
              f"flip rate {figures['flip_rate']:.4f}, coverage {figures['coverage']:.4f}")
        print(f"  run_figures                 median {result['run_figures_median_s']:.3f} s "
              f"(frames {result['run_frames_median_s']:.3f} s, pandas "
              f"{result['calibration_figures_pandas_median_s']:.3f} s)  target < 1 s: "
              f"{'met' if result['run_figures_median_s'] < 1 else 'MISSED'}")
        for name, stats in result["pages"].items():
            print(f"  {name:<40} median {stats['median_s']:.3f} s  p95 {stats['p95_s']:.3f} s")
        cold = result["pages"]["report page, first view (cold)"]["median_s"]
        warm = result["pages"]["report page, again (cached)"]["median_s"]
        print(f"  report page server time target < 0.5 s: first view {'met' if cold < 0.5 else 'MISSED'}, "
              f"cached {'met' if warm < 0.5 else 'MISSED'}; "
              f"peak memory {result['peak_rss_mib']:,.0f} MiB")
        out = ROOT / "benchmarks" / "results"
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench_report.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
