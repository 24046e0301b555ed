"""The shared display filters: durations, call counts and money as a person reads them."""

from datetime import timedelta
from decimal import Decimal

import pytest

from evalhub.templatetags.display import duration, span, usd


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


@pytest.mark.parametrize("value, shown", [
    (Decimal("1.005"), "$1.01"),  # from $1 up: two decimals, half up
    (Decimal("1234.5"), "$1,234.50"),
    (Decimal("1.005000"), "$1.01"),
    (Decimal("0.42"), "$0.42"),  # below $1: up to four decimals, at least two
    (Decimal("0.5"), "$0.50"),
    (Decimal("0.0042"), "$0.0042"),
    (Decimal("0.00729"), "$0.0073"),
    (0.012345, "$0.0123"),
    (Decimal("0.00004"), "< $0.0001"),
    (Decimal("0.000000"), "$0"),
    (0, "$0"),
    (None, "unknown"),
])
def test_it_shows_money_by_one_rule(value, shown):
    assert usd(value) == shown


def test_it_shows_a_count_or_a_range():
    assert (span((90, 90)), span((90, 120)), span((0, 1500))) == ("90", "90–120", "0–1,500")
