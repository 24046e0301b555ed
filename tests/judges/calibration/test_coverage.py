"""Coverage of the intervals evalhub prints, by seeded simulation: a small subset of the grids of
benchmarks/bench_coverage.py (which runs them whole and prints the table of docs/estimates.md). No database.

The points are the hard ones: rates near 0 and 1, where a delta-method or Wald interval collapses to a point,
at the smallest n that still gets a figure, and the abstentions below it."""

import numpy as np
import pytest

from judges.calibration.estimates import MIN_LABELS, Sample, pass_rate
from judges.gate.rates import MIN_CASES, rogan_gladen

REPETITIONS = 400
# 400 repetitions: a true coverage of 95 % reads below 92 % about one time in 500 (binomial standard error 1.1 points).
FLOOR = 0.92


def _run_coverage(seed: int, *, big_n: int, n: int, rate: float) -> tuple[float | None, int]:
    """(coverage where not abstaining, abstentions) of the run estimate's interval; the judge's three repeats
    pass a truly passing answer 85 % of the time and a truly failing one 25 %."""
    rng = np.random.default_rng(seed)
    covered = made = 0
    for _ in range(REPETITIONS):
        truth = (rng.random(big_n) < rate).astype(float)
        f = rng.binomial(3, np.where(truth == 1, 0.85, 0.25)) / 3
        drawn = rng.choice(big_n, size=n, replace=False)
        draw = np.full(big_n, -1)
        draw[drawn] = 0
        human = np.full(big_n, np.nan)
        human[drawn] = truth[drawn]
        ci = pass_rate(Sample(f=f, category=np.full(big_n, "all", dtype=object), draw=draw, human=human,
                              probabilities=np.full((big_n, 1), n / big_n), uniform=True))["ci95"]
        if ci is not None:
            made += 1
            covered += ci[0] <= rate <= ci[1]
    return (covered / made if made else None), REPETITIONS - made


@pytest.mark.parametrize(("big_n", "n", "rate"), [(200, 50, 0.05), (200, 50, 0.95), (40, 40, 0.05), (20, 20, 0.8)])
def test_the_run_estimate_covers_at_the_edges(big_n, n, rate):
    coverage, abstained = _run_coverage(45, big_n=big_n, n=n, rate=rate)
    assert abstained == 0
    assert coverage >= FLOOR, coverage


def test_the_run_estimate_abstains_below_the_minimum_unless_every_case_is_labeled():
    # 10 of 200 labeled at 5 %: the humans mostly all fail and a Wald interval reads "0.0-0.0 %".
    assert _run_coverage(1, big_n=200, n=10, rate=0.05) == (None, REPETITIONS)
    assert MIN_LABELS == 30


def _ci_coverage(seed: int, *, n: int, evidence: int, rate: float) -> tuple[float | None, int]:
    """(coverage where not abstaining, abstentions) of the CI correction's interval; a judge with a true pass
    rate of 0.90 and a true fail rate of 0.85, evidence half passing."""
    rng = np.random.default_rng(seed)
    positives, covered, made = evidence // 2, 0, 0
    for _ in range(REPETITIONS):
        tp, fp = rng.binomial(positives, 0.9), rng.binomial(evidence - positives, 0.15)
        truly = rng.binomial(n, rate)
        passed = rng.binomial(truly, 0.9) + rng.binomial(n - truly, 0.15)
        figures = rogan_gladen(passed=int(passed), judged=n, tp=int(tp), fn=int(positives - tp), fp=int(fp),
                               tn=int(evidence - positives - fp))
        if figures["status"] == "ok":
            made += 1
            covered += figures["ci95"][0] <= rate <= figures["ci95"][1]
    return (covered / made if made else None), REPETITIONS - made


@pytest.mark.parametrize(("n", "evidence", "rate"), [(20, 30, 0.05), (20, 200, 0.95), (100, 200, 0.05)])
def test_the_ci_correction_covers_at_the_edges(n, evidence, rate):
    coverage, _ = _ci_coverage(45, n=n, evidence=evidence, rate=rate)
    assert coverage >= FLOOR, coverage


def test_the_ci_correction_says_too_few_cases_below_the_minimum():
    assert _ci_coverage(2, n=MIN_CASES - 1, evidence=200, rate=0.5) == (None, REPETITIONS)
    figures = rogan_gladen(passed=0, judged=1, tp=90, fn=10, fp=20, tn=80)
    assert (figures["status"], figures["estimate"], figures["ci95"]) == ("too_few_cases", None, None)


def test_the_ci_interval_does_not_collapse_at_0_or_1():
    # Before: every one of 20 cases passing read "100.0 % (95 % 100.0-100.0 %)".
    # A judge right 95 % of the time both ways: all 20 passing leaves room down to about 85 %, none up to 15 %.
    low, high = rogan_gladen(passed=20, judged=20, tp=95, fn=5, fp=5, tn=95)["ci95"]
    assert high == 1.0 and low == pytest.approx(0.8456, abs=1e-4)
    low, high = rogan_gladen(passed=0, judged=20, tp=95, fn=5, fp=5, tn=95)["ci95"]
    assert low == 0.0 and high == pytest.approx(0.1544, abs=1e-4)
