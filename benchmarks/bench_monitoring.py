"""Production monitoring: the estimators' seeded simulation, the monitor's own overhead per arriving case, and the
monitor page at 90 windows, in PostgreSQL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalhub .venv/bin/python benchmarks/bench_monitoring.py \
        [--repeats 2000] [--per-day 100000] [--cases-per-window 5000] [--windows 90]

1. The simulation of docs/monitoring.md "Checks" (judges/monitoring/simulation.py), `--repeats` times: each daily
   window's coverage, the drop flagged against the baseline by day 9, false alarms on days 2-7, the judge's raw
   rate beside the corrected one.
2. The monitor's overhead per case at `--per-day` cases a day, sample 0.05: cases arrive through the ingest path
   (labeling.importing.cases, what the ingest API and the OTLP receiver write through), one tick's worth at a
   time (a day's cases over 1,440 one-minute ticks); each tick's time (drawing, recording, the audit draw, handing
   the sampled cases to the day's run) against the ingest of the same cases, as a ratio in one run. The judging
   itself is the run worker's (benchmarks/bench_run_throughput.py) and not counted: no worker takes the queued
   runs (their messages wait in CELERY_BROKER_URL's Redis database, flushed at the end: give it one of its own).
   Then one tick that catches up on a whole day's cases at once (the beat was down).
3. The monitor page (GET through Django's test client) at `--windows` daily windows of `--cases-per-window`
   judged cases (100,000 a day at sample 0.05 is 5,000), 150 audit labels each, against the same page at 10
   windows: the page's time and the ratio.
Writes benchmarks/results/bench_monitoring.json.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._benchdb import bench_database, bench_project, settle_after_bulk_load, timed  # noqa: E402


def simulation(repeats: int) -> dict:
    from judges.monitoring.simulation import DAYS, report, simulate

    started = time.perf_counter()
    tally = simulate(repeats)
    print(report(tally))
    return {"repeats": repeats, "seconds": round(time.perf_counter() - started, 1),
            "coverage_by_day": [round(c / repeats, 4) for c in tally.covered],
            "raw_by_day": [round(r / repeats, 4) for r in tally.raw],
            "corrected_by_day": [round(c / repeats, 4) for c in tally.corrected],
            "flagged_by_day9": tally.flagged_by_day9 / repeats,
            "false_alarm_rate_vs_previous": tally.false_alarms / tally.comparisons,
            "false_alarm_rate_vs_days_before": tally.baseline_false_alarms / tally.comparisons, "days": DAYS}


def world():
    from evalhub.models import User
    from judges.configs.services import judge_config_save
    from judges.models import RubricEvent
    from labeling.models import Dataset, Rubric

    lead = User.objects.create_user(username="lena", password="x")
    reviewer = User.objects.create_user(username="rita", password="x")
    project = bench_project(leads=[lead], reviewers=[reviewer])
    dataset = Dataset.objects.create(project=project, slug="prod", name="Production")
    rubric = Rubric.objects.create(project=project, slug="ships", name="Ships?", criteria="Says when it ships.")
    config = judge_config_save(rubric=rubric, by=lead, spec={"layers": ["contract"],
                                                            "contract_checks": ["answer_present"]})
    RubricEvent.objects.create(rubric=rubric, kind=RubricEvent.Kind.PROMOTE, from_stage="draft", to_stage="observe",
                               config=config, reason="bench", by=lead)
    Rubric.objects.filter(pk=rubric.pk).update(stage=Rubric.Stage.OBSERVE)
    rubric.refresh_from_db()
    return project, dataset, rubric, lead, reviewer


def overhead(project, dataset, rubric, lead, per_day: int, ticks: int) -> dict:
    from judges.models import MonitorCase
    from judges.monitoring.services import monitor_create, monitor_tick
    from labeling.importing.cases import cases_import_objects

    monitor = monitor_create(project=project, slug="traffic", rubric=rubric, dataset=dataset, sample=0.05,
                             labels_per_window=150, expected_cases=per_day, by=lead)
    per_tick = max(1, round(per_day / 1440))
    ingest, tick = [], []
    for t in range(ticks):
        objects = [{"external_id": f"t{t}-{i}", "input": f"Where is order {t}-{i}?",
                    "output": f"Order {t}-{i} ships on day {i % 7}."} for i in range(per_tick)]
        started = time.perf_counter()
        cases_import_objects(dataset=dataset, objects=objects)
        ingest.append(time.perf_counter() - started)
        started = time.perf_counter()
        monitor_tick(monitor_id=monitor.pk)
        tick.append(time.perf_counter() - started)
    steady = {"cases_per_tick": per_tick, "ticks": ticks,
              "ingest_ms_per_case": 1000 * statistics.median(ingest) / per_tick,
              "tick_ms_per_case": 1000 * statistics.median(tick) / per_tick,
              "tick_ms_median": 1000 * statistics.median(tick)}
    steady["ratio_tick_to_ingest"] = steady["tick_ms_per_case"] / steady["ingest_ms_per_case"]
    # Catching up on a day at once: the day's cases written in bulk, then one tick.
    from django.utils import timezone

    from benchmarks._benchdb import bulk_cases
    bulk_cases(dataset, per_day, lambda i: f"q{i}", lambda i: f"Order {i} ships today.", created_at=timezone.now())
    started = time.perf_counter()
    while monitor_tick(monitor_id=monitor.pk):
        pass
    catch_up = time.perf_counter() - started
    sampled = MonitorCase.objects.filter(monitor=monitor, sampled=True).count()
    total = MonitorCase.objects.filter(monitor=monitor).count()
    return {**steady, "catch_up_cases": per_day, "catch_up_seconds": catch_up,
            "catch_up_us_per_case": 1e6 * catch_up / per_day, "sampled_share": sampled / total}


def page(project, dataset, rubric, lead, reviewer, windows: int, per_window: int) -> dict:
    from django.test import Client

    from judges.monitoring.services import monitor_create
    from tests.judges.monitoring.factories import fabricated_windows

    results = {}
    client = Client()
    client.force_login(lead)
    for count, slug in ((10, "ten"), (windows, "many")):
        monitor = monitor_create(project=project, slug=slug, rubric=rubric, dataset=dataset, sample=0.05,
                                 labels_per_window=150, expected_cases=per_window * 20, by=lead)
        started = time.perf_counter()
        fabricated_windows(monitor=monitor, reviewer=reviewer, days=count, cases_per_day=per_window,
                           rates=[0.8] * count, judge_pass=lambda ok: 0.95 if ok else 0.4, seed=count)
        print(f"  {count} windows of {per_window} cases written in {time.perf_counter() - started:.0f} s")
        monitor.baseline = [w.start.date().isoformat() for w in monitor.windows.order_by("start")[:7]]
        monitor.save(update_fields=["baseline"])
        settle_after_bulk_load()
        url = f"/p/{project.slug}/monitors/{slug}/"
        assert client.get(url).status_code == 200
        samples = timed(lambda url=url: client.get(url), 5)
        results[count] = statistics.median(samples)
    return {"windows": windows, "cases_per_window": per_window, "page_s_10_windows": results[10],
            f"page_s_{windows}_windows": results[windows], "ratio": results[windows] / results[10]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2000)
    parser.add_argument("--per-day", type=int, default=100_000)
    parser.add_argument("--ticks", type=int, default=20)
    parser.add_argument("--windows", type=int, default=90)
    parser.add_argument("--cases-per-window", type=int, default=5000)
    parser.add_argument("--skip-simulation", action="store_true")
    parser.add_argument("--database", default="evalhub_bench_monitoring")
    args = parser.parse_args()
    out: dict = {}
    env = {"DJANGO_ALLOWED_HOSTS": "testserver"}
    with bench_database(args.database, env=env):
        if not args.skip_simulation:
            out["simulation"] = simulation(args.repeats)
        project, dataset, rubric, lead, reviewer = world()
        out["overhead"] = overhead(project, dataset, rubric, lead, args.per_day, args.ticks)
        print(json.dumps(out["overhead"], indent=1))
        out["page"] = page(project, dataset, rubric, lead, reviewer, args.windows, args.cases_per_window)
        print(json.dumps(out["page"], indent=1))
        import redis
        from django.conf import settings
        redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()  # the runs' messages no worker took
    results = ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    (results / "bench_monitoring.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
