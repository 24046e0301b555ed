"""The shared display filters: durations as a person reads them."""

from datetime import timedelta

import pytest

from evalhub.templatetags.display import duration


@pytest.mark.parametrize("value, shown", [
    (timedelta(seconds=105, microseconds=414864), "1 min 45 s"),
    (timedelta(minutes=3), "3 min"),
    (timedelta(hours=2, minutes=3, seconds=10), "2 h 3 min"),
    (timedelta(hours=1), "1 h"),
    (timedelta(seconds=42.4), "42 s"),
    (0.4, "0.4 s"),
    (3, "3 s"),
    (None, "—"),
    (-1, "—"),
])
def test_it_shows_durations_in_minutes_and_seconds(value, shown):
    assert duration(value) == shown
