"""Filters every page shares: durations and money a person reads at a glance."""

from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal

from django import template

register = template.Library()


@register.filter
def duration(value: timedelta | float | int | None) -> str:
    """A timedelta or seconds as "1 min 45 s", "2 h 3 min", "0.4 s"; "—" for None or a negative value."""
    if value is None:
        return "—"
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 0:
        return "—"
    if seconds < 10:
        return f"{seconds:.1f} s".replace(".0 s", " s")
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    return f"{secs} s"


@register.filter
def span(bounds: tuple[int, int]) -> str:
    """(at least, at most) as "90" when they are one number, "90–120" when they are a range."""
    low, high = bounds
    return f"{low:,}" if low == high else f"{low:,}–{high:,}"


@register.filter
def usd(value: Decimal | float | int | None) -> str:
    """Dollars by one rule on every page (docs/judging.md, "Cost"): two decimals from $1 up ("$1.01"), up to
    four below it ("$0.42", "$0.0042"), "$0" for nothing, "< $0.0001" for less than shows; "unknown" for None.
    Machine-read outputs (the CI command's JSON, the APIs) keep raw numbers."""
    if value is None:
        return "unknown"
    amount = Decimal(str(value))
    if amount == 0:
        return "$0"
    if abs(amount) >= 1:
        return f"${amount.quantize(Decimal('0.01'), ROUND_HALF_UP):,}"
    shown = amount.quantize(Decimal("0.0001"), ROUND_HALF_UP)
    if shown == 0:
        return "< $0.0001"
    text = f"{shown:f}".rstrip("0")
    return f"${text}{'0' * (2 - len(text.split('.')[1]))}"
