"""Writes of the drift check (docs/promotion.md, "Drift on new cases"): starting drift runs, recording their figures.

A drift run is a Run of the evidence run's config over the dataset's current cases, with the evidence run
as `parent` and no `probe`, and a DriftCheck row naming it. Its work goes through the ordinary run
machinery (judges.runs.worker), so the cache makes unchanged cases free: only new or changed cases cost
calls. When it finishes, `drift_check_record` stores its figures over every case with a human verdict
and over the new ones (judges.drift.selectors.drift_frames).

Beside it, each check starts a fresh run over a rotating sample of the unchanged cases (`fresh_sample_ids`): the
cache would replay their verdicts forever, so only a fresh run sees a model changed behind its pinned name. The
check is recorded once both runs are done, with the fresh sample's changed verdicts (`fresh_comparison`).
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from judges.calibration.metrics import calibration_figures
from judges.drift.selectors import drift_frames, evidence_events, fresh_comparison, fresh_sample_ids
from judges.models import DriftCheck, Run, RunChunk
from judges.runs.services import RunError, judged_case_ids, queue_run_work

UNFINISHED = (Run.Status.QUEUED, Run.Status.RUNNING)


def drift_start(*, rubric_ids: list[int] | None = None, by=None) -> list[DriftCheck]:
    """Start a drift run for each promoted rubric of every project (or those of `rubric_ids`) whose evidence has no
    drift run at work; returns the checks started. Each rubric's check is its own transaction: one that cannot start
    (its dataset emptied, say) does not hold back the others.

    A rubric is checked only on a dataset of its own project (docs/projects.md): evidence over another project's
    dataset (which promotion refuses) is never re-judged."""
    started = []
    own = evidence_events(rubric_ids=rubric_ids).filter(run__dataset__project_id=F("rubric__project_id"))
    for event in own:
        try:
            check = _drift_start_one(evidence=event.run, rubric_id=event.rubric_id, by=by or event.by)
        except RunError:
            continue
        if check is not None:
            started.append(check)
    return started


def _drift_start_one(*, evidence: Run, rubric_id: int, by) -> DriftCheck | None:
    with transaction.atomic():
        # The evidence run's row lock makes a second press of "check now" wait, then find the first one at work.
        evidence = Run.objects.select_for_update(of=("self",)).select_related("config").get(pk=evidence.pk)
        at_work = Q(run__status__in=UNFINISHED) | Q(fresh_run__status__in=UNFINISHED)
        if DriftCheck.objects.filter(at_work, evidence_run=evidence).exists():
            return None
        if evidence.config.external:
            raise RunError("An imported (external) config cannot judge.")
        case_ids, unanswered = judged_case_ids(dataset=evidence.dataset)
        case_ids = _unjudged_first(case_ids, set(evidence.judgments.values_list("case_id", flat=True).distinct()))
        run = Run.objects.create(
            config=evidence.config, dataset_id=evidence.dataset_id, repeats=evidence.repeats,
            concurrency=evidence.concurrency, spend_cap_usd=evidence.spend_cap_usd, created_by=by,
            total=len(case_ids) * evidence.repeats, parent=evidence, unanswered=unanswered,
        )
        size = settings.EVALHUB_CHUNK_CASES
        RunChunk.objects.bulk_create(
            RunChunk(run=run, index=i, case_ids=case_ids[start : start + size])
            for i, start in enumerate(range(0, len(case_ids), size))
        )
        check = DriftCheck.objects.create(rubric_id=rubric_id, evidence_run=evidence, run=run)
        queue_run_work(run.pk)
        _fresh_sample_start(check=check, evidence=evidence, by=by)
    return check


def _unjudged_first(case_ids: list[int], judged: set[int]) -> list[int]:
    """The cases with those the evidence run did not judge (the new ones, whose judge calls are the check's only
    cost) first: their calls go out from the start and stay in flight while the worker records the cached
    judgments of the others after them (judges.runs.worker, _Window._cached_ahead), instead of waiting for them."""
    return [pk for pk in case_ids if pk not in judged] + [pk for pk in case_ids if pk in judged]


def _fresh_sample_start(*, check: DriftCheck, evidence: Run, by) -> None:
    """Start the check's fresh run over its rotating sample of unchanged cases (none: the check has no fresh run)."""
    case_ids = fresh_sample_ids(evidence=evidence, share=settings.EVALHUB_DRIFT_FRESH_SHARE)
    if not case_ids:
        return
    fresh = Run.objects.create(
        config=evidence.config, dataset_id=evidence.dataset_id, repeats=evidence.repeats,
        concurrency=evidence.concurrency, spend_cap_usd=evidence.spend_cap_usd, created_by=by,
        total=len(case_ids) * evidence.repeats, parent=evidence, fresh=True,
    )
    size = settings.EVALHUB_CHUNK_CASES
    RunChunk.objects.bulk_create(
        RunChunk(run=fresh, index=i, case_ids=case_ids[start : start + size])
        for i, start in enumerate(range(0, len(case_ids), size))
    )
    DriftCheck.objects.filter(pk=check.pk).update(fresh_run=fresh)
    check.fresh_run = fresh
    queue_run_work(fresh.pk)


def drift_check_record(*, run_id: int) -> DriftCheck | None:
    """Store the figures of a finished drift run (once); None when `run_id` is not one, or not finished yet.

    `run_id` may be the check's fresh run too: the check is recorded when the later of the two is done (a
    cancelled fresh run counts what it judged)."""
    check = (
        DriftCheck.objects.select_related("run__config__rubric", "evidence_run")
        .filter(Q(run_id=run_id) | Q(fresh_run_id=run_id), checked_at__isnull=True, run__status=Run.Status.FINISHED)
        .filter(Q(fresh_run__isnull=True) | Q(fresh_run__status__in=[Run.Status.FINISHED, Run.Status.CANCELLED]))
        .first()
    )
    if check is None:
        return None
    everything, new, not_evaluated = drift_frames(check=check)
    figures = {
        "all": calibration_figures(not_evaluated, cases=everything),
        "new": calibration_figures(not_evaluated[not_evaluated["case_id"].isin(new["case_id"])], cases=new),
    }
    updated = DriftCheck.objects.filter(pk=check.pk, checked_at__isnull=True).update(
        checked_at=timezone.now(), figures=figures,
        new_n=figures["new"]["n"], new_agreement=figures["new"]["agreement"],
        new_ci95=figures["new"]["agreement_ci95"],
        all_n=figures["all"]["n"], all_agreement=figures["all"]["agreement"],
        all_ci95=figures["all"]["agreement_ci95"],
        **fresh_comparison(check=check),
    )
    if not updated:
        return None
    check.refresh_from_db()
    return check


def drift_record_finished() -> list[int]:
    """Record every finished drift run not yet recorded (a worker that died between finishing and
    recording): the periodic task's safety net. Returns their run ids."""
    finished = DriftCheck.objects.filter(checked_at__isnull=True, run__status=Run.Status.FINISHED)
    pending = list(finished.values_list("run_id", flat=True))
    for run_id in pending:
        drift_check_record(run_id=run_id)
    return pending
