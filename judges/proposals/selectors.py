"""Reads of judge improvement (docs/improving.md): a run's dev disagreements and labeled cases, a proposal's
estimate, and its results table."""

import difflib
import random
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet

from evalhub.models import Project
from judges.calibration.metrics import calibration_figures
from judges.calibration.rules import RuleResult, config_models, evaluate_rules
from judges.calibration.selectors import (
    case_frame,
    evidence_figures,
    not_evaluated_judgments,
    rubric_thresholds,
)
from judges.configs.cases import engine_case
from judges.editor.client import EditorSpec, estimate_editor_cost
from judges.engine import build_messages
from judges.engine.spend import estimate_cost
from judges.models import Judgment, ModelPrice, Outcome, Proposal, ProposalCandidate, Run
from judges.proposals.editing import SYSTEM, Disagreement, editor_prompt
from labeling.disputes.selectors import cases_with_human_verdict
from labeling.models import Case

# The editor reads at most this many disagreements (a seeded sample when there are more): its prompt stays bounded.
MAX_DISAGREEMENTS = 30
# How many of the best candidates on dev are judged on holdout.
FINALISTS = 2


@dataclass(frozen=True)
class LabeledCase:
    case_id: int
    external_id: str
    input: str
    output: str
    human: str


def labeled_cases(*, run: Run, split: str) -> dict[str, LabeledCase]:
    """The run's dataset's answered cases of one split that have a human verdict for the run's rubric, by
    external id; none when the dataset is not of the rubric's project (what the editor reads stays in the
    project). One query."""
    cases = Case.objects.filter(dataset_id=run.dataset_id, dataset__project_id=run.config.rubric.project_id,
                                split=split).answered()
    rows = (
        cases_with_human_verdict(rubric=run.config.rubric, cases=cases)
        .filter(human_verdict__isnull=False)
        .order_by("external_id")
        .values_list("pk", "external_id", "input", "output", "human_verdict")
    )
    return {row[1]: LabeledCase(*row) for row in rows}


def dev_disagreements(*, run: Run, seed: int) -> tuple[list[Disagreement], int]:
    """The run's dev cases where a judgment disagreed with the human verdict (at most MAX_DISAGREEMENTS, a
    sample drawn with `seed` when there are more), and how many were left out. Two queries; holdout cases
    are never read."""
    dev = labeled_cases(run=run, split=Case.Split.DEV)
    by_id = {case.case_id: case for case in dev.values()}
    verdicts: dict[int, list[tuple[str, str]]] = {}
    rows = (
        Judgment.objects.filter(run=run, case_id__in=list(by_id), outcome__in=[Outcome.PASS, Outcome.FAIL])
        .order_by("case_id", "repeat")
        .values_list("case_id", "outcome", "reason")
    )
    for case_id, outcome, reason in rows:
        verdicts.setdefault(case_id, []).append((outcome, reason))
    found = []
    for case_id, judged in verdicts.items():
        case = by_id[case_id]
        wrong = [(outcome, reason) for outcome, reason in judged if outcome != case.human]
        if wrong:
            found.append(Disagreement(
                external_id=case.external_id, question=case.input, answer=case.output, human=case.human,
                judge=", ".join(outcome for outcome, _ in judged), reason=wrong[0][1],
            ))
    found.sort(key=lambda d: d.external_id)
    if len(found) <= MAX_DISAGREEMENTS:
        return found, 0
    shown = sorted(random.Random(seed).sample(found, MAX_DISAGREEMENTS), key=lambda d: d.external_id)
    return shown, len(found) - len(shown)


def proposal_prompt(*, run: Run, seed: int, candidates: int) -> tuple[str, int, int]:
    """The editor's user message for a run, how many disagreements it shows and how many it leaves out."""
    spec = run.config.spec
    shown, left_out = dev_disagreements(run=run, seed=seed)
    prompt = editor_prompt(
        criteria=spec.get("criteria", ""), policy=spec.get("policy", ""), guidance=spec.get("guidance", ""),
        disagreements=shown, candidates=candidates,
    )
    return prompt, len(shown), left_out


def engine_prices() -> dict[str, dict[str, float]]:
    return {price.model: price.as_engine_price() for price in ModelPrice.objects.all()}


@dataclass
class ProposalEstimate:
    editor_usd: Decimal | None
    dev_judgments: int
    holdout_judgments: int
    runs_usd: Decimal | None
    notes: list[str]

    @property
    def total_usd(self) -> Decimal | None:
        if self.editor_usd is None or self.runs_usd is None:
            return None
        return self.editor_usd + self.runs_usd


def proposal_estimate(*, run: Run, editor: EditorSpec, candidates: int, seed: int) -> ProposalEstimate:
    """An upper estimate before anything is asked: one editor call, each candidate's dev run and the
    finalists' holdout runs, every judgment a full call (a candidate has a new config hash: no cache help)."""
    prices = engine_prices()
    prompt, _, _ = proposal_prompt(run=run, seed=seed, candidates=candidates)
    editor_usd = estimate_editor_cost(editor, prompt_chars=len(SYSTEM) + len(prompt), prices=prices)
    dev = labeled_cases(run=run, split=Case.Split.DEV)
    holdout_n = len(labeled_cases(run=run, split=Case.Split.HOLDOUT))
    spec = run.config.spec
    dev_judgments = candidates * len(dev) * run.repeats
    holdout_judgments = min(FINALISTS, candidates) * holdout_n * run.repeats
    notes = [
        "Every candidate is a new config version with its own hash: its runs are full runs, nothing comes from "
        "the cache.",
    ]
    price = prices.get(spec.get("model") or "")
    runs_usd: float | None = None
    if price is not None and dev:
        sample = Case.objects.filter(pk__in=[c.case_id for c in list(dev.values())[:20]])
        chars = [sum(map(len, build_messages(
            engine_case(case), template=spec["prompt_template"], criteria=spec["criteria"], policy=spec["policy"],
            output_kind=spec["output_kind"], guidance=spec.get("guidance", ""), examples=spec.get("examples") or (),
        ))) for case in sample]
        # Room for what a candidate adds: guidance and a few examples, about 1,500 characters.
        per_call = estimate_cost(price, sum(chars) // max(len(chars), 1) + 1500,
                                 int((spec.get("params") or {}).get("max_tokens", 1024)))
        runs_usd = per_call * (dev_judgments + holdout_judgments)
    if price is None:
        notes.append(f"{spec.get('model')} has no price: the candidate runs' cost is unknown.")
    if editor_usd is None:
        notes.append(f"The editor {editor.model} has no price: its call's cost is unknown.")
    return ProposalEstimate(
        editor_usd=None if editor_usd is None else Decimal(str(round(editor_usd, 6))),
        dev_judgments=dev_judgments,
        holdout_judgments=holdout_judgments,
        runs_usd=None if runs_usd is None else Decimal(str(round(runs_usd, 6))),
        notes=notes,
    )


def proposal_for_page(*, project: Project, proposal_id: int) -> Proposal:
    """The project's proposal (DoesNotExist for another project's, as for one that does not exist)."""
    return Proposal.objects.select_related("rubric", "run__config", "created_by", "decided_by").get(
        pk=proposal_id, rubric__project=project,
    )


def candidates_of(proposal: Proposal) -> QuerySet[ProposalCandidate]:
    return proposal.candidates.select_related("config__rubric", "dev_run__config__rubric",
                                              "holdout_run__config__rubric")


def runs_figures(runs: list[Run]) -> dict[str, Any]:
    """Figures over the cases of several runs of one config (a candidate's dev and holdout runs, disjoint
    case sets) as if one run: its agreement and interval, by split, and what the promotion rules read."""
    cases = case_frame(runs=runs)
    judgments = not_evaluated_judgments(cases=cases)
    cases_only = cases.drop(columns=["run_id"])
    figures = calibration_figures(judgments.drop(columns=["run_id"]), cases=cases_only)
    return {**figures, **evidence_figures(cases_only)}


def _split_agreement(figures: dict, split: str) -> tuple[float | None, list[float] | None, int]:
    part = (figures.get("by_split") or {}).get(split) or {}
    return part.get("agreement"), part.get("agreement_ci95"), int(part.get("n") or 0)


def prompt_diff(base_spec: dict, spec: dict) -> list[tuple[str, str]]:
    """What the candidate changes in the judge's messages, as (kind, line) of a unified diff on a placeholder
    case: "add", "del" or "ctx"."""
    case = {"input": "(the question)", "output": "(the answer)"}

    def lines(s: dict) -> list[str]:
        system, user = build_messages(
            case, template=s["prompt_template"], criteria=s["criteria"], policy=s["policy"],
            output_kind=s["output_kind"], guidance=s.get("guidance", ""), examples=s.get("examples") or (),
        )
        return (system + "\n\n" + user).splitlines()

    out = []
    for line in difflib.unified_diff(lines(base_spec), lines(spec), lineterm="", n=1):
        if line.startswith(("---", "+++", "@@")):
            continue
        kind = "add" if line.startswith("+") else "del" if line.startswith("-") else "ctx"
        out.append((kind, line[1:]))
    return out


@dataclass
class CandidateRow:
    candidate: ProposalCandidate
    diff: list[tuple[str, str]]
    dev_agreement: float | None
    dev_ci95: list[float] | None
    dev_n: int
    holdout_agreement: float | None
    holdout_ci95: list[float] | None
    holdout_n: int
    overfit_gap: float | None
    at_ceiling: bool
    rules: list[RuleResult]
    rules_pass: bool | None  # None: not judged on holdout, so not asked
    cost_usd: Decimal | None
    recommended: bool = False


def candidate_rows(*, proposal: Proposal) -> list[CandidateRow]:
    """The results table: each candidate's prompt diff, dev and holdout agreement with intervals, the overfit
    gap (dev minus holdout), the ceiling flag (100 % on dev: overfit, never recommended), whether the promotion
    rules would pass on its dev and holdout runs together, and its runs' cost. The recommended one is the
    finalist with the best holdout agreement among those whose rules pass and that are not at the ceiling."""
    base_spec = proposal.run.config.spec
    thresholds = rubric_thresholds(proposal.rubric)
    rows = []
    for candidate in candidates_of(proposal):
        runs = [r for r in (candidate.dev_run, candidate.holdout_run)
                if r is not None and r.status != Run.Status.QUEUED]
        figures = runs_figures(runs) if runs else {}
        dev_a, dev_ci, dev_n = _split_agreement(figures, Case.Split.DEV)
        hold_a, hold_ci, hold_n = _split_agreement(figures, Case.Split.HOLDOUT)
        rules: list[RuleResult] = []
        if candidate.holdout_run is not None and candidate.holdout_run.status == Run.Status.FINISHED:
            # As if kept: the newest version, not stale; judged by the rubric's own thresholds.
            rules = evaluate_rules(
                figures=figures, repeats=proposal.run.repeats, thresholds=thresholds, is_newest_config=True,
                stale_reasons=[], models=config_models(candidate.config.spec),
            )
        costs = [r.cost_usd for r in runs]
        unknown = any(r.unknown_cost_judgments for r in runs)
        rows.append(CandidateRow(
            candidate=candidate,
            diff=prompt_diff(base_spec, candidate.config.spec),
            dev_agreement=dev_a, dev_ci95=dev_ci, dev_n=dev_n,
            holdout_agreement=hold_a, holdout_ci95=hold_ci, holdout_n=hold_n,
            overfit_gap=None if dev_a is None or hold_a is None else dev_a - hold_a,
            at_ceiling=dev_a is not None and dev_a >= thresholds.agreement_ceiling,
            rules=rules,
            rules_pass=all(rule.met for rule in rules) if rules else None,
            cost_usd=None if unknown else sum(costs, Decimal(0)),
        ))
    eligible = [r for r in rows if r.rules_pass and not r.at_ceiling and r.holdout_agreement is not None]
    if eligible:
        max(eligible, key=lambda r: (r.holdout_agreement, -r.candidate.added_tokens)).recommended = True
    return rows


def finalists(*, candidates: list[ProposalCandidate]) -> list[ProposalCandidate]:
    """The best FINALISTS candidates by dev agreement (ties: fewer added tokens, then the editor's order);
    holdout plays no part in the choice."""
    scored = []
    for candidate in candidates:
        figures = runs_figures([candidate.dev_run]) if candidate.dev_run is not None else {}
        agreement = figures.get("agreement")
        scored.append((-(agreement if agreement is not None else -1.0), candidate.added_tokens, candidate.index,
                       candidate))
    scored.sort(key=lambda item: item[:3])
    return [item[3] for item in scored[:FINALISTS]]
