"""Runs with chosen judgments and human labels, written straight to the tables (no engine, no worker).

The calibration tests need exact, hand-chosen outcomes; the run machinery has its own tests.
"""

from datetime import timedelta

from django.utils import timezone

from judges.configs import services as config_services
from judges.models import Judgment, Run
from judges.runs.tallies import case_tallies_refresh
from labeling.models import Case, Label, case_split, labeled_content_hash
from tests.judges.helpers import behavioral_spec

CONTRACT_SPEC = {"layers": ["contract"], "contract_checks": ["answer_present"]}


def make_cases(dataset, specs: list[tuple[str, str]]) -> list[Case]:
    """specs: (external_id, category). Content differs per case; created a minute ago."""
    created = timezone.now() - timedelta(minutes=1)
    cases = []
    for external_id, category in specs:
        question, answer = f"Question {external_id}?", f"Answer {external_id}."
        cases.append(Case(
            dataset=dataset, external_id=external_id, input=question, output=answer, category=category,
            split=case_split(external_id),
            content_hash=labeled_content_hash(input=question, output=answer, trace={}),
            created_at=created, content_changed_at=created,
        ))
    return Case.objects.bulk_create(cases)


def label(case: Case, rubric, reviewer, verdict: str) -> Label:
    return Label.objects.create(
        case=case, rubric=rubric, reviewer=reviewer, verdict=verdict, content_hash=case.content_hash
    )


def make_config(rubric, lead, *, external: bool = False, note: str = "", behavioral: bool = False):
    """A deterministic config (contract checks only), or with `behavioral` a judge with a model: the one
    promotion holds to K ≥ 2, the flip rule and the ceiling."""
    if behavioral:
        spec = behavioral_spec(**({"policy": note} if note else {}))
    else:
        spec = dict(CONTRACT_SPEC)
        if note:  # a different regex makes a different config_hash, hence a new version
            spec = {**spec, "contract_checks": ["answer_present", "must_match"], "must_match": [note]}
    return config_services.judge_config_save(rubric=rubric, spec=spec, by=lead, external=external)


def make_run(config, dataset, lead, judgments: dict[Case, list[str]], *, status=Run.Status.FINISHED,
             reasons: dict | None = None, **extra) -> Run:
    """One judgment per listed outcome: judgments[case] = ["pass", "fail", ...] for repeats 1, 2, …"""
    repeats = max((len(outcomes) for outcomes in judgments.values()), default=1)
    now = timezone.now()
    run = Run.objects.create(
        config=config, dataset=dataset, repeats=repeats, status=status, created_by=lead,
        started_at=now - timedelta(seconds=42),
        finished_at=now if status in (Run.Status.FINISHED, Run.Status.CANCELLED) else None,
        total=sum(len(o) for o in judgments.values()), **extra,
    )
    reasons = reasons or {}
    Judgment.objects.bulk_create([
        Judgment(
            run=run, case=case, repeat=repeat, outcome=outcome,
            reason=reasons.get((case.external_id, repeat), f"{outcome} because of {case.external_id}/{repeat}")
            if outcome != "not_evaluated" else "",
            error="timeout" if outcome == "not_evaluated" else "",
        )
        for case, outcomes in judgments.items()
        for repeat, outcome in enumerate(outcomes, start=1)
    ])
    case_tallies_refresh(run_id=run.pk)
    return run
