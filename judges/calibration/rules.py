"""Promotion rules (docs/promotion.md, "The rules"): pure checks of one run's evidence against a rubric's thresholds.

No ORM: the caller passes the figures from `judges.calibration.metrics.calibration_figures`, the run's repeats,
whether its config is the rubric's newest and deterministic, and the reasons it is stale. Every rule is
always reported, met or not (a rule that does not apply to this evidence as met, with `applies` false),
so a refused promotion can show each rule with the same number and each failing one with its threshold.

A deterministic config (contract checks only) cannot flip and may rightly agree 100 %: K ≥ 2, the flip
rule and the ceiling do not apply to it, and the human-agreement rules (cases, floor, true pass/fail
rates) apply unless the rubric's `require_human_evidence` is off — then coverage counts every judgment
(`coverage_all`), not only those of cases with a human verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from judges.engine.families import is_pinned_snapshot

# Figures are ratios of integer counts, so one that is not exactly on a two-decimal threshold is at
# least 1 / (100 × judgments) away from it; this tolerance only absorbs float noise (a figure that
# went through 1 − x, or a threshold stored as 0.7 against 7 / 10), never a real difference.
_EPSILON = 1e-9


@dataclass(frozen=True)
class Thresholds:
    """The defaults of docs/promotion.md; a lead may change them per rubric (audited)."""

    min_cases: int = 30
    min_repeats: int = 2
    agreement_floor: float = 0.80
    agreement_ceiling: float = 1.00
    min_true_pass_rate: float = 0.70
    min_true_fail_rate: float = 0.70
    max_flip_rate: float = 0.05
    min_coverage: float = 0.95
    max_probe_moved: float | None = None  # for the later probes feature; None: no such rule
    require_human_evidence: bool = True  # off: a deterministic judge needs no human labels
    min_cases_per_kind: int | None = None  # every calibration kind with at least this many cases; None: off
    require_pinned_models: bool = True  # every model of the evidence config is a dated snapshot
    refuse_judge_above_reviewers: bool = True  # refuse a judge that agrees with the labels more than reviewers do


@dataclass(frozen=True)
class RuleResult:
    key: str
    label: str
    met: bool
    value: Any  # the run's number (None when the figure is undefined), or the stale reasons
    threshold_text: str
    applies: bool = True  # False: not a rule for this evidence (a deterministic judge's flips), so met


def _number(x: float | int) -> str:
    """0.8 → "0.80", 30 → "30", 0.875 → "0.875": two decimals unless the threshold needs more."""
    if isinstance(x, int) and not isinstance(x, bool):
        return str(x)
    return f"{x:.2f}" if round(x, 2) == x else f"{x:g}"


def _at_least(value: float | int | None, threshold: float | int) -> bool:
    return value is not None and value >= threshold - _EPSILON


def _at_most(value: float | int | None, threshold: float | int) -> bool:
    return value is not None and value <= threshold + _EPSILON


def _below(value: float | int | None, threshold: float | int) -> bool:
    return value is not None and value < threshold - _EPSILON


# Calibration kinds (labeling.models.Case.Kind), in their documented order; repeated here to keep this module pure.
KINDS: tuple[str, ...] = ("good", "bad", "incomplete", "injection", "paraphrase")
DETERMINISTIC_NOTE = "does not apply: a deterministic judge cannot flip and may rightly agree 100 %"
NO_HUMAN_EVIDENCE_NOTE = "does not apply: this rubric's deterministic judge may be promoted without human evidence"
ABOVE_REVIEWERS_OFF_NOTE = "does not apply: a lead turned this rule off for the rubric"
ABOVE_REVIEWERS_RULE = (
    "not higher than the reviewers' agreement with each other on the same cases (one-sided 95 % test paired by "
    "case, on at least 20 cases with two or more labels)"
)


def needs_human_evidence(*, thresholds: Thresholds, deterministic: bool) -> bool:
    """Only a deterministic judge may go without human labels, and only where the lead said so."""
    return thresholds.require_human_evidence or not deterministic


def _not_applied(key: str, label: str, value: Any, note: str) -> RuleResult:
    return RuleResult(key, label, True, value, note, applies=False)


def evaluate_rules(
    *,
    figures: dict,
    repeats: int,
    thresholds: Thresholds,
    is_newest_config: bool,
    stale_reasons: list[str],
    newest_version: int | None = None,
    is_external: bool = False,
    deterministic: bool = False,
    models: tuple[str, ...] | list[str] = (),
) -> list[RuleResult]:
    """One RuleResult per rule, in the order of docs/promotion.md. A missing or None figure fails its rule.

    `figures` may carry `judge_above_reviewers` (metrics.judge_above_reviewers: the one decision of that
    rule; without it, or with fewer cases than the test needs, the rule does not apply), `coverage_all`
    (every judgment, labelled or not: the coverage rule's figure when no human evidence is needed) and
    `cases_by_kind` / `cases_by_kind_all` ({kind: cases with a human verdict / judged cases}, for
    min_cases_per_kind, read the same way). `models` are every model the config names (primary, secondary,
    embeddings), for the pinned-snapshot rule.
    """
    t = thresholds
    agreement = figures.get("agreement")
    human = needs_human_evidence(thresholds=t, deterministic=deterministic)
    if is_external:
        newest = RuleResult(
            "newest_config", "newest config", False, None,
            "an external config (imported verdicts) is never promotable",
        )
    else:
        # Its value names the newer kept version (a candidate) when there is one.
        newest = RuleResult(
            "newest_config", "newest config", bool(is_newest_config), None if is_newest_config else newest_version,
            "the run's config is the rubric's newest kept version",
        )

    def human_rule(key: str, label: str, value: Any, met: bool, threshold: str) -> RuleResult:
        if human:
            return RuleResult(key, label, met, value, threshold)
        return _not_applied(key, label, value, NO_HUMAN_EVIDENCE_NOTE)

    def model_rule(key: str, label: str, value: Any, met: bool, threshold: str) -> RuleResult:
        if deterministic:
            return _not_applied(key, label, value, DETERMINISTIC_NOTE)
        return RuleResult(key, label, met, value, threshold)

    coverage = figures.get("coverage") if human else figures.get("coverage_all")
    results = [
        newest,
        RuleResult(
            "not_stale", "not stale", not stale_reasons, list(stale_reasons),
            "no case changed, the criteria unchanged and no newer policy version since the run finished",
        ),
        human_rule(
            "min_cases", "cases with a human verdict", figures.get("n"),
            _at_least(figures.get("n"), t.min_cases), f"≥ {_number(t.min_cases)}",
        ),
        model_rule(
            "min_repeats", "repeats K", repeats, _at_least(repeats, t.min_repeats), f"≥ {_number(t.min_repeats)}",
        ),
        human_rule(
            "agreement_floor", "agreement", agreement, _at_least(agreement, t.agreement_floor),
            f"≥ {_number(t.agreement_floor)}",
        ),
        model_rule(
            "agreement_ceiling", "agreement", agreement, _below(agreement, t.agreement_ceiling),
            f"< {_number(t.agreement_ceiling)} (ceiling: 100 % means overfit or sycophantic)",
        ),
        human_rule(
            "min_true_pass_rate", "true pass rate", figures.get("true_pass_rate"),
            _at_least(figures.get("true_pass_rate"), t.min_true_pass_rate), f"≥ {_number(t.min_true_pass_rate)}",
        ),
        human_rule(
            "min_true_fail_rate", "true fail rate", figures.get("true_fail_rate"),
            _at_least(figures.get("true_fail_rate"), t.min_true_fail_rate), f"≥ {_number(t.min_true_fail_rate)}",
        ),
        model_rule(
            "max_flip_rate", "flip rate", figures.get("flip_rate"),
            _at_most(figures.get("flip_rate"), t.max_flip_rate), f"≤ {_number(t.max_flip_rate)}",
        ),
        RuleResult(
            "min_coverage", "coverage" if human else "coverage (all judgments)",
            _at_least(coverage, t.min_coverage), coverage, f"≥ {_number(t.min_coverage)}",
        ),
    ]
    if t.require_pinned_models:
        aliases = [model for model in models if not is_pinned_snapshot(model)]
        results.append(
            RuleResult(
                "pinned_models", "models pinned", not aliases, aliases,
                "every model (primary, secondary, embeddings) is a dated snapshot, not an alias",
            )
        )
    results.append(_above_reviewers_rule(figures.get("judge_above_reviewers"), t, human=human))
    if t.max_probe_moved is not None:
        # Probes come later; until their figure exists in `figures` this rule fails, as any None does.
        results.append(
            RuleResult(
                "max_probe_moved", "probe verdicts moved",
                _at_most(figures.get("probe_moved"), t.max_probe_moved),
                figures.get("probe_moved"), f"≤ {_number(t.max_probe_moved)}",
            )
        )
    if t.min_cases_per_kind is not None:
        counts = figures.get("cases_by_kind" if human else "cases_by_kind_all") or {}
        short = [kind for kind in KINDS if counts.get(kind, 0) < t.min_cases_per_kind]
        results.append(
            RuleResult(
                "min_cases_per_kind",
                "cases of each calibration kind" + ("" if human else " (all judged cases)"), not short,
                {kind: counts.get(kind, 0) for kind in KINDS},
                f"≥ {t.min_cases_per_kind} of each kind ({', '.join(KINDS)})",
            )
        )
    return results


def _above_reviewers_rule(test: dict | None, t: Thresholds, *, human: bool) -> RuleResult:
    key, label = "judge_above_reviewers", "judge's agreement with each label"
    if not human:
        return _not_applied(key, label, test, NO_HUMAN_EVIDENCE_NOTE)
    if not t.refuse_judge_above_reviewers:
        return _not_applied(key, label, test, ABOVE_REVIEWERS_OFF_NOTE)
    if test is None or test["note"]:
        reason = test["note"] if test else "no reviewers' labels were read"
        return _not_applied(key, label, test, f"does not apply: {reason}")
    return RuleResult(key, label, not test["above"], test, ABOVE_REVIEWERS_RULE)


def config_models(spec: dict) -> list[str]:
    """Every model a judge config may call: its own, its secondary's and its semantic layer's embeddings model."""
    named = [spec.get("model"), *(
        (spec.get(part) or {}).get("model")
        for part in ("secondary", "semantic", "fallback", "second_opinion", "adjudicator")
    )]
    return [model for model in named if model]


def promotable(results: list[RuleResult]) -> bool:
    return all(result.met for result in results)


# ---- thresholds looser than the defaults -------------------------------------------------------------

# (field, direction): "min" thresholds are looser when lower, "max" ones when higher.
_LOOSER_WHEN: dict[str, str] = {
    "min_cases": "lower", "min_repeats": "lower", "agreement_floor": "lower", "agreement_ceiling": "higher",
    "min_true_pass_rate": "lower", "min_true_fail_rate": "lower", "max_flip_rate": "higher",
    "min_coverage": "lower",
}


def relaxed_thresholds(thresholds: Thresholds) -> list[tuple[str, Any, Any]]:
    """(field, value, default) for each threshold looser than its default, in Thresholds' order.

    Turning off `require_human_evidence`, `require_pinned_models` or `refuse_judge_above_reviewers` counts
    as relaxed; an optional rule left off (probes, kinds) does not: that is the default.
    """
    defaults = Thresholds()
    out = []
    for name, direction in _LOOSER_WHEN.items():
        value, default = getattr(thresholds, name), getattr(defaults, name)
        looser = value < default - _EPSILON if direction == "lower" else value > default + _EPSILON
        if looser:
            out.append((name, value, default))
    if not thresholds.require_human_evidence:
        out.append(("require_human_evidence", False, True))
    if not thresholds.require_pinned_models:
        out.append(("require_pinned_models", False, True))
    if not thresholds.refuse_judge_above_reviewers:
        out.append(("refuse_judge_above_reviewers", False, True))
    return out
