"""The agent's pass rate and the run page on a run of 100,000 cases with 1,000 drawn, in PostgreSQL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalhub python benchmarks/bench_pass_rate.py [--cases N]

It uses a database of its own on DATABASE_URL's server (`evalhub_bench_pass_rate` unless --database says
otherwise): created, migrated, filled with bulk_create, and dropped at the end (--keep keeps it).
The data: N cases in five categories, one finished run with K = 2 repeats (a judge that passes 10 points
too many), an audit sample of 1,000 cases drawn uniformly through the service, 800 of them labeled.
It times, median of 5 (figures) and of 10 (pages):
1. `run_pass_rate` (three queries and the numpy estimate, per category and provisional bounds);
2. the same with the interval's history (what the run page draws);
3. the run page, GET /runs/<id>/ through Django's test client (the whole server side).
Targets: figures under 0.5 s, the page under 1 s. Figures are printed and written to
benchmarks/results/bench_pass_rate.json.
"""

import argparse
import json
import random
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
    settle_after_bulk_load,
    timed,
)


def build(n_cases: int, repeats: int, drawn: int, labeled: int):
    """The dataset, one finished run with its per-case tallies and its labeled audit sample. Returns (run, lead)."""
    from django.utils import timezone

    from evalhub.models import User
    from judges.estimates.services import audit_sample_draw
    from judges.models import Judgment
    from judges.runs.tallies import case_tallies_refresh
    from labeling.models import Dataset, Label, Rubric

    rng = random.Random(31)
    lead = User.objects.create_user(username="lena", password="x")
    rita = User.objects.create_user(username="rita", password="x")
    project = bench_project(leads=[lead], reviewers=[rita])
    dataset = Dataset.objects.create(project=project, slug="bench", name="Bench")
    rubric = Rubric.objects.create(project=project, slug="return-policy",
                                   name="Does the answer follow the return policy?",
                                   criteria="Pass when the answer states the 30-day return window correctly.")
    past = timezone.now() - timedelta(days=1)
    cases = bulk_cases(dataset, n_cases, lambda i: f"Can I return order {i}?",
                       lambda i: f"Order {i}: returns within 30 days.", created_at=past)
    truth = {case.pk: rng.random() < 0.65 for case in cases}
    run = finished_run(rubric=rubric, dataset=dataset, lead=lead, repeats=repeats, judgments=n_cases * repeats,
                       started_at=past)
    batch = []
    for case in cases:
        chance = 0.95 if truth[case.pk] else 0.35  # too generous on failing answers
        for repeat in range(1, repeats + 1):
            batch.append(Judgment(run=run, case=case, repeat=repeat, layer="contract",
                                  outcome="pass" if rng.random() < chance else "fail"))
        if len(batch) >= 20_000:
            Judgment.objects.bulk_create(batch)
            batch = []
    Judgment.objects.bulk_create(batch)
    case_tallies_refresh(run_id=run.pk)  # as the worker keeps them when it records judgments
    sample = audit_sample_draw(run=run, size=drawn, method="uniform", seed=7, by=lead)
    by_id = {case.external_id: case for case in cases}
    Label.objects.bulk_create([
        Label(case=by_id[e], rubric=rubric, reviewer=rita, verdict="pass" if truth[by_id[e].pk] else "fail",
              content_hash=by_id[e].content_hash)
        for e in sample.external_ids[:labeled]
    ])
    return run, lead


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--drawn", type=int, default=1_000)
    parser.add_argument("--labeled", type=int, default=800)
    parser.add_argument("--database", default="evalhub_bench_pass_rate", help="the benchmark's own database name")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database afterwards")
    args = parser.parse_args()
    with bench_database(args.database, keep=args.keep, env={"DJANGO_ALLOWED_HOSTS": "testserver"}):
        from django.test import Client
        from django.test.utils import setup_test_environment
        from django.urls import reverse

        from judges.estimates.selectors import run_pass_rate
        from judges.models import Run

        started = time.perf_counter()
        run, lead = build(args.cases, args.repeats, args.drawn, args.labeled)
        settle_after_bulk_load()
        print(f"{args.cases:,} cases × {args.repeats} repeats, {args.drawn:,} drawn, {args.labeled:,} labeled: "
              f"built in {time.perf_counter() - started:.1f} s (database {args.database})")

        def fresh_run():
            return Run.objects.select_related("config__rubric", "dataset").get(pk=run.pk)

        figures = run_pass_rate(run=fresh_run())  # warm-up, not measured
        figure_times = timed(lambda: run_pass_rate(run=fresh_run()), 5)
        history_times = timed(lambda: run_pass_rate(run=fresh_run(), history=True), 5)
        setup_test_environment()
        client = Client()
        client.force_login(lead)
        url = reverse("judges:run_detail", args=[run.dataset.project.slug, run.pk])
        assert client.get(url).status_code == 200  # warm-up

        def page():
            assert client.get(url).status_code == 200

        page_times = timed(page, 10)
        result = {
            "cases": args.cases, "repeats": args.repeats, "drawn": args.drawn, "labeled": args.labeled,
            "estimate": figures["estimate"], "ci95": figures["ci95"], "judge_pass_rate": figures["judge_pass_rate"],
            "human_only": figures["human_only"], "lambda": figures["lambda"],
            "effective_labels": figures["effective_labels"],
            "run_pass_rate_median_s": round(statistics.median(figure_times), 3),
            "run_pass_rate_with_history_median_s": round(statistics.median(history_times), 3),
            "run_page_median_s": round(statistics.median(page_times), 3),
            "run_page_max_s": round(max(page_times), 3),
            "targets": {"run_pass_rate_s": 0.5, "run_page_s": 1.0},
        }
        print(f"  judge {figures['judge_pass_rate']:.4f}; estimate {figures['estimate']:.4f} "
              f"[{figures['ci95'][0]:.4f}, {figures['ci95'][1]:.4f}]; humans only "
              f"{figures['human_only']['estimate']:.4f}; effective labels {figures['effective_labels']:.0f}")
        print(f"  run_pass_rate               median {result['run_pass_rate_median_s']:.3f} s (target 0.5)")
        print(f"  ... with the history        median {result['run_pass_rate_with_history_median_s']:.3f} s")
        print(f"  run page                    median {result['run_page_median_s']:.3f} s, "
              f"max {result['run_page_max_s']:.3f} s (target 1)")
        out = ROOT / "benchmarks" / "results"
        out.mkdir(exist_ok=True)
        (out / "bench_pass_rate.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
