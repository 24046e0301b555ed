"""The monitor's pure estimators (judges/monitoring/estimates.py): checked against the run estimate they reuse, a
hand-worked difference, the drift rule, and a seeded simulation (the full one: benchmarks/bench_monitoring.py)."""

import math

import numpy as np
import pytest

from judges.calibration.estimates import ppi_uniform
from judges.calibration.metrics import wilson_interval
from judges.monitoring.estimates import change, drift, pooled, suggested_sample, window_figures
from judges.monitoring.simulation import simulate


def _window(rng, n=1000, rate=0.8, probability=0.15):
    y = (rng.random(n) < rate).astype(float)
    f = np.where(y == 1, rng.random(n) < 0.95, rng.random(n) < 0.4).astype(float)
    audited = rng.random(n) < probability
    return f, audited, np.where(audited, y, np.nan), np.full(n, probability)


def test_it_is_ppi_plus_plus_on_the_labeled_audit_cases():
    f, audited, human, pi = _window(np.random.default_rng(1))
    figures = window_figures(f=f, audited=audited, human=human, probability=pi)
    # The run estimate's rule (docs/estimates.md): the unlabeled side is the cases not drawn.
    reference = ppi_uniform(human[audited], f[audited], f[~audited])
    assert figures.estimate == pytest.approx(reference.theta)
    assert figures.variance == pytest.approx(reference.variance)
    assert figures.raw == pytest.approx(f.mean())
    # Its interval: Wilson's at the effective number of labels theta (1 - theta) / Var.
    n_eff = reference.theta * (1 - reference.theta) / reference.variance
    assert figures.ci95 == pytest.approx(wilson_interval(reference.theta, n_eff))
    assert figures.labeled == figures.drawn == audited.sum() and figures.pending == 0


def test_it_is_provisional_while_labels_are_pending():
    f, audited, human, pi = _window(np.random.default_rng(2))
    pending = np.flatnonzero(audited)[:10]
    human[pending] = np.nan
    figures = window_figures(f=f, audited=audited, human=human, probability=pi)
    assert figures.pending == 10 and figures.labeled == audited.sum() - 10
    assert figures.provisional["all_fail"] < figures.provisional["all_pass"]


def test_a_difference_is_worse_only_when_its_interval_excludes_zero():
    rng = np.random.default_rng(3)
    a = window_figures(**dict(zip(("f", "audited", "human", "probability"), _window(rng, rate=0.8), strict=True)))
    b = window_figures(**dict(zip(("f", "audited", "human", "probability"), _window(rng, rate=0.8), strict=True)))
    same = change(b, [a])
    # By hand: the difference of the estimates, +-1.96 sqrt(sum of the variances).
    half = 1.959963984540054 * math.sqrt(a.variance + b.variance)
    assert same.difference == pytest.approx(b.estimate - a.estimate)
    assert same.ci95 == pytest.approx([same.difference - half, same.difference + half])
    assert same.worse == (same.ci95[1] < 0)
    c = window_figures(**dict(zip(("f", "audited", "human", "probability"), _window(rng, rate=0.55), strict=True)))
    assert change(c, [a, b]).worse


def test_a_baseline_weighs_its_windows_by_their_cases():
    rng = np.random.default_rng(4)
    a = window_figures(**dict(zip(("f", "audited", "human", "probability"), _window(rng, n=1000), strict=True)))
    b = window_figures(**dict(zip(("f", "audited", "human", "probability"), _window(rng, n=3000), strict=True)))
    estimate, variance = pooled([a, b])
    assert estimate == pytest.approx((1000 * a.estimate + 3000 * b.estimate) / 4000)
    assert variance == pytest.approx((0.25**2) * a.variance + (0.75**2) * b.variance)


def test_drift_fires_by_the_drift_checks_rule():
    # 20 cases, 12 agreeing: Wilson upper bound 0.78 < 0.80.
    f = np.array([1.0] * 20)
    human = np.array([1.0] * 12 + [0.0] * 8)
    assert drift(f=f, human=human, floor=0.8).fires
    # 19 such cases are too few to say.
    assert not drift(f=f[:19], human=np.array([1.0] * 11 + [0.0] * 8), floor=0.8).fires
    assert not drift(f=f, human=np.array([1.0] * 19 + [0.0]), floor=0.8).fires


def test_the_share_that_would_have_fit():
    # $10 spent on the first 1,000 of 2,000 cases at sample 0.5: $20 for the day; a $5 cap fits a quarter of it.
    assert suggested_sample(sample=0.5, spent_usd=10, cap_usd=5, covered_cases=1000,
                            window_cases=2000) == pytest.approx(0.125)


def test_the_seeded_simulation_holds_its_promises():
    """The issue's scenario, 150 repeats here (500 in the benchmark): coverage, power by day 9, false alarms."""
    tally = simulate(150, seed=7)
    assert (tally.covered / tally.repeats).min() >= 0.9
    assert (tally.covered.sum() / (tally.repeats * len(tally.covered))) >= 0.94
    assert tally.flagged_by_day9 / tally.repeats >= 0.8
    assert tally.false_alarms / tally.comparisons <= 0.05
    # The judge's raw rate hides most of the drop; the corrected one does not.
    assert tally.raw[6] / tally.repeats - tally.raw[7] / tally.repeats < 0.03
    assert tally.corrected[6] / tally.repeats - tally.corrected[7] / tally.repeats > 0.07
