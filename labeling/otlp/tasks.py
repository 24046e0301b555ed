"""The OTLP receiver's periodic task (beat: evalhub.settings CELERY_BEAT_SCHEDULE, every
EVALHUB_OTLP_TRACE_WAIT_SECONDS): gives up traces whose root span did not come in time (docs/otlp.md)."""

import logging

from celery import shared_task

from labeling.otlp.services import otlp_give_up

log = logging.getLogger(__name__)

OTLP_GIVE_UP_TASK = "labeling.otlp_give_up"


@shared_task(name=OTLP_GIVE_UP_TASK, ignore_result=True, soft_time_limit=60, time_limit=90)
def give_up_waited_traces() -> int:
    """Idempotent: a trace already given up is left alone."""
    given_up = otlp_give_up()
    if given_up:
        log.info("gave up %s OTLP trace(s) that waited for their root span too long", given_up)
    return given_up
