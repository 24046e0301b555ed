"""Bias probes on 20,000 labeled cases × 5 repeats in PostgreSQL: starting them, their figures, the pages.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalhub python benchmarks/bench_probes.py [--cases N]

It uses a database of its own on DATABASE_URL's server (`evalhub_bench_probes` unless --database says
otherwise), created, migrated and dropped at the end (--keep keeps it). The parent run is
bench_report.py's (about 88 % agreement, some flips and not-evaluated); then:
1. `probes_start` for the three kinds (the human verdicts of every case in one query, the chunks with
   their stored verdicts; no worker runs, so this is the start alone): median of 3, probes deleted between;
2. three finished probes written with bulk_create (each judgment with its variant, as a run window stores
   it), moving about 6 %, 2 % and 1 % of the verdicts;
3. `probe_figures` (the parent's and the probes' judgments counted per case by the database, pandas),
   computed and cached, and `run_figures` with and without probes (their cost inside the figures):
   median of 5;
4. the report page with its "Bias probes" panel (first view, cache cleared; and cached), the polled
   panel partial, and the rubric's config page with the probes table: median and p95 of 20.
Figures are printed and written to benchmarks/results/bench_probes.json.
"""

import json
import random
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._benchdb import bench_database, settle_after_bulk_load  # noqa: E402  (after ROOT is on the path)
from benchmarks._benchdb import p95, timed  # noqa: E402  (after ROOT is on the path)
from benchmarks.bench_report import arguments, build_settled  # noqa: E402  (the parent run)

MOVES = {"verbosity": 0.06, "sycophancy": 0.02, "injection": 0.01}


def write_probes(run) -> dict[str, int]:
    """A finished probe of each kind over the run's judged cases with a human verdict (injection: the human
    fails), moving a share of verdicts, each judgment with its variant. Returns judgments per kind."""
    from django.utils import timezone

    from judges.configs.cases import engine_case
    from judges.models import Judgment, Run
    from judges.runs.variants import applies, make_variant
    from labeling.disputes.selectors import cases_with_human_verdict
    from labeling.models import Case

    rng = random.Random(9)
    humans = dict(
        cases_with_human_verdict(rubric=run.config.rubric, cases=Case.objects.filter(dataset_id=run.dataset_id))
        .filter(human_verdict__isnull=False).values_list("pk", "human_verdict")
    )
    outcomes: dict[int, list[str]] = {}
    for case_id, outcome in Judgment.objects.filter(run=run).order_by("case_id", "repeat").values_list(
        "case_id", "outcome"
    ):
        outcomes.setdefault(case_id, []).append(outcome)
    cases = {c.pk: c for c in Case.objects.filter(pk__in=list(humans))}
    written = {}
    now = timezone.now()
    for kind, share in MOVES.items():
        chosen = [pk for pk in sorted(humans) if applies(kind, humans[pk])]
        probe = Run.objects.create(
            config=run.config, dataset_id=run.dataset_id, repeats=run.repeats, status=Run.Status.FINISHED,
            created_by=run.created_by, started_at=now, finished_at=now, parent=run, probe=kind,
            total=len(chosen) * run.repeats, done=len(chosen) * run.repeats,
        )
        batch, count = [], 0
        for pk in chosen:
            variant = make_variant(kind, engine_case(cases[pk]), humans[pk])
            move = rng.random() < share
            for repeat, outcome in enumerate(outcomes[pk], start=1):
                if move and outcome in ("pass", "fail"):
                    outcome = "pass" if outcome == "fail" else "fail"
                batch.append(Judgment(run=probe, case_id=pk, repeat=repeat, outcome=outcome, layer="behavioral",
                                      reason="probe", variant=variant))
            if len(batch) >= 10_000:
                Judgment.objects.bulk_create(batch)
                count += len(batch)
                batch = []
        Judgment.objects.bulk_create(batch)
        written[kind] = count + len(batch)
    return written


def main() -> None:
    args = arguments(__doc__, "evalhub_bench_probes")
    with bench_database(args.database, keep=args.keep):
        from django.core.cache import cache
        from django.db import transaction
        from django.test import Client
        from django.test.utils import setup_test_environment
        from django.urls import reverse

        from judges.calibration.selectors import run_figures
        from judges.models import Run
        from judges.probes.selectors import probe_figures, probe_judgments
        from judges.probes.services import probes_start

        run, lead = build_settled(args)

        def fresh_run():
            return Run.objects.select_related("config__rubric", "dataset").get(pk=run.pk)

        run_figures(run=fresh_run())  # warm-up
        without = timed(lambda: run_figures(run=fresh_run()), 5)

        def start_and_drop():
            # Queued work goes to the broker on commit: roll back instead, so nothing is queued.
            with transaction.atomic():
                probes_start(run=fresh_run(), kinds=["verbosity", "sycophancy", "injection"], by=lead)
                transaction.set_rollback(True)
        start_times = timed(start_and_drop, 3)

        started = time.perf_counter()
        written = write_probes(fresh_run())
        settle_after_bulk_load()
        print(f"  probes written: {', '.join(f'{k} {n:,}' for k, n in written.items())} judgments "
              f"in {time.perf_counter() - started:.1f} s")

        figures = probe_figures(run=fresh_run())

        def probe_figures_cold():
            cache.clear()
            probe_figures(run=fresh_run())
        probe_times = timed(probe_figures_cold, 5)
        probe_cached_times = timed(lambda: probe_figures(run=fresh_run()), 5)
        probe_sql_times = timed(lambda: probe_judgments(parent_ids=[run.pk]), 5)
        with_probes = timed(lambda: run_figures(run=fresh_run()), 5)

        setup_test_environment()
        client = Client()
        client.force_login(lead)
        project = run.dataset.project.slug
        url = reverse("judges:run_report", args=[project, run.pk])
        assert client.get(url).status_code == 200

        def page(path: str, cold: bool = False, status: int = 200, **headers):
            def get():
                if cold:
                    cache.clear()
                response = client.get(path, headers=headers)
                assert response.status_code == status, response.status_code
            return get

        pages = {
            "report page with probes, first view (cold)": page(url, cold=True),
            "report page with probes, again (cached)": page(url),
            "probes panel partial, htmx (polled)": page(reverse("judges:probes_panel", args=[project, run.pk]),
                                                        status=286, **{"HX-Request": "true"}),
            "rubric config page with the probes table": page(reverse("judges:config_list",
                                                                     args=[project, "return-policy"])),
        }
        page_times = {name: timed(get, args.pages) for name, get in pages.items()}

        result = {
            "cases": args.cases, "repeats": args.repeats, "parent_judgments": args.cases * args.repeats,
            "probe_judgments": written,
            "moved": {k: {"compared": f["compared"], "moved": f["moved"], "moved_share": round(f["moved_share"], 4)}
                      for k, f in figures["probes"].items()},
            "probe_moved": round(figures["probe_moved"], 4),
            "probes_start_3_kinds_median_s": round(statistics.median(start_times), 3),
            "probe_figures_median_s": round(statistics.median(probe_times), 3),
            "probe_figures_cached_median_s": round(statistics.median(probe_cached_times), 3),
            "probe_judgments_query_median_s": round(statistics.median(probe_sql_times), 3),
            "run_figures_without_probes_median_s": round(statistics.median(without), 3),
            "run_figures_with_probes_median_s": round(statistics.median(with_probes), 3),
            "pages": {name: {"median_s": round(statistics.median(t), 3), "p95_s": round(p95(t), 3)}
                      for name, t in page_times.items()},
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        }
        for kind, moved in result["moved"].items():
            print(f"  {kind:<11} compared {moved['compared']:,}  moved {moved['moved']:,} "
                  f"({moved['moved_share'] * 100:.1f} %)")
        print(f"  probes_start (3 kinds)       median {result['probes_start_3_kinds_median_s']:.3f} s")
        print(f"  probe_figures                median {result['probe_figures_median_s']:.3f} s "
              f"(the probes' counts query {result['probe_judgments_query_median_s']:.3f} s); cached "
              f"{result['probe_figures_cached_median_s']:.3f} s")
        print(f"  run_figures without probes   median {result['run_figures_without_probes_median_s']:.3f} s")
        print(f"  run_figures with 3 probes    median {result['run_figures_with_probes_median_s']:.3f} s")
        for name, stats in result["pages"].items():
            print(f"  {name:<44} median {stats['median_s']:.3f} s  p95 {stats['p95_s']:.3f} s")
        print(f"  peak memory {result['peak_rss_mib']:,.0f} MiB")
        out = ROOT / "benchmarks" / "results"
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench_probes.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
