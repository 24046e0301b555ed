"""Probe runs with chosen outcomes, written straight to the tables (no engine, no worker).

The rule and page tests need exact moved shares; test_runs.py runs probes through the machinery.
"""

from collections import defaultdict
from datetime import timedelta

from django.utils import timezone

from judges.configs.cases import engine_case
from judges.models import Judgment, Run
from judges.runs.tallies import case_tallies_refresh
from judges.runs.variants import make_variant


def flip(outcome: str) -> str:
    return {"pass": "fail", "fail": "pass"}.get(outcome, outcome)


def make_probe(run: Run, kind: str, *, moved: int, status: str = Run.Status.FINISHED, human: str = "fail") -> Run:
    """A `kind` probe of `run` over every case `run` judged: the first `moved` cases (by id) get the opposite
    of the parent's outcome on every repeat, the rest the parent's own. Each judgment keeps its variant
    (made as if the case's human verdict were `human`)."""
    outcomes: dict = defaultdict(list)
    for judgment in Judgment.objects.filter(run=run).select_related("case").order_by("case_id", "repeat"):
        outcomes[judgment.case].append(judgment.outcome)
    now = timezone.now()
    finished = status in (Run.Status.FINISHED, Run.Status.CANCELLED)
    probe = Run.objects.create(
        config=run.config, dataset=run.dataset, repeats=run.repeats, status=status, created_by=run.created_by,
        started_at=now - timedelta(seconds=5), finished_at=now if finished else None, parent=run, probe=kind,
        total=sum(len(o) for o in outcomes.values()),
        done=sum(len(o) for o in outcomes.values()) if finished else 1,
    )
    rows = []
    for i, (case, repeats) in enumerate(sorted(outcomes.items(), key=lambda item: item[0].pk)):
        variant = make_variant(kind, engine_case(case), human)
        for repeat, outcome in enumerate(repeats, start=1):
            rows.append(Judgment(run=probe, case=case, repeat=repeat, outcome=flip(outcome) if i < moved else outcome,
                                 reason=f"probe {kind}", variant=variant))
    Judgment.objects.bulk_create(rows)
    case_tallies_refresh(run_id=probe.pk)
    return probe
