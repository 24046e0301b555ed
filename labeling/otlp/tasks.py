"""The OTLP receiver's periodic task (beat: evalhub.settings CELERY_BEAT_SCHEDULE, every
EVALHUB_OTLP_TRACE_WAIT_SECONDS, expiring unrun after one period): gives up traces whose root span did not come in
time (docs/otlp.md), a bounded batch a transaction, for at most GIVE_UP_BUDGET_SECONDS, and never two at once."""

import logging

from celery import shared_task

from labeling.otlp.services import GIVE_UP_BUDGET_SECONDS, otlp_give_up

log = logging.getLogger(__name__)

OTLP_GIVE_UP_TASK = "labeling.otlp_give_up"


@shared_task(name=OTLP_GIVE_UP_TASK, ignore_result=True, soft_time_limit=GIVE_UP_BUDGET_SECONDS + 20,
             time_limit=GIVE_UP_BUDGET_SECONDS + 50)
def give_up_waited_traces() -> int:
    """Idempotent: a trace already given up is left alone. One line of log a run, whatever it gave up."""
    given_up = otlp_give_up()
    if given_up is None:
        log.info("OTLP give-up skipped: the previous run still works")
        return 0
    if given_up:
        log.info("gave up %s OTLP trace(s) that waited for their root span too long", given_up)
    return given_up
