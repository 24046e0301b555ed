"""The judge improvement job's task: thin, ids in; judges.proposals.services does the work."""

from celery import shared_task

from judges.proposals import services


# The editor's call is bounded by its timeout (at most 600 s, times its attempts); the runs are their own tasks.
@shared_task(name=services.PROPOSAL_TASK, acks_late=True, soft_time_limit=30 * 60, time_limit=31 * 60)
def proposal_work(proposal_id: int) -> None:
    services.proposal_propose(proposal_id=proposal_id)


@shared_task(name="judges.sweep_proposals", ignore_result=True)
def sweep_proposals() -> list[int]:
    """Requeue jobs whose message was lost; end those whose editor call a killed worker lost."""
    return services.proposals_sweep()
