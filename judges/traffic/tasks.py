"""Traffic judging's periodic task (beat: evalhub.settings CELERY_BEAT_SCHEDULE, EVALHUB_TRAFFIC_INTERVAL_SECONDS)."""

import logging

from celery import shared_task

from judges.traffic import services

log = logging.getLogger(__name__)

TRAFFIC_TASK = "judges.traffic_judge"


@shared_task(name=TRAFFIC_TASK, ignore_result=True, soft_time_limit=5 * 60, time_limit=6 * 60)
def traffic_judge() -> list[int]:
    """Start a traffic run for each pair with new cases; their work goes through the run tasks."""
    runs = [run.pk for run in services.traffic_runs_start()]
    if runs:
        log.info("traffic judging started runs %s", runs)
    return runs
