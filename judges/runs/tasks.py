"""Thin, idempotent tasks: ids in, claims through judges.runs.worker, results keyed by unique constraints."""

import logging
from collections.abc import Callable

from celery import shared_task
from celery.signals import worker_init, worker_ready

from judges.runs import services, worker

log = logging.getLogger(__name__)

# Called with the run's id each time a run's work ends (its last window, or a task that found nothing to
# claim), for the packages above runs in the stack, which runs may not import: judges/apps.py adds drift's
# recording of a finished drift run here. Each must be a no-op for a run that is not its own.
AFTER_RUN_WORK: list[Callable[..., object]] = []


# A window lasts EVALHUB_RUN_WINDOW_SECONDS plus the last calls' time; the limits leave room for slow calls.
@shared_task(name=services.RUN_WORK_TASK, acks_late=True, soft_time_limit=15 * 60, time_limit=16 * 60)
def run_work(run_id: int) -> None:
    """Work one window of the run under its lease, then queue the next window if work is left."""
    token = worker.run_claim(run_id=run_id)
    if token is not None:
        more = worker.run_window(run_id=run_id, token=token)
        log.info("run %s: window done, %s", run_id, "more to do" if more else "nothing more here")
        if more:
            run_work.delay(run_id)
            return
    for hook in AFTER_RUN_WORK:
        hook(run_id=run_id)


@shared_task(name="judges.sweep_runs", ignore_result=True)
def sweep_runs() -> list[int]:
    """Requeue runs whose lease ran out (a worker died) or whose message was lost; count the calls a worker killed
    after its run was cancelled never recorded."""
    worker.lost_leases_settle()
    run_ids = worker.runs_needing_work()
    for run_id in run_ids:
        run_work.delay(run_id)
    if run_ids:
        log.info("sweep requeued runs %s", run_ids)
    return run_ids


@worker_ready.connect
def sweep_when_a_worker_starts(sender, **kwargs) -> None:
    # A worker coming back is the moment to pick up what a killed one left.
    sender.app.send_task("judges.sweep_runs")


@worker_init.connect
def import_the_sdks_before_the_pool_forks(**kwargs) -> None:
    # The engine imports an SDK on first use, which takes seconds: done once here, in the worker's main
    # process before it forks its pool, no child spends them in the middle of a lead's run.
    import anthropic  # noqa: F401
    import openai  # noqa: F401
