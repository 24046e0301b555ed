"""Filters for the calibration pages: percentages with one decimal, deltas in points."""

from django import template

from judges.calibration.selectors import pct as _pct

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
