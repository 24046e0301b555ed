"""Where a monitor's windows start and how long they last (UTC days; weeks start on Monday). Plain Python."""

from datetime import UTC, datetime, timedelta

WEEK = "week"


def window_start(window: str, at: datetime) -> datetime:
    """The start of the window holding `at`."""
    day = at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return day - timedelta(days=day.weekday()) if window == WEEK else day


def window_length(window: str) -> timedelta:
    return timedelta(days=7 if window == WEEK else 1)
