"""A monitored project: a rubric at observe whose CI judge is the stand-in provider, and a traffic dataset."""

from judges.configs.services import judge_config_save
from judges.models import RubricEvent
from labeling.importing.cases import cases_import_objects
from labeling.models import Dataset, Rubric

MODEL = "gpt-4o-mini-2024-07-18"
SPEC = {"layers": ["behavioral"], "provider": "openai", "model": MODEL, "base_url_env": "EVALHUB_JUDGE_OPENAI_URL",
        "api_key_env": "EVALHUB_JUDGE_API_KEY", "timeout_s": 5}


def observed(*, project, lead, slug="prod", **spec):
    """(dataset, rubric, config): the rubric at observe with the stand-in judge named for CI."""
    dataset = Dataset.objects.create(project=project, slug=slug, name="Production traffic")
    rubric = Rubric.objects.create(project=project, slug=f"{slug}-ships", name="Does it say when it ships?",
                                   criteria="Pass when the answer says when the order ships.")
    config = judge_config_save(rubric=rubric, by=lead, spec={**SPEC, **spec})
    RubricEvent.objects.create(rubric=rubric, kind=RubricEvent.Kind.PROMOTE, from_stage="draft", to_stage="observe",
                               config=config, reason="watch production", by=lead)
    Rubric.objects.filter(pk=rubric.pk).update(stage=Rubric.Stage.OBSERVE)
    rubric.refresh_from_db()
    return dataset, rubric, config


def ingest(dataset, prefix: str, count: int, *, ships=lambda i: i % 5 != 0) -> None:
    """`count` new cases; the stand-in (rule answer_contains "ships") passes those with `ships(i)`."""
    cases_import_objects(dataset=dataset, objects=[
        {"external_id": f"{prefix}{i:05}", "input": "Where is my order?",
         "output": f"Your order {prefix}{i} ships today." if ships(i) else f"Order {prefix}{i} is somewhere."}
        for i in range(count)
    ])


def fabricated_windows(*, monitor, reviewer, days: int, cases_per_day: int, rates, judge_pass, seed: int = 1,
                       labeled_share: float = 1.0, start=None):
    """`days` closed daily windows of judged traffic written directly (no provider): per day d, `cases_per_day`
    judged cases whose true verdict passes with rates[d] and whose judge verdict passes with judge_pass(true)
    probability; the audit sample drawn with the window's probability and `labeled_share` of it labeled by
    `reviewer`. For page tests and the benchmark: the figures' code path is the page's own."""
    from datetime import UTC, datetime, timedelta

    import numpy as np

    from judges.models import Judgment, MonitorCase, MonitorDay, MonitorWindow, Run
    from labeling.models import Case, Label

    rng = np.random.default_rng(seed)
    config = monitor.rubric.judge_configs.order_by("-version").first()
    start = start or datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=days)
    for d in range(days):
        day_start = start + timedelta(days=d)
        probability = min(1.0, monitor.labels_per_window / cases_per_day)  # every case here is a judged one
        window = MonitorWindow.objects.create(monitor=monitor, start=day_start, end=day_start + timedelta(days=1),
                                              expected_cases=cases_per_day, audit_probability=probability,
                                              traffic=int(cases_per_day / monitor.sample))
        run = Run.objects.create(config=config, dataset=monitor.dataset, status=Run.Status.FINISHED,
                                 created_by=monitor.created_by, source=Run.Source.MONITOR, total=cases_per_day,
                                 done=cases_per_day, cost_usd=cases_per_day * 0.0004)
        day = MonitorDay.objects.create(monitor=monitor, day=day_start.date(), run=run)
        truth = rng.random(cases_per_day) < rates[d]
        judge = rng.random(cases_per_day) < np.where(truth, judge_pass(True), judge_pass(False))
        audited = rng.random(cases_per_day) < probability
        labeled = audited & (rng.random(cases_per_day) < labeled_share)
        cases = Case.objects.bulk_create([
            Case(dataset=monitor.dataset, external_id=f"w{seed}-{d}-{i}", input="q", output=f"a{d}-{i}",
                 split="dev", content_hash=f"h{seed}-{d}-{i}", created_at=day_start + timedelta(seconds=i))
            for i in range(cases_per_day)
        ], batch_size=2000)
        Judgment.objects.bulk_create([
            Judgment(run=run, case=case, repeat=1, outcome="pass" if judge[i] else "fail", layer="behavioral")
            for i, case in enumerate(cases)
        ], batch_size=2000)
        MonitorCase.objects.bulk_create([
            MonitorCase(monitor=monitor, window=window, case=case, arrived_at=case.created_at, draw=0.0,
                        sample=monitor.sample, sampled=True, audited=bool(audited[i]),
                        audit_probability=probability, day=day)
            for i, case in enumerate(cases)
        ], batch_size=2000)
        Label.objects.bulk_create([
            Label(case=case, rubric=monitor.rubric, reviewer=reviewer, verdict="pass" if truth[i] else "fail",
                  content_hash=case.content_hash)
            for i, case in enumerate(cases) if labeled[i]
        ], batch_size=2000)
