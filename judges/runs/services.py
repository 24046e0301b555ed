"""Writes of runs: starting, cancelling and re-running them, and queueing their work (which the worker
does: judges.runs.worker)."""

import uuid
from decimal import Decimal

from celery import signature
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from judges.models import JudgeConfig, Run, RunChunk
from judges.runs.tallies import case_tallies_refresh
from labeling.models import Dataset

RUN_WORK_TASK = "judges.run_work"  # judges.runs.tasks.run_work


class RunError(Exception):
    """A run cannot be started or changed as asked; the message says why."""


UNFINISHED = (Run.Status.QUEUED, Run.Status.RUNNING)


def judged_case_ids(*, dataset: Dataset, only: list[int] | None = None) -> tuple[list[int], int]:
    """The ids of the dataset's cases a run judges, in order, and how many it leaves out for having no answer
    yet (output null: nothing to judge); RunError when none is left. Two queries. `only` narrows the run to
    those cases (a judge improvement's candidate judges one split: docs/improving.md)."""
    answered = dataset.cases.answered() if only is None else dataset.cases.answered().filter(id__in=only)
    case_ids = list(answered.order_by("id").values_list("id", flat=True))
    unanswered = dataset.cases.unanswered().count()
    if not case_ids and unanswered:
        raise RunError(f"The dataset {dataset.slug} has no answer to judge yet: its {unanswered} case(s) have none.")
    if not case_ids:
        raise RunError(f"The dataset {dataset.slug} has no cases.")
    return case_ids, unanswered


def run_start(
    *, config: JudgeConfig, dataset: Dataset, repeats: int, concurrency: int, spend_cap_usd: Decimal | None, by,
    start_token: uuid.UUID | None = None, fresh: bool = False, case_ids: list[int] | None = None,
) -> Run:
    """Create a run with its chunks and queue its work once the rows are committed. The config's rubric and the
    dataset must be of one project (RunError otherwise).

    A `fresh` run judges again, ignoring cached verdicts (docs/judging.md, "Fresh repeats"): its repeats are
    numbered from 1 like any run's, and its cache keys carry the run as a salt (judges.runs.worker.fresh_salt),
    so it reuses no cached verdict and overwrites none.

    A `start_token` (the start form's) that already started a run gives back that run, unchanged: a double
    click or a resubmitted form starts one run. Two requests at once meet at the token's unique constraint,
    where the second waits for the first to commit and then gives back the first's run.
    """
    if config.external:
        raise RunError("An imported (external) config holds verdicts of another tool; it cannot run.")
    if config.rubric.project_id != dataset.project_id:
        # A rubric judges its own project's datasets only (docs/projects.md); named by the config the caller holds.
        raise RunError(f"The judge config {config.rubric.slug} v{config.version} cannot run on the dataset "
                       f"{dataset.slug}: its rubric belongs to another project, and a rubric judges only its own "
                       "project's datasets.")
    if not 1 <= repeats <= 20:
        raise RunError("Repeats must be between 1 and 20.")
    if not 1 <= concurrency <= 64:
        raise RunError("Concurrency must be between 1 and 64.")
    if start_token is not None and (started := Run.objects.filter(start_token=start_token).first()) is not None:
        return started
    try:
        with transaction.atomic():
            case_ids, unanswered = judged_case_ids(dataset=dataset, only=case_ids)
            run = Run.objects.create(
                config=config, dataset=dataset, repeats=repeats, concurrency=concurrency,
                spend_cap_usd=spend_cap_usd, created_by=by, total=len(case_ids) * repeats, start_token=start_token,
                unanswered=unanswered, fresh=fresh,
            )
            size = settings.EVALHUB_CHUNK_CASES
            RunChunk.objects.bulk_create(
                RunChunk(run=run, index=i, case_ids=case_ids[start : start + size])
                for i, start in enumerate(range(0, len(case_ids), size))
            )
            queue_run_work(run.pk)
    except IntegrityError:
        started = Run.objects.filter(start_token=start_token).first() if start_token is not None else None
        if started is None:
            raise
        return started
    return run


def run_cancel(*, run: Run) -> None:
    """Stop a run. The task at work on it sees this at its next heartbeat (about a second): no new call
    starts, the calls in flight finish and are recorded."""
    Run.objects.filter(pk=run.pk, status__in=UNFINISHED).update(
        status=Run.Status.CANCELLED, finished_at=timezone.now()
    )


def run_retry_not_evaluated(*, run: Run) -> int:
    """Judge again only a finished or cancelled run's not-evaluated judgments; returns how many.

    Their rows go (tokens and cost already spent stay counted) and the chunks holding their cases
    are to do again.
    """
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.source == Run.Source.CI:
            raise RunError("A CI run holds the verdicts CI posted; it has nothing to re-run here.")
        if run.status not in {Run.Status.FINISHED, Run.Status.CANCELLED}:
            raise RunError("Only a finished or cancelled run can re-run its not-evaluated judgments.")
        retry = run.judgments.filter(outcome="not_evaluated")
        case_ids = set(retry.values_list("case_id", flat=True))
        count = retry.count()
        retry.delete()
        case_tallies_refresh(run_id=run.pk, case_ids=case_ids)
        chunk_ids = [c.pk for c in run.chunks.all() if case_ids.intersection(c.case_ids)]
        RunChunk.objects.filter(pk__in=chunk_ids).update(done_at=None)
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.QUEUED, finished_at=None, done=F("done") - count,
            not_evaluated=F("not_evaluated") - count,
        )
        queue_run_work(run.pk)
    return count


def queue_run_work(run_id: int) -> None:
    """Queue the run's work once the transaction commits (by task name: tasks import this module)."""
    transaction.on_commit(lambda: signature(RUN_WORK_TASK, args=(run_id,)).delay())
