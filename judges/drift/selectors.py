"""Reads of the drift check (docs/promotion.md, "Drift on new cases"): which cases are new, each rubric's newest
check, a rubric's checks over time, and the drift reason for "recalibration needed".

A case is **new** to an evidence run when it has a human verdict of the rubric now and no counting
label or adjudication of the rubric on it dates from before the evidence run finished: its verdict
appeared after the evidence was judged, so the evidence never measured the judge on it.
"""

from __future__ import annotations

from datetime import datetime

import pandas as pd
from django.db.models import Exists, OuterRef, QuerySet, Subquery

from judges.calibration.metrics import CASE_COLUMNS, COLUMNS
from judges.calibration.selectors import case_frame, not_evaluated_judgments, pct
from judges.models import DriftCheck, RubricEvent, Run
from labeling.models import Adjudication, Label, Rubric

# Drift (docs/promotion.md): on at least 20 new cases, the Wilson upper bound of their agreement below the floor.
DRIFT_MIN_NEW_CASES = 20
DRIFT_SHOWN = 60  # checks drawn on the promotion page's chart, newest last


# A rubric's evidence is promotion's word (judges.promotion), read here because drift re-judges it and
# sits below promotion in the stack.
EVIDENCE_KINDS = (RubricEvent.Kind.PROMOTE, RubricEvent.Kind.RENEW)
# Entries that choose the config CI runs: evidence, or a config named at observe (entering it, or a switch).
CI_KINDS = (*EVIDENCE_KINDS, RubricEvent.Kind.SWITCH)


def ci_events(*, rubric_ids: list[int] | None = None) -> QuerySet[RubricEvent]:
    """The entry that chose the config CI runs for each rubric above draft, with its run or config and author.

    One query: the newest promotion, renewal or switch of each rubric, unless a demotion to draft came
    after it (ids grow with time, so "later" is a greater id). An entry with a run is the rubric's
    evidence; one naming only a config (observe without evidence) has none.
    """
    later = RubricEvent.objects.filter(rubric=OuterRef("rubric"), pk__gt=OuterRef("pk"))
    events = (
        RubricEvent.objects.filter(kind__in=CI_KINDS)
        .exclude(rubric__stage=Rubric.Stage.DRAFT)
        .annotate(
            superseded=Exists(later.filter(kind__in=CI_KINDS)),
            reset=Exists(later.filter(kind=RubricEvent.Kind.DEMOTE, to_stage=Rubric.Stage.DRAFT)),
        )
        .filter(superseded=False, reset=False)
        .select_related("rubric", "run__config", "run__dataset", "config", "by")
    )
    if rubric_ids is not None:
        events = events.filter(rubric_id__in=rubric_ids)
    return events.order_by("rubric__slug")


def evidence_events(*, rubric_ids: list[int] | None = None) -> QuerySet[RubricEvent]:
    """The promotion or renewal event holding each promoted rubric's evidence (`ci_events` with a run): none for
    a rubric observed without evidence, or whose CI config was switched since."""
    return ci_events(rubric_ids=rubric_ids).filter(run__isnull=False)


def old_case_ids(*, rubric: Rubric, dataset_id: int, since: datetime) -> set[int]:
    """Cases of the dataset with a counting label or an adjudication of the rubric from `since` or before. One query."""
    labelled = Label.objects.counting().filter(
        rubric=rubric, case__dataset_id=dataset_id, created_at__lte=since
    ).values_list("case_id", flat=True)
    decided = Adjudication.objects.filter(
        rubric=rubric, case__dataset_id=dataset_id, decided_at__lte=since
    ).values_list("case_id", flat=True)
    return set(labelled.order_by().union(decided.order_by()))


def drift_frames(*, check: DriftCheck) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(every case the drift run judged, the new ones, its not-evaluated judgments) as the metrics read them
    (metrics.CASE_COLUMNS; COLUMNS). Three queries; `check.run.config.rubric` and `check.evidence_run` loaded."""
    run, evidence = check.run, check.evidence_run
    cases = case_frame(runs=[run])
    missing = not_evaluated_judgments(cases=cases)[list(COLUMNS)]
    everything = cases[list(CASE_COLUMNS)]
    old = old_case_ids(rubric=run.config.rubric, dataset_id=run.dataset_id, since=evidence.finished_at)
    new = everything[everything["human"].notna() & ~everything["case_id"].isin(old)]
    return everything, new, missing


def newest_checks(*, events: list) -> dict[int, DriftCheck]:
    """rubric_id → the newest recorded drift check of its current evidence (`evidence_events` rows), made
    after that evidence was granted: a renewal starts afresh. One query however many rubrics."""
    if not events:
        return {}
    newest = (
        DriftCheck.objects.filter(evidence_run=OuterRef("evidence_run"), rubric=OuterRef("rubric"),
                                  checked_at__isnull=False)
        .order_by("-checked_at", "-id").values("pk")[:1]
    )
    checks = DriftCheck.objects.filter(
        rubric_id__in=[e.rubric_id for e in events], checked_at__isnull=False, pk=Subquery(newest)
    ).defer("figures")
    granted = {e.rubric_id: (e.run_id, e.at) for e in events}
    return {
        c.rubric_id: c for c in checks
        if granted.get(c.rubric_id, (None, None))[0] == c.evidence_run_id and c.started_at >= granted[c.rubric_id][1]
    }


def drift_reason(*, check: DriftCheck | None, rubric: Rubric) -> str | None:
    """The drift reason when the check shows it, else None."""
    if check is None or check.new_n is None or check.new_n < DRIFT_MIN_NEW_CASES or not check.new_ci95:
        return None
    upper = check.new_ci95[1]
    if upper >= rubric.agreement_floor:
        return None
    return (
        f"agreement on {check.new_n} new cases is {pct(check.new_agreement)} (95 % interval up to "
        f"{pct(upper)}), below the floor of {pct(rubric.agreement_floor)}"
    )


def drift_history(*, rubric: Rubric, evidence_run_id: int, since: datetime) -> list[DriftCheck]:
    """The recorded checks of this evidence since it was granted, oldest first, at most DRIFT_SHOWN, with their runs
    (what each left out). One query."""
    newest = list(
        DriftCheck.objects.filter(rubric=rubric, evidence_run_id=evidence_run_id, checked_at__isnull=False,
                                  started_at__gte=since)
        .select_related("run").defer("figures").order_by("-checked_at", "-id")[:DRIFT_SHOWN]
    )
    return newest[::-1]


def drift_at_work(*, rubric: Rubric) -> Run | None:
    """The rubric's drift run still at work, if any. One query."""
    return Run.objects.filter(
        drift_check__rubric=rubric, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]
    ).order_by("-pk").first()
