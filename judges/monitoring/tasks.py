"""Monitoring's periodic tasks (beat: evalhub.settings CELERY_BEAT_SCHEDULE): the tick that hands new cases to the
judge (every EVALHUB_MONITOR_INTERVAL_SECONDS: a case is handed to the judge within that of its arrival, and judged
as fast as the provider answers under the monitor's concurrency cap), and the messages' delivery."""

import logging

from celery import shared_task

from judges.monitoring import delivery, services

log = logging.getLogger(__name__)

MONITOR_TICK_TASK = "judges.monitor_tick"


@shared_task(name=MONITOR_TICK_TASK, ignore_result=True, soft_time_limit=4 * 60, time_limit=5 * 60)
def monitor_tick() -> list[int]:
    return services.monitors_tick()


@shared_task(name=delivery.DELIVER_TASK, ignore_result=True, soft_time_limit=4 * 60, time_limit=5 * 60)
def deliver_due() -> int:
    """Send every delivery that is due (beat calls this each tick too, for the retries)."""
    ids = delivery.deliveries_due()
    for delivery_id in ids:
        delivery.delivery_attempt(delivery_id=delivery_id)
    return len(ids)
