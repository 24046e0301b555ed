"""Drawing a run's audit sample (docs/estimates.md)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import numpy as np
from django.db import transaction
from django.db.models import Max

from evalhub.models import User
from judges.calibration.estimates import MIN_UNIFORM_SHARE, inclusion_probabilities
from judges.estimates.selectors import run_cases, uncertainty, uncertainty_source
from judges.models import AuditDraw, AuditSampleCase, Run
from labeling.models import CaseTally, QueuePriority

NO_UNCERTAINTY = (
    "an active sample needs the judge's uncertainty on each case: a run with 2 or more repeats, scores, or "
    "the semantic layer's similarity. This run has none of them: draw a uniform sample instead."
)


class AuditSampleError(ValueError):
    """A draw that cannot be made; the message says why, for a person."""


@dataclass(frozen=True)
class Drawn:
    draw: AuditDraw
    external_ids: list[str]  # in the order the queue serves them


def audit_sample_draw(*, run: Run, size: int, method: str, by: User | None, seed: int | None = None) -> Drawn:
    """Draw `size` of the run's cases not drawn before (uniform: exactly that many; active: Poisson
    sampling, that many on average), and put them ahead in the labeling queue in a seeded random order.

    The draw, its cases with their inclusion probabilities and the queue's priority are written together
    or not at all.
    """
    if size < 1:
        raise AuditSampleError("the sample size must be at least 1")
    if method not in AuditDraw.Method.values:
        raise AuditSampleError(f"the method must be one of {', '.join(AuditDraw.Method.values)}")
    seed = secrets.randbits(32) if seed is None else seed
    if not 0 <= seed < 2**63:
        raise AuditSampleError("the seed must be a whole number from 0 to 2^63 - 1")
    with transaction.atomic():
        # One draw of a run at a time: a second one waits here, then sees the first's cases as drawn.
        Run.objects.select_for_update().filter(pk=run.pk).first()
        cases = run_cases(run=run)
        already = set(AuditSampleCase.objects.filter(run=run).values_list("case_id", flat=True))
        eligible = np.flatnonzero([int(case_id) not in already for case_id in cases.case_id.tolist()])
        if not len(eligible):
            raise AuditSampleError("every judged case of this run with an output is drawn already")
        budget = min(size, len(eligible))
        rng = np.random.default_rng(seed)
        source = AuditDraw.Uncertainty.NONE
        if method == AuditDraw.Method.UNIFORM:
            chosen = np.sort(rng.choice(eligible, size=budget, replace=False))
            probability = np.full(len(chosen), budget / len(eligible))
            scale, share = budget / len(eligible), 1.0
        else:
            source = uncertainty_source(run=run)
            if source == AuditDraw.Uncertainty.NONE:
                raise AuditSampleError(NO_UNCERTAINTY)
            u = uncertainty(run=run, cases=cases, source=source)[eligible]
            pi, scale = inclusion_probabilities(u, budget=budget, uniform_share=MIN_UNIFORM_SHARE)
            hit = rng.random(len(eligible)) < pi
            chosen, probability, share = eligible[hit], pi[hit], MIN_UNIFORM_SHARE
        order = rng.permutation(len(chosen))
        start = (AuditSampleCase.objects.filter(run=run).aggregate(last=Max("position"))["last"] or 0) + 1
        draw = AuditDraw.objects.create(run=run, method=method, uncertainty=source, size=size, eligible=len(eligible),
                                        scale=float(min(scale, 1e300)), uniform_share=share, seed=seed, created_by=by)
        rows = [
            AuditSampleCase(draw=draw, run=run, case_id=int(cases.case_id[chosen[i]]),
                            inclusion_probability=float(probability[i]), position=start + rank)
            for rank, i in enumerate(order.tolist())
        ]
        AuditSampleCase.objects.bulk_create(rows, batch_size=1000)
        _serve_first(run=run, rows=rows)
    return Drawn(draw=draw, external_ids=[cases.external_id[chosen[i]] for i in order.tolist()])


def _serve_first(*, run: Run, rows: list[AuditSampleCase]) -> None:
    """The labeling queue serves the drawn cases ahead of other needed cases, in the sample's order."""
    position = {row.case_id: row.position for row in rows}
    tallies = list(CaseTally.objects.filter(rubric_id=run.config.rubric_id, case_id__in=list(position))
                   .only("id", "case_id", "priority", "priority_order"))
    for tally in tallies:
        tally.priority = max(tally.priority, QueuePriority.AUDIT_SAMPLE)
        tally.priority_order = position[tally.case_id]
    CaseTally.objects.bulk_update(tallies, ["priority", "priority_order"], batch_size=1000)
