"""Filters for the calibration and run pages: percentages with one decimal, deltas in points, a run's cost."""

from django import template

from evalhub.templatetags.display import usd
from judges.calibration.selectors import pct as _pct
from judges.models import Run
from judges.runs.selectors import calls_by_judge

register = template.Library()


@register.filter
def pct(value: float | None) -> str:
    """0.8421 → "84.2 %"; None → "—"."""
    return _pct(value)


@register.filter
def points(value: float | None) -> str:
    """A difference of two fractions in percentage points, signed: 0.031 → "+3.1 pts"; None → "—"."""
    if value is None:
        return "—"
    return f"{value * 100:+.1f} pts"


@register.filter
def kappa(value: float | None) -> str:
    """κ with three decimals; "—" when undefined (the note beside it says why)."""
    return "—" if value is None else f"{value:.3f}"


@register.filter
def kappa_delta(value: float | None) -> str:
    """A difference of two κ, signed, three decimals; "—" when either is undefined."""
    return "—" if value is None else f"{value:+.3f}"


@register.filter
def run_cost(run: Run) -> str:
    """A run's cost as every page shows it (docs/judging.md, "Cost"): unknown is never shown as $0, and calls a
    killed worker made and never recorded are said, never left out of the total silently."""
    n = run.calls_not_recorded
    lost = f" + ≥ {n} call{'' if n == 1 else 's'} not recorded" if n else ""
    if run.unknown_cost_judgments:
        return (f"{usd(run.cost_usd)} + unpriced calls" if run.cost_usd else "unknown (model not priced)") + lost
    if not run.provider_calls:
        return f"$0{lost}" if lost else "$0 (no calls)"
    return usd(run.cost_usd) + lost


@register.filter
def run_calls_by_judge(run: Run) -> list[str]:
    """The run's calls and cost, one entry a judge ("primary 40 ($0.01)", "second opinion 12 ($0.02)"), for a
    config with more than one judge; [] otherwise (no query then). The page keeps each entry on one line."""
    spec = run.config.spec
    if not any(spec.get(part) for part in ("secondary", "fallback", "second_opinion", "adjudicator")):
        return []
    return [
        f"{role.replace('_', ' ')} {calls} ({'unpriced' if cost is None else usd(cost)})"
        for role, calls, cost in calls_by_judge(run=run)
    ]
