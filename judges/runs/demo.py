"""The demo's judge run: a contract-only config and a finished run of it, made by the real machinery.

Contract checks need no provider, so a new user sees a real run (real engine, real judgments) without a
key. The run is judged here, synchronously, through the same services a worker calls.
"""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from judges.configs import services as config_services
from judges.models import JudgeConfig, Run, RunChunk
from judges.runs import services
from labeling.models import Dataset, Rubric

DEMO_NOTE = "demo: contract checks only, no model called"
# Two repeats, as promotion asks: contract checks are deterministic, so they never flip.
DEMO_REPEATS = 2
DEMO_CHECKS = [
    "answer_present",
    "expected_tool",
    "expected_tool_argument",
    "no_tool_when_none_expected",
    "expected_source",
]


def demo_run(*, rubric: Rubric, dataset: Dataset) -> Run | None:
    return (
        Run.objects.filter(config__rubric=rubric, config__note=DEMO_NOTE, dataset=dataset, parent__isnull=True)
        .order_by("-created_at")
        .first()
    )


def create_demo_run(*, rubric: Rubric, dataset: Dataset, by) -> Run:
    """The demo config of `rubric` and a finished run of it over `dataset`; the existing one if made before."""
    existing = demo_run(rubric=rubric, dataset=dataset)
    if existing is not None:
        return existing
    config = config_services.judge_config_save(
        rubric=rubric, spec={"layers": ["contract"], "contract_checks": DEMO_CHECKS}, by=by, note=DEMO_NOTE,
    )
    run = _create_run(config=config, dataset=dataset, by=by)
    # What a worker does, in this process: claim a chunk, judge it, until the claim marks the run finished.
    while (chunk := services.chunk_claim(run_id=run.pk)) is not None:
        services.chunk_judge(chunk=chunk)
    run.refresh_from_db()
    return run


def _create_run(*, config: JudgeConfig, dataset: Dataset, by) -> Run:
    """The run and its chunks as services.run_start makes them, minus queueing work for a worker.

    run_start queues a task on commit; load_demo may run before any worker or broker is up (and a
    Redis broker that is down would stall it), and this run is judged right here anyway.
    """
    with transaction.atomic():
        case_ids = list(dataset.cases.order_by("id").values_list("id", flat=True))
        if not case_ids:
            raise services.RunError(f"The dataset {dataset.slug} has no cases.")
        run = Run.objects.create(
            config=config, dataset=dataset, repeats=DEMO_REPEATS, concurrency=4, created_by=by,
            total=len(case_ids) * DEMO_REPEATS,
        )
        size = settings.EVALHUB_CHUNK_CASES
        RunChunk.objects.bulk_create(
            RunChunk(run=run, index=i, case_ids=case_ids[start : start + size])
            for i, start in enumerate(range(0, len(case_ids), size))
        )
    return run


def load_demo_run(*, dataset_slug: str, rubric_slug: str = "tool-use", by_username: str = "lena") -> Run:
    """load_demo's call: the demo run of the tool-use rubric on the demo dataset, by the demo lead."""
    return create_demo_run(
        rubric=Rubric.objects.get(slug=rubric_slug),
        dataset=Dataset.objects.get(slug=dataset_slug),
        by=get_user_model().objects.get(username=by_username),
    )
