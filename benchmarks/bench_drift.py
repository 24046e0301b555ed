"""The drift check over a promoted rubric with 20,000 cases of which 500 are new, in PostgreSQL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalhub python benchmarks/bench_drift.py [--cases N] [--new N]

It uses a database of its own on DATABASE_URL's server (`evalhub_bench_drift` unless --database says
otherwise), created, migrated and dropped at the end (--keep keeps it). The data, written with bulk_create:
cases − new old cases, each labelled, judged by a finished evidence run of a behavioral config (the
stand-in provider, judges.testing.fake_provider, answering in --latency-ms) whose judgments sit in the
app's cache as a real run leaves them; the rubric promoted on it. Then `new` cases arrive with human
verdicts. The drift check is then timed end to end in this process exactly as a worker does it:
`drift_start`, the run's windows worked (`run_work_here`: its chunks read, judged through the engine's
batch and recorded) until none is left, and `drift_check_record`. It reports the calls made (expected:
new cases × repeats; the stand-in's own count too), the cache hits, the figures on new and all cases, the
reasons for recalibration, the wall time of each step, and the promotion page with its drift chart
afterwards. Then its peer: the same number of judge calls alone (the new cases' prompts through the
same SDK client at the same concurrency, no engine, no database), and the target: the check's total at
most 1.5× that plus 3 s (the drift run's part of the check: its fresh sample is timed apart). The stand-in's
CPU time is printed beside each (it shares the two cores).

The fresh sample (docs/promotion.md, "Fresh drift sample") is on, at --fresh-share (default 0.05, as
EVALHUB_DRIFT_FRESH_SHARE): its fresh run re-judges that share of the unchanged cases anew, timed apart and
compared with its ideal (its calls × the latency / the concurrency); 0 turns it off.
Figures are printed and written to benchmarks/results/bench_drift.json.
"""

import argparse
import json
import os
import resource
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._benchdb import (  # noqa: E402  (after ROOT is on the path)
    bench_database,
    bench_project,
    settle_after_bulk_load,
)
from benchmarks.bench_semantic import cpu_seconds  # noqa: E402
from judges.testing.fake_provider import FakeProvider  # noqa: E402

MODEL = "gpt-4o-mini-2024-07-18"


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=20_000)
    parser.add_argument("--new", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency-ms", type=int, default=50, help="the stand-in's answer time")
    parser.add_argument("--database", default="evalhub_bench_drift")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--fresh-share", type=float, default=0.05, help="EVALHUB_DRIFT_FRESH_SHARE (0: no sample)")
    return parser.parse_args()


def answer(i: int) -> str:
    # The stand-in's rule passes an answer containing "ships"; every 10th answer does not.
    return f"Order {i} is lost, sorry." if i % 10 == 0 else f"Your order {i} ships today from the warehouse."


def add_cases(dataset, rubric, reviewer, ids: range, prefix: str, *, created, disagree: int) -> list:
    from labeling.models import Case, Label, case_split, labeled_content_hash

    cases = []
    for i in ids:
        eid, question = f"{prefix}{i:06}", f"Where is order {i}?"
        cases.append(Case(dataset=dataset, external_id=eid, input=question, output=answer(i), split=case_split(eid),
                          content_hash=labeled_content_hash(input=question, output=answer(i), trace={}),
                          created_at=created, content_changed_at=created))
    cases = Case.objects.bulk_create(cases, batch_size=5_000)
    # Humans agree with the stand-in except on every `disagree`-th case.
    Label.objects.bulk_create(
        (Label(case=c, rubric=rubric, reviewer=reviewer, content_hash=c.content_hash, created_at=created,
               updated_at=created, verdict=("pass" if "ships" in c.output else "fail") if i % disagree else
               ("fail" if "ships" in c.output else "pass"))
         for i, c in zip(ids, cases, strict=True)),
        batch_size=5_000,
    )
    return cases


def build(args, fake):
    """Old cases, their evidence run and its cache, the promotion; returns (rubric, evidence run, lead)."""
    from django.utils import timezone

    from evalhub.models import User
    from judges.configs import services as config_services
    from judges.configs.cases import engine_case
    from judges.engine import Judgment as EngineJudgment
    from judges.engine import cache_key
    from judges.models import CachedJudgment, Judgment, RubricEvent, Run
    from labeling.models import Dataset, Rubric

    lead = User.objects.create_user("lead", password="x")
    reviewer = User.objects.create_user("reviewer", password="x")
    project = bench_project("bench-drift", leads=[lead], reviewers=[reviewer])
    dataset = Dataset.objects.create(project=project, slug="support", name="Support")
    rubric = Rubric.objects.create(project=project, slug="return-policy", name="Follows the policy?",
                                   criteria="The return policy.")
    config = config_services.judge_config_save(rubric=rubric, by=lead, spec={
        "layers": ["behavioral"], "provider": "openai", "model": MODEL, "base_url_env": "EVALHUB_JUDGE_BENCH_URL",
        "api_key_env": "EVALHUB_JUDGE_BENCH_KEY", "timeout_s": 10,
    })
    old_at = timezone.now() - timedelta(days=2)
    old = add_cases(dataset, rubric, reviewer, range(args.cases - args.new), "old", created=old_at, disagree=50)
    finished = old_at + timedelta(hours=1)
    evidence = Run.objects.create(
        config=config, dataset=dataset, repeats=args.repeats, concurrency=args.concurrency, created_by=lead,
        status=Run.Status.FINISHED, created_at=old_at, started_at=old_at, finished_at=finished,
        total=len(old) * args.repeats, done=len(old) * args.repeats,
    )
    judgments, cached = [], []
    for case in old:
        outcome = "pass" if "ships" in case.output else "fail"
        for repeat in range(1, args.repeats + 1):
            judgments.append(Judgment(run=evidence, case=case, repeat=repeat, outcome=outcome, layer="behavioral"))
            done = EngineJudgment(external_id=case.external_id, repeat=repeat, outcome=outcome, layer="behavioral",
                                  reason="scripted stand-in, not a model", provider_calls=1, model=MODEL)
            cached.append(CachedJudgment(project=project, key=cache_key(engine_case(case), config.config_hash, repeat),
                                         judgment=done.to_dict()))
    Judgment.objects.bulk_create(judgments, batch_size=10_000)
    CachedJudgment.objects.bulk_create(cached, batch_size=10_000)
    rubric.stage = Rubric.Stage.OBSERVE
    rubric.save(update_fields=["stage"])
    RubricEvent.objects.create(rubric=rubric, kind=RubricEvent.Kind.PROMOTE, from_stage="draft", to_stage="observe",
                               run=evidence, figures={}, reason="Benchmark evidence.", by=lead, at=finished)
    # The new cases: ingested and labelled after the evidence run finished; the judge has drifted on them
    # (humans disagree with it on every third), so the check finds agreement below the floor.
    add_cases(dataset, rubric, reviewer, range(args.cases - args.new, args.cases), "new", created=timezone.now(),
              disagree=3)
    return rubric, evidence, lead


def calls_alone(rubric, args, env: dict, fake) -> tuple[float, float]:
    """Wall time of the check's judge calls made with no engine and no database: each new case's prompt,
    `repeats` times, through the same SDK client at the same concurrency; and the stand-in's CPU time."""
    from concurrent.futures import ThreadPoolExecutor

    from judges.configs.cases import engine_case
    from judges.engine import JudgeConfig
    from judges.engine.prompt import build_messages
    from judges.engine.providers import ClientPool, call_model, resolve_endpoint
    from labeling.models import Case

    cfg = JudgeConfig.from_dict(rubric.judge_configs.order_by("-version").first().spec)
    endpoint = resolve_endpoint(provider=cfg.provider, base_url_env=cfg.base_url_env, api_key_env=cfg.api_key_env,
                                env=env, timeout_s=30)
    prompts = [build_messages(engine_case(c), template=cfg.prompt_template, criteria=cfg.criteria, policy=cfg.policy,
                              output_kind=cfg.output_kind)
               for c in Case.objects.filter(external_id__startswith="new")] * args.repeats
    clients = ClientPool()
    client = clients.get(endpoint)
    cpu = cpu_seconds(fake.proc.pid)
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        list(pool.map(lambda p: call_model(client, endpoint, model=cfg.model, system=p[0], user=p[1],
                                           output_kind=cfg.output_kind, params=cfg.params), prompts))
    wall = time.perf_counter() - started
    clients.close()
    return wall, cpu_seconds(fake.proc.pid) - cpu


def main() -> None:
    args = arguments()
    with FakeProvider() as fake:
        env = {"EVALHUB_JUDGE_BENCH_URL": fake.openai_base_url, "EVALHUB_JUDGE_BENCH_KEY": "sk-bench",
               "EVALHUB_JUDGE_ENV_ALLOW": "", "EVALHUB_CHUNK_CASES": os.environ.get("EVALHUB_CHUNK_CASES", "500"),
               "EVALHUB_DRIFT_FRESH_SHARE": str(args.fresh_share)}
        with bench_database(args.database, keep=args.keep, env=env):
            from django.test import Client
            from django.test.utils import setup_test_environment
            from django.urls import reverse

            from judges.drift import services as drift_services
            from judges.drift.services import drift_check_record, drift_start
            from judges.models import Run
            from judges.promotion.selectors import promotion_rows
            from judges.runs.worker import run_work_here

            fake.control(latency_ms=args.latency_ms, rule={"kind": "answer_contains", "text": "ships"})
            started = time.perf_counter()
            rubric, evidence, lead = build(args, fake)
            settle_after_bulk_load()
            print(f"  built {args.cases:,} cases ({args.new:,} new) × {args.repeats} repeats "
                  f"in {time.perf_counter() - started:.1f} s")
            before = fake.stats()["total"]

            timings = {}
            t0 = time.perf_counter()
            # Nothing goes to a broker: the work is done here, as a worker does it.
            drift_services.queue_run_work = lambda run_id: None
            [check] = drift_start(rubric_ids=[rubric.pk], by=lead)
            timings["start_s"] = time.perf_counter() - t0
            t1 = time.perf_counter()
            stand_in_cpu = cpu_seconds(fake.proc.pid)
            run_work_here(run_id=check.run_id)
            timings["judge_s"] = time.perf_counter() - t1
            stand_in_cpu = cpu_seconds(fake.proc.pid) - stand_in_cpu
            drift_calls = fake.stats()["total"] - before
            timings["fresh_judge_s"] = 0.0
            if check.fresh_run_id is not None:
                t1 = time.perf_counter()
                run_work_here(run_id=check.fresh_run_id)
                timings["fresh_judge_s"] = time.perf_counter() - t1
            t2 = time.perf_counter()
            check = drift_check_record(run_id=check.fresh_run_id or check.run_id)
            timings["record_s"] = time.perf_counter() - t2
            timings["total_s"] = time.perf_counter() - t0
            # The check without its fresh sample: what its calls alone are the peer of.
            timings["drift_s"] = timings["total_s"] - timings["fresh_judge_s"]
            run = Run.objects.get(pk=check.run_id)
            fresh = Run.objects.get(pk=check.fresh_run_id) if check.fresh_run_id else None
            calls = fake.stats()["total"] - before
            alone_s, alone_cpu = calls_alone(rubric, args, env, fake)
            target_s = 1.5 * alone_s + 3
            fresh_calls = fresh.provider_calls if fresh else 0
            # The fresh run's ideal: its calls in rounds of the concurrency at the stand-in's latency.
            fresh_ideal = fresh_calls * args.latency_ms / 1000 / args.concurrency
            [row] = promotion_rows(rubrics=[rubric])

            setup_test_environment()
            client = Client()
            client.force_login(lead)
            url = reverse("judges:promotion_rubric", args=[rubric.project.slug, rubric.slug])
            page = []
            for _ in range(5):
                p0 = time.perf_counter()
                assert client.get(url).status_code == 200
                page.append(time.perf_counter() - p0)

            result = {
                "cases": args.cases, "new": args.new, "repeats": args.repeats, "concurrency": args.concurrency,
                "latency_ms": args.latency_ms,
                "expected_calls": args.new * args.repeats, "provider_calls": run.provider_calls,
                "stand_in_requests": calls, "cache_hits": run.cache_hits,
                "fresh_share": args.fresh_share, "fresh_cases": fresh.total // args.repeats if fresh else 0,
                "fresh_calls": fresh_calls, "fresh_cache_hits": fresh.cache_hits if fresh else 0,
                "fresh_ideal_s": round(fresh_ideal, 2),
                "fresh_vs_ideal": round(timings["fresh_judge_s"] / fresh_ideal, 2) if fresh_ideal else None,
                "fresh_vs_drift_run": round(timings["fresh_judge_s"] / timings["judge_s"], 2),
                "fresh_n": check.fresh_n, "fresh_changed": check.fresh_changed, "fresh_ci95": check.fresh_ci95,
                "load_average": [round(x, 1) for x in os.getloadavg()],
                **{k: round(v, 2) for k, v in timings.items()},
                "new_n": check.new_n, "new_agreement": check.new_agreement, "new_ci95": check.new_ci95,
                "all_n": check.all_n, "all_agreement": check.all_agreement,
                "recalibration": row.recalibration,
                "promotion_page_median_s": round(sorted(page)[len(page) // 2], 3),
                "calls_alone_s": round(alone_s, 2), "stand_in_cpu_s": round(stand_in_cpu, 2),
                "calls_alone_stand_in_cpu_s": round(alone_cpu, 2),
                "target_s": round(target_s, 2), "drift_vs_calls_alone": round(timings["drift_s"] / alone_s, 2),
                "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            }
            print(json.dumps(result, indent=2))
            print(f"  drift check {timings['drift_s']:.2f} s without its fresh sample (stand-in CPU {stand_in_cpu:.2f} s) "
                  f"against its {drift_calls:,} calls alone {alone_s:.2f} s (stand-in CPU {alone_cpu:.2f} s): "
                  f"{timings['drift_s'] / alone_s:.2f}× the calls alone; target ≤ 1.5 × {alone_s:.2f} + 3 = "
                  f"{target_s:.2f} s: {'met' if timings['drift_s'] <= target_s else 'NOT met'}")
            if fresh_ideal:
                print(f"  fresh sample {timings['fresh_judge_s']:.2f} s for {fresh_calls:,} calls: "
                      f"{timings['fresh_judge_s'] / fresh_ideal:.2f}× its ideal {fresh_ideal:.2f} s")
            out = ROOT / "benchmarks" / "results" / "bench_drift.json"
            out.parent.mkdir(exist_ok=True)
            out.write_text(json.dumps(result, indent=2) + "\n")
            assert run.provider_calls == drift_calls == args.new * args.repeats, "drift calls ≠ new cases × repeats"
            assert calls == drift_calls + fresh_calls, "the stand-in counted other calls than the two runs'"


if __name__ == "__main__":
    main()
