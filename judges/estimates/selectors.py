"""A run's audit sample and the agent's pass rate, read from the database (docs/estimates.md).

The ORM side of `judges.calibration.estimates` (plain numpy): the run's per-case tallies
(judges.runs.tallies) give each case's judge verdicts — the drawn cases one by one, the others counted by
category and verdicts — one query reads the drawn cases' human verdicts with labeling's rule for a human
verdict, and the estimate is computed from the arrays they make.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from django.db.models import Count, F, Max, Q, QuerySet

from judges.calibration.estimates import (
    MIN_LABELS,
    Sample,
    estimate_at,
    filled_f,
    pass_rate,
    probability_in_draw,
    uncertainty_from_distance,
    uncertainty_from_repeats,
)
from judges.models import AuditDraw, AuditSampleCase, Judgment, Run, RunCaseTally
from labeling.disputes.selectors import cases_with_human_verdict
from labeling.models import Case

# How far from the pass threshold the judge is still unsure: two points of a 1-5 score, 0.1 of a cosine
# similarity (docs/estimates.md, "Drawing a sample").
SCORE_DISTANCE, SIMILARITY_DISTANCE = 2.0, 0.1
HISTORY_POINTS = 20  # the interval's history: at most this many points, evenly spaced over the labels
FEW_CASES = 5000  # up to this many cases, their judgments are looked up by id
HISTORY_FIRST = MIN_LABELS  # ...from the fewest labels an estimate needs (docs/estimates.md)


@dataclass(frozen=True)
class RunCases:
    """The run's cases that have an output, one entry each: ordered by case id (run_cases), or for the
    estimate the drawn ones so, then the others without their ids (_estimate_cases)."""

    case_id: np.ndarray
    external_id: list[str]
    category: np.ndarray
    f: np.ndarray  # the fraction of evaluated repeats that pass; NaN where none
    similarity: np.ndarray  # the lowest similarity of its repeats; NaN where none


def _answered_tallies(run: Run) -> QuerySet[RunCaseTally]:
    """The run's per-case tallies of cases that have an output (cases without one are not in N)."""
    return RunCaseTally.objects.filter(run=run, case__output__isnull=False)


def _run_cases(rows: list[tuple]) -> RunCases:
    """RunCases from rows of (case id, external id, category, evaluated, passes, lowest similarity)."""
    evaluated = np.array([row[3] for row in rows], dtype=float)
    passes = np.array([row[4] for row in rows], dtype=float)
    return RunCases(
        case_id=np.array([row[0] for row in rows], dtype=np.int64),
        external_id=[row[1] for row in rows],
        category=np.array([row[2] or "" for row in rows], dtype=object),
        f=np.divide(passes, evaluated, out=np.full(len(rows), np.nan), where=evaluated > 0),
        similarity=np.array([np.nan if row[5] is None else row[5] for row in rows], dtype=float),
    )


def run_cases(*, run: Run) -> RunCases:
    """Every case of the run with an output, from its tally (one query, N rows): what a draw reads."""
    return _run_cases(list(
        _answered_tallies(run).annotate(evaluated=F("passes") + F("fails"))
        .order_by("case_id").values_list("case_id", "case__external_id", "case__category", "evaluated", "passes",
                                         "lowest_similarity")
    ))


def _estimate_cases(*, run: Run, drawn_ids: set[int]) -> tuple[RunCases, int]:
    """The cases the estimate reads, in two small queries instead of N rows: the drawn cases one by one
    (ordered by case id), then every other case rebuilt from a count of the run's cases by (category,
    evaluated, passes): the estimate sees only those of a case that was not drawn, and none of its figures
    depends on the cases' order. Returns (cases, how many of them come first as the drawn ones); the
    others have no case id (0) or external id ("")."""
    drawn = list(
        _answered_tallies(run).filter(case_id__in=drawn_ids).annotate(evaluated=F("passes") + F("fails"))
        .order_by("case_id").values_list("case_id", "case__external_id", "case__category", "evaluated", "passes",
                                         "lowest_similarity")
    )
    buckets = Counter({
        (category or "", evaluated, passes): count
        for category, evaluated, passes, count in
        _answered_tallies(run).annotate(evaluated=F("passes") + F("fails"))
        .values("case__category", "evaluated", "passes").annotate(n=Count("id"))
        .order_by().values_list("case__category", "evaluated", "passes", "n")
    })
    buckets.subtract(Counter((row[2] or "", row[3], row[4]) for row in drawn))
    kept = sorted((key, count) for key, count in buckets.items() if count > 0)
    counts = np.array([count for _, count in kept], dtype=np.int64)
    evaluated = np.repeat(np.array([key[1] for key, _ in kept], dtype=float), counts)
    passes = np.repeat(np.array([key[2] for key, _ in kept], dtype=float), counts)
    first = _run_cases(drawn)
    others = int(counts.sum())
    cases = RunCases(
        case_id=np.concatenate([first.case_id, np.zeros(others, dtype=np.int64)]),
        external_id=first.external_id + [""] * others,
        category=np.concatenate([first.category, np.repeat(np.array([key[0] for key, _ in kept], dtype=object),
                                                           counts)]),
        f=np.concatenate([first.f, np.divide(passes, evaluated, out=np.full(others, np.nan), where=evaluated > 0)]),
        similarity=np.concatenate([first.similarity, np.full(others, np.nan)]),
    )
    return cases, len(drawn)


def _lowest_scores(run: Run, case_ids: np.ndarray) -> np.ndarray:
    rows = Judgment.objects.filter(run=run, repeat=1, scores__isnull=False)
    if len(case_ids) <= FEW_CASES:  # an estimate's drawn cases, not a draw's every case
        rows = rows.filter(case_id__in=case_ids.tolist())
    scores = dict(rows.values_list("case_id", "scores"))
    lowest = np.full(len(case_ids), np.nan)
    for i, case_id in enumerate(case_ids.tolist()):
        values = [v for v in (scores.get(case_id) or {}).values() if isinstance(v, int | float)]
        if values:
            lowest[i] = min(values)
    return lowest


def uncertainty_source(*, run: Run) -> str:
    """Where an active draw reads the judge's uncertainty: split repeats (K >= 2), else scores, else the
    semantic layer's similarity; "" when the run has none of them (active is refused)."""
    spec = run.config.spec
    if run.repeats >= 2:
        return AuditDraw.Uncertainty.REPEATS
    if spec.get("output_kind") == "scores":
        return AuditDraw.Uncertainty.SCORES
    if (spec.get("semantic") or {}).get("pass_at") is not None:
        return AuditDraw.Uncertainty.SIMILARITY
    return AuditDraw.Uncertainty.NONE


def uncertainty(*, run: Run, cases: RunCases, source: str) -> np.ndarray:
    """u_i in [0, 1] for every case, from `source` (a case with nothing to read it from gets 0)."""
    if source == AuditDraw.Uncertainty.REPEATS:
        return uncertainty_from_repeats(filled_f(cases.f))
    if source == AuditDraw.Uncertainty.SCORES:
        lowest = _lowest_scores(run, cases.case_id)
        distance = lowest - float(run.config.spec.get("pass_score", 4))
        return np.nan_to_num(uncertainty_from_distance(distance, SCORE_DISTANCE), nan=0.0)
    if source == AuditDraw.Uncertainty.SIMILARITY:
        distance = cases.similarity - float(run.config.spec["semantic"]["pass_at"])
        return np.nan_to_num(uncertainty_from_distance(distance, SIMILARITY_DISTANCE), nan=0.0)
    return np.zeros(len(cases.case_id))


@dataclass(frozen=True)
class RunSample:
    cases: RunCases
    sample: Sample
    verdict_at: list[datetime | None]  # per case: when its human verdict was last given (drawn cases only)


def run_sample(*, run: Run) -> RunSample:
    """The run's cases, draws and the drawn cases' human verdicts as the estimate reads them. Five queries,
    none of them over every case or judgment of the run (see _estimate_cases)."""
    draws = list(run.audit_draws.order_by("created_at", "id"))
    draw_index = {draw.pk: d for d, draw in enumerate(draws)}
    draw_of = {case_id: draw_index[draw_id]
               for case_id, draw_id in AuditSampleCase.objects.filter(run=run).values_list("case_id", "draw_id")}
    cases, n_drawn = _estimate_cases(run=run, drawn_ids=set(draw_of))
    big_n = len(cases.case_id)
    index = {int(case_id): i for i, case_id in enumerate(cases.case_id[:n_drawn].tolist())}
    drawn = np.full(big_n, -1)
    drawn[:n_drawn] = [draw_of[case_id] for case_id in index]
    # pi_i^(d) is read for drawn cases only: the others' rows stay 0.
    probabilities = np.zeros((big_n, max(1, len(draws))))
    filled = filled_f(cases.f)
    head = RunCases(case_id=cases.case_id[:n_drawn], external_id=cases.external_id[:n_drawn],
                    category=cases.category[:n_drawn], f=filled[:n_drawn], similarity=cases.similarity[:n_drawn])
    sources: dict[str, np.ndarray] = {}
    for d, draw in enumerate(draws):
        if draw.uncertainty not in sources:
            sources[draw.uncertainty] = uncertainty(run=run, cases=head, source=draw.uncertainty)
        probabilities[:n_drawn, d] = probability_in_draw(sources[draw.uncertainty], scale=draw.scale,
                                                         uniform_share=draw.uniform_share)
    human = np.full(big_n, np.nan)
    verdict_at: list[datetime | None] = [None] * big_n
    if index:
        rubric = run.config.rubric
        verdicts = (
            cases_with_human_verdict(rubric=rubric, cases=Case.objects.filter(pk__in=list(index)))
            .annotate(verdict_at=Max("labels__updated_at", filter=Q(labels__rubric=rubric)))
            .order_by().values_list("pk", "human_verdict", "verdict_at")
        )
        for case_id, verdict, when in verdicts:
            if verdict is not None:
                human[index[case_id]] = 1.0 if verdict == "pass" else 0.0
                verdict_at[index[case_id]] = when
    sample = Sample(f=cases.f, category=cases.category, draw=drawn, human=human, probabilities=probabilities,
                    uniform=all(draw.method == AuditDraw.Method.UNIFORM for draw in draws))
    return RunSample(cases=cases, sample=sample, verdict_at=verdict_at)


def interval_history(run_sample: RunSample) -> list[dict[str, Any]]:
    """How the interval narrowed as labels came in: the estimate replayed with the first k labeled drawn
    cases (in the order their verdicts were given), at up to HISTORY_POINTS values of k."""
    sample = run_sample.sample
    labeled = np.flatnonzero((sample.draw >= 0) & ~np.isnan(sample.human))
    if len(labeled) <= HISTORY_FIRST:
        return []
    order = sorted(labeled.tolist(), key=lambda i: (run_sample.verdict_at[i] is None, run_sample.verdict_at[i] or 0, i))
    span = len(order) - HISTORY_FIRST
    points = sorted({HISTORY_FIRST + round(span * step / (HISTORY_POINTS - 1)) for step in range(HISTORY_POINTS)})
    history = []
    for k in points:
        mask = np.zeros(len(sample.f), dtype=bool)
        mask[order[:k]] = True
        estimate = estimate_at(sample, mask)
        if estimate is not None:
            history.append({"labels": k, "estimate": estimate.theta, "ci95": estimate.ci95})
    return history


def run_pass_rate(*, run: Run, history: bool = False) -> dict[str, Any]:
    """The agent's pass rate on the run (docs/estimates.md): DESIGN's fields, plus `provisional` bounds
    and, when asked, the interval's `history`."""
    loaded = run_sample(run=run)
    figures = pass_rate(loaded.sample)
    if history:
        figures["history"] = interval_history(loaded)
    return figures



def latest_estimates(*, rubric_ids: list[int]) -> dict[int, tuple[Run, dict[str, Any]]]:
    """{rubric id: (its newest run with an audit sample, that run's pass-rate figures)}. One query lists the
    runs that have a sample (few: a lead draws one by hand); each rubric's newest then costs run_pass_rate's
    four queries."""
    newest: dict[int, Run] = {}
    for run in (Run.objects.filter(config__rubric_id__in=rubric_ids, audit_draws__isnull=False)
                .select_related("config__rubric", "dataset").order_by("-created_at", "-pk").distinct()):
        newest.setdefault(run.config.rubric_id, run)
    return {rubric_id: (run, run_pass_rate(run=run)) for rubric_id, run in newest.items()}
