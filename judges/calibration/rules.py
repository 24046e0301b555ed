"""Promotion rules (DESIGN "Promotion"): pure checks of one run's evidence against a rubric's thresholds.

No ORM: the caller passes the figures from `judges.calibration.metrics.calibration_figures`, the run's repeats,
whether its config is the rubric's newest, and the reasons it is stale. Every rule is always
reported, met or not, so a refused promotion can show each failing rule with its number and threshold.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# Figures are ratios of integer counts, so one that is not exactly on a two-decimal threshold is at
# least 1 / (100 × judgments) away from it; this tolerance only absorbs float noise (a figure that
# went through 1 − x, or a threshold stored as 0.7 against 7 / 10), never a real difference.
_EPSILON = 1e-9


@dataclass(frozen=True)
class Thresholds:
    """DESIGN's defaults; a lead may change them per rubric (audited)."""

    min_cases: int = 30
    min_repeats: int = 2
    agreement_floor: float = 0.80
    agreement_ceiling: float = 1.00
    min_true_pass_rate: float = 0.70
    min_true_fail_rate: float = 0.70
    max_flip_rate: float = 0.05
    min_coverage: float = 0.95
    max_probe_moved: float | None = None  # for the later probes feature; None: no such rule

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RuleResult:
    key: str
    label: str
    met: bool
    value: Any  # the run's number (None when the figure is undefined), or the stale reasons
    threshold_text: str


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


def evaluate_rules(
    *,
    figures: dict,
    repeats: int,
    thresholds: Thresholds,
    is_newest_config: bool,
    stale_reasons: list[str],
    is_external: bool = False,
) -> list[RuleResult]:
    """One RuleResult per rule, in DESIGN's order. A missing or None figure fails its rule."""
    t = thresholds
    agreement = figures.get("agreement")
    if is_external:
        newest = RuleResult(
            "newest_config", "newest config", False, None,
            "an external config (imported verdicts) is never promotable",
        )
    else:
        newest = RuleResult(
            "newest_config", "newest config", bool(is_newest_config), None,
            "the run's config is the rubric's newest version",
        )
    results = [
        newest,
        RuleResult(
            "not_stale", "not stale", not stale_reasons, list(stale_reasons),
            "no case changed and no newer config since the run finished",
        ),
        RuleResult(
            "min_cases", "cases with a human verdict", _at_least(figures.get("n"), t.min_cases),
            figures.get("n"), f"≥ {_number(t.min_cases)}",
        ),
        RuleResult(
            "min_repeats", "repeats K", _at_least(repeats, t.min_repeats), repeats,
            f"≥ {_number(t.min_repeats)}",
        ),
        RuleResult(
            "agreement_floor", "agreement", _at_least(agreement, t.agreement_floor), agreement,
            f"≥ {_number(t.agreement_floor)}",
        ),
        RuleResult(
            "agreement_ceiling", "agreement", _below(agreement, t.agreement_ceiling), agreement,
            f"< {_number(t.agreement_ceiling)} (ceiling: 100 % means overfit or sycophantic)",
        ),
        RuleResult(
            "min_true_pass_rate", "true pass rate",
            _at_least(figures.get("true_pass_rate"), t.min_true_pass_rate),
            figures.get("true_pass_rate"), f"≥ {_number(t.min_true_pass_rate)}",
        ),
        RuleResult(
            "min_true_fail_rate", "true fail rate",
            _at_least(figures.get("true_fail_rate"), t.min_true_fail_rate),
            figures.get("true_fail_rate"), f"≥ {_number(t.min_true_fail_rate)}",
        ),
        RuleResult(
            "max_flip_rate", "flip rate", _at_most(figures.get("flip_rate"), t.max_flip_rate),
            figures.get("flip_rate"), f"≤ {_number(t.max_flip_rate)}",
        ),
        RuleResult(
            "min_coverage", "coverage", _at_least(figures.get("coverage"), t.min_coverage),
            figures.get("coverage"), f"≥ {_number(t.min_coverage)}",
        ),
    ]
    if t.max_probe_moved is not None:
        # Probes come later; until their figure exists in `figures` this rule fails, as any None does.
        results.append(
            RuleResult(
                "max_probe_moved", "probe verdicts moved",
                _at_most(figures.get("probe_moved"), t.max_probe_moved),
                figures.get("probe_moved"), f"≤ {_number(t.max_probe_moved)}",
            )
        )
    return results


def promotable(results: list[RuleResult]) -> bool:
    return all(result.met for result in results)
