"""Traffic judging (docs/gate.md, "Traffic without CI"): cases that reach a dataset without CI (the ingest
API, imports) are judged by the periodic task, for each (rubric, dataset) pair a lead turned on, with the
config the gate config gives the rubric, as a traffic run: the same rows and worker path as any run."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from judges.drift.selectors import ci_events
from judges.models import RubricEvent, Run, RunChunk, TrafficJudging
from judges.runs.services import UNFINISHED, queue_run_work
from labeling.models import Dataset, Rubric

TRAFFIC_REPEATS = 1


class TrafficRefused(ValueError):
    """A traffic judging change that cannot be made; the message says why."""


def traffic_judging_set(*, rubric: Rubric, dataset: Dataset, enabled: bool, reason: str, by) -> TrafficJudging:
    """Turn traffic judging of `dataset` for `rubric` on or off, audited in the rubric's log.

    Turned on, it judges the cases that arrive from then on (the dataset's existing cases are not judged
    again: a run of the lead's covers them). Turning on again what is on changes nothing and logs nothing.
    TrafficRefused for a dataset of another project than the rubric's (docs/projects.md), or a `by` who does not
    lead the rubric's project.
    """
    if dataset.project_id != rubric.project_id:
        raise TrafficRefused(f"Traffic judging pairs {rubric.slug} with a dataset of its own project only.")
    if by is None or not by.leads(rubric.project_id):
        raise TrafficRefused(f"Only a lead of {rubric.slug}'s project may turn its traffic judging on or off.")
    with transaction.atomic():
        Rubric.objects.select_for_update().only("pk").get(pk=rubric.pk)
        pair = TrafficJudging.objects.filter(rubric=rubric, dataset=dataset).first()
        was = bool(pair and pair.enabled)
        if was == enabled:
            return pair if pair is not None else TrafficJudging(rubric=rubric, dataset=dataset, enabled=False,
                                                                 changed_by=by)
        now = timezone.now()
        if pair is None:
            pair = TrafficJudging(rubric=rubric, dataset=dataset)
        if enabled:
            pair.last_case_id = dataset.cases.order_by("-id").values_list("id", flat=True).first() or 0
        pair.enabled, pair.changed_by, pair.changed_at = enabled, by, now
        pair.save()
        RubricEvent.objects.create(
            rubric=rubric, kind=RubricEvent.Kind.TRAFFIC, from_stage=rubric.stage, to_stage=rubric.stage,
            changes={f"traffic judging of {dataset.slug}": [was, enabled]}, reason=reason, by=by, at=now,
        )
    return pair


def traffic_runs_start() -> list[Run]:
    """A traffic run per pair that is on, whose rubric is at observe or above, with cases created since
    its last one and no traffic run of it still at work; returns the runs started. Each pair is its own
    transaction, its row locked, so two ticks of the schedule cannot both take the same cases."""
    configs = {event.rubric_id: event.ci_config for event in ci_events()}
    started = []
    # A pair across projects (which traffic_judging_set refuses) is never judged: a rubric judges its own project's
    # datasets only.
    pairs = TrafficJudging.objects.filter(enabled=True, dataset__project_id=F("rubric__project_id"))
    for pair_id, rubric_id in pairs.values_list("pk", "rubric_id"):
        config = configs.get(rubric_id)
        if config is None or config.external:
            continue  # a draft rubric (or one with no judge CI could use) has nothing to judge traffic with
        with transaction.atomic():
            pair = TrafficJudging.objects.select_for_update().get(pk=pair_id)
            if not pair.enabled or Run.objects.filter(
                source=Run.Source.TRAFFIC, config__rubric_id=rubric_id, dataset_id=pair.dataset_id,
                status__in=UNFINISHED,
            ).exists():
                continue
            arrived = Dataset.objects.get(pk=pair.dataset_id).cases.filter(pk__gt=pair.last_case_id)
            case_ids = list(arrived.answered().order_by("id").values_list("id", flat=True))
            newest = arrived.order_by("-id").values_list("id", flat=True).first()
            if newest is None:
                continue
            if not case_ids:  # only cases with no answer yet arrived: nothing to judge, and none to look at again
                TrafficJudging.objects.filter(pk=pair.pk).update(last_case_id=newest)
                continue
            run = Run.objects.create(
                config=config, dataset_id=pair.dataset_id, repeats=TRAFFIC_REPEATS, created_by=pair.changed_by,
                total=len(case_ids) * TRAFFIC_REPEATS, source=Run.Source.TRAFFIC,
                unanswered=arrived.filter(pk__lte=newest).unanswered().count(),
            )
            size = settings.EVALHUB_CHUNK_CASES
            RunChunk.objects.bulk_create(
                RunChunk(run=run, index=i, case_ids=case_ids[start : start + size])
                for i, start in enumerate(range(0, len(case_ids), size))
            )
            TrafficJudging.objects.filter(pk=pair.pk).update(last_case_id=newest)
            queue_run_work(run.pk)
        started.append(run)
    return started
