"""Reads of the drift check (docs/promotion.md, "Drift on new cases"): which cases are new, each rubric's newest
check, a rubric's checks over time, and the drift reason for "recalibration needed".

A case is **new** to an evidence run when it has a human verdict of the rubric now and no counting
label or adjudication of the rubric on it dates from before the evidence run finished: its verdict
appeared after the evidence was judged, so the evidence never measured the judge on it.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter, defaultdict
from datetime import datetime
from typing import Any

import pandas as pd
from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery

from evalhub.models import Project
from judges.calibration.metrics import CASE_COLUMNS, COLUMNS, wilson_interval
from judges.calibration.selectors import case_frame, not_evaluated_judgments, pct
from judges.models import DriftCheck, Judgment, RubricEvent, Run, Tier
from labeling.models import Adjudication, Case, Label, Rubric

# Drift (docs/promotion.md): on at least 20 new cases, the Wilson upper bound of their agreement below the floor.
DRIFT_MIN_NEW_CASES = 20
DRIFT_SHOWN = 60  # checks drawn on the promotion page's chart, newest last
# The fresh sample (docs/promotion.md, "Fresh drift sample"): EVALHUB_DRIFT_FRESH_SHARE of the unchanged cases, at
# least this many (all of them when there are fewer).
DRIFT_FRESH_MIN_CASES = 20


# A rubric's evidence is promotion's word (judges.promotion), read here because drift re-judges it and
# sits below promotion in the stack.
EVIDENCE_KINDS = (RubricEvent.Kind.PROMOTE, RubricEvent.Kind.RENEW)
# Entries that choose the config CI runs: evidence, or a config named at observe (entering it, or a switch).
CI_KINDS = (*EVIDENCE_KINDS, RubricEvent.Kind.SWITCH)


def ci_events(
    *, project: Project | None = None, rubric_ids: list[int] | None = None, tier: str = Tier.DEFAULT,
) -> QuerySet[RubricEvent]:
    """The entry that chose the config CI runs for each rubric above draft (of `project`, or of those in
    `rubric_ids`; neither: of every project, for the periodic tasks), in `tier`, with its run or config and author.

    One query: the newest promotion, renewal or switch of each rubric in the tier, unless a demotion to draft came
    after it (ids grow with time, so "later" is a greater id), or, for the release tier, a release demotion (which
    withdraws it). An entry with a run is the tier's evidence; one naming only a config (observe without evidence)
    has none.
    """
    later = RubricEvent.objects.filter(rubric=OuterRef("rubric"), pk__gt=OuterRef("pk"))
    demoted = Q(to_stage=Rubric.Stage.DRAFT) if tier == Tier.DEFAULT else Q(to_stage=Rubric.Stage.DRAFT) | Q(tier=tier)
    events = (
        RubricEvent.objects.filter(kind__in=CI_KINDS, tier=tier)
        .exclude(rubric__stage=Rubric.Stage.DRAFT)
        .annotate(
            superseded=Exists(later.filter(kind__in=CI_KINDS, tier=tier)),
            reset=Exists(later.filter(demoted, kind=RubricEvent.Kind.DEMOTE)),
        )
        .filter(superseded=False, reset=False)
        .select_related("rubric", "run__config", "run__dataset", "config", "by")
    )
    if project is not None:
        events = events.filter(rubric__project=project)
    if rubric_ids is not None:
        events = events.filter(rubric_id__in=rubric_ids)
    return events.order_by("rubric__slug")


def evidence_events(
    *, project: Project | None = None, rubric_ids: list[int] | None = None, tier: str = Tier.DEFAULT,
) -> QuerySet[RubricEvent]:
    """The promotion or renewal event holding each promoted rubric's evidence in `tier` (`ci_events` with a run):
    none for a rubric observed without evidence, or whose CI config was switched since."""
    return ci_events(project=project, rubric_ids=rubric_ids, tier=tier).filter(run__isnull=False)


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


# ---- the fresh sample: unchanged cases judged anew ------------------------------------------------------


def fresh_sample_ids(*, evidence: Run, share: float) -> list[int]:
    """The cases the next drift check of `evidence` re-judges fresh: of the unchanged cases (judged by the evidence
    run, answered, and neither created nor changed since it finished), ⌈share · N⌉ and at least
    DRIFT_FRESH_MIN_CASES, in a fixed order seeded by the evidence run, each check taking the next window of it, so
    every unchanged case is judged fresh within ⌈N / size⌉ checks. [] when `share` is 0. Three queries."""
    if share <= 0 or evidence.finished_at is None:
        return []
    judged = Judgment.objects.filter(run=evidence, case=OuterRef("pk"))
    unchanged = list(
        Case.objects.answered().filter(
            dataset_id=evidence.dataset_id, created_at__lte=evidence.finished_at,
            content_changed_at__lte=evidence.finished_at,
        ).filter(Exists(judged)).values_list("pk", flat=True)
    )
    if not unchanged:
        return []
    order = sorted(unchanged, key=lambda pk: hashlib.sha256(f"{evidence.pk}:{pk}".encode()).hexdigest())
    size = min(len(order), max(DRIFT_FRESH_MIN_CASES, math.ceil(share * len(order))))
    turn = DriftCheck.objects.filter(evidence_run=evidence, fresh_run__isnull=False).count()
    start = (turn * size) % len(order)
    return sorted((order + order)[start : start + size])


def majority(outcomes: list[str]) -> str | None:
    """A case's verdict over its repeats: the majority of its evaluated ones; None on a tie or with none."""
    counts = Counter(o for o in outcomes if o in ("pass", "fail"))
    if counts["pass"] == counts["fail"]:
        return None
    return "pass" if counts["pass"] > counts["fail"] else "fail"


def changed_verdicts(fresh: dict[int, list[str]], cached: dict[int, list[str]]) -> tuple[int, int]:
    """(cases compared, cases whose fresh majority differs from the cached one): a case counts when both runs
    give it a majority."""
    pairs = [(majority(fresh[case]), majority(cached.get(case, []))) for case in fresh]
    compared = [(a, b) for a, b in pairs if a is not None and b is not None]
    return len(compared), sum(a != b for a, b in compared)


def fresh_comparison(*, check: DriftCheck) -> dict[str, Any]:
    """The fresh sample's figures for the DriftCheck row: its cases compared, those changed, and the Wilson
    interval of their share; all None without a fresh run. One query."""
    if check.fresh_run_id is None:
        return {"fresh_n": None, "fresh_changed": None, "fresh_ci95": None}
    sampled = Judgment.objects.filter(run_id=check.fresh_run_id).values("case_id")
    rows = Judgment.objects.filter(run_id__in=[check.run_id, check.fresh_run_id], case_id__in=sampled)
    outcomes: dict[int, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    for run_id, case_id, outcome in rows.values_list("run_id", "case_id", "outcome"):
        outcomes[run_id][case_id].append(outcome)
    n, changed = changed_verdicts(outcomes[check.fresh_run_id], outcomes[check.run_id])
    return {"fresh_n": n, "fresh_changed": changed, "fresh_ci95": wilson_interval(changed / n, n) if n else None}


def fresh_drift_reason(*, check: DriftCheck | None, rubric: Rubric) -> str | None:
    """The fresh sample's drift reason: the Wilson lower bound of the share of changed verdicts above the rubric's
    flip limit (a judge at its usual noise is not flagged); else None."""
    if check is None or not check.fresh_n or not check.fresh_ci95:
        return None
    lower = check.fresh_ci95[0]
    if lower <= rubric.max_flip_rate:
        return None
    return (
        f"judged fresh, {check.fresh_changed} of {check.fresh_n} unchanged cases got another verdict than the cached "
        f"one ({pct(check.fresh_changed / check.fresh_n)}, 95 % interval from {pct(lower)}), above the flip limit "
        f"of {pct(rubric.max_flip_rate)}: the judge's model may have changed behind its pinned name"
    )
