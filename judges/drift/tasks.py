"""The drift check's periodic task (beat: evalhub.settings CELERY_BEAT_SCHEDULE, EVALHUB_DRIFT_INTERVAL_SECONDS)."""

import logging

from celery import shared_task

from judges.drift import services

log = logging.getLogger(__name__)

DRIFT_CHECK_TASK = "judges.drift_check"


@shared_task(name=DRIFT_CHECK_TASK, ignore_result=True, soft_time_limit=10 * 60, time_limit=11 * 60)
def drift_check(rubric_ids: list[int] | None = None) -> list[int]:
    """Record drift runs that finished unrecorded, then start one per promoted rubric (or those named);
    returns the drift runs started. Their work and recording go through the run tasks."""
    services.drift_record_finished()
    runs = [check.run_id for check in services.drift_start(rubric_ids=rubric_ids)]
    if runs:
        log.info("drift check started runs %s", runs)
    return runs
