"""The synthetic-cases task: thin, idempotent, queued on commit by services.synthesis_start."""

from celery import shared_task

from judges.synthetic import services


@shared_task(name=services.SYNTHESIS_TASK, ignore_result=True, soft_time_limit=15 * 60, time_limit=16 * 60)
def synthesize_cases(job_id: int) -> None:
    """Do the job's one editor call and write its cases; a job already taken or done is left alone."""
    services.synthesis_work(job_id=job_id)
