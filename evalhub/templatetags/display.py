"""Filters every page shares: durations a person reads at a glance."""

from datetime import timedelta

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
