"""The demo's judge runs: a contract-only config and a semantic one, each with a finished run, made by the
real machinery.

Contract checks need no provider, so a new user sees a real run (real engine, real judgments) without a
key. The semantic run is judged through the scripted stand-in (judges.testing.fake_provider, started
here for the run and stopped after): its embeddings are a hashed bag of words and its judge a rule,
not models, and the config's model names say so. The runs are judged here, synchronously, through the
same services a worker calls.
"""

import os
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from judges.configs import services as config_services
from judges.models import JudgeConfig, Run, RunChunk
from judges.runs import services
from judges.testing.fake_provider import FakeProvider
from labeling.models import Dataset, Rubric

DEMO_NOTE = "demo: contract checks only, no model called"
SEMANTIC_DEMO_NOTE = "demo: semantic layer and judge through the scripted stand-in (not models)"
# The variables the semantic demo config names; set them to a running stand-in to run it again.
DEMO_URL_ENV, DEMO_KEY_ENV = "EVALHUB_JUDGE_DEMO_URL", "EVALHUB_JUDGE_DEMO_KEY"
SEMANTIC_DEMO_SPEC = {
    "layers": ["semantic", "behavioral"],
    "semantic": {
        "provider": "openai-compatible", "model": "stand-in-embeddings", "model_family": "stand-in",
        "base_url_env": DEMO_URL_ENV, "api_key_env": DEMO_KEY_ENV, "pass_at": 0.6, "fail_below": 0.2,
    },
    "provider": "openai-compatible", "model": "stand-in-judge", "model_family": "stand-in",
    "base_url_env": DEMO_URL_ENV, "api_key_env": DEMO_KEY_ENV, "params": {"temperature": 0, "max_tokens": 300},
    "timeout_s": 10, "max_attempts": 2,
}
# The stand-in judge's rule for the cases between the thresholds: most of the golden answer's words present.
SEMANTIC_DEMO_RULE = {"kind": "golden_overlap", "min": 0.5}
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
    return _judge_here(_create_run(config=config, dataset=dataset, by=by))


def _judge_here(run: Run) -> Run:
    # What a worker does, in this process, window after window until the run is finished.
    services.run_work_here(run_id=run.pk)
    run.refresh_from_db()
    return run


@contextmanager
def _stand_in() -> Iterator[None]:
    """The scripted stand-in running, and the demo config's variables naming it, for the block's length."""
    saved = {name: os.environ.get(name) for name in (DEMO_URL_ENV, DEMO_KEY_ENV)}
    with FakeProvider() as fake:
        fake.control(rule=SEMANTIC_DEMO_RULE)
        os.environ[DEMO_URL_ENV], os.environ[DEMO_KEY_ENV] = fake.openai_base_url, "stand-in-needs-no-key"
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def semantic_demo_run(*, rubric: Rubric, dataset: Dataset) -> Run | None:
    return (
        Run.objects.filter(config__rubric=rubric, config__note=SEMANTIC_DEMO_NOTE, dataset=dataset,
                           parent__isnull=True)
        .order_by("-created_at")
        .first()
    )


def create_semantic_demo_run(*, rubric: Rubric, dataset: Dataset, by) -> Run:
    """A semantic config of `rubric` (embeddings, then a judge between the thresholds) and a finished run of
    it over `dataset`, through the stand-in; the existing one if made before. The threshold explorer of
    its report has similarities to replay."""
    existing = semantic_demo_run(rubric=rubric, dataset=dataset)
    if existing is not None:
        return existing
    config = config_services.judge_config_save(rubric=rubric, spec=SEMANTIC_DEMO_SPEC, by=by,
                                               note=SEMANTIC_DEMO_NOTE)
    with _stand_in():
        return _judge_here(_create_run(config=config, dataset=dataset, by=by))


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


def load_semantic_demo_run(*, dataset_slug: str, rubric_slug: str = "return-policy", by_username: str = "lena") -> Run:
    """load_demo's call: the semantic demo run of the return-policy rubric on the demo dataset."""
    return create_semantic_demo_run(
        rubric=Rubric.objects.get(slug=rubric_slug),
        dataset=Dataset.objects.get(slug=dataset_slug),
        by=get_user_model().objects.get(username=by_username),
    )
