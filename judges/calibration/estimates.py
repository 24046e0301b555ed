"""The agent's pass rate on a run's traffic: judge verdicts on every case, corrected by a random human
audit sample (docs/estimates.md). Plain Python and numpy, no Django.

Words, per case i of the N cases of a run that have an output:
- f_i in [0, 1]: the fraction of its evaluated repeats that pass (a case with none gets the mean f);
- Y_i in {0, 1}: its human verdict (pass = 1), known only for the labeled drawn cases;
- pi_i^(d): its inclusion probability in draw d of the audit sample, min(1, c_d * ((1 - w_d) * u_i + w_d)),
  with u_i the judge's uncertainty on the case, w_d the draw's uniform share (1 for a uniform draw) and
  c_d the scale that makes the probabilities add up to the draw's budget;
- pi~_i: the probability that case i was drawn and labeled,
      pi~_i = sum_d pi_i^(d) * prod_{e<d} (1 - pi_i^(e)) * labeled_d / drawn_d.

The estimate, for a tuning weight lambda in [0, 1]:
      theta = lambda * mean(f over N) + (1/N) * sum over labeled drawn i of (Y_i - lambda * f_i) / pi~_i.

When every draw is uniform, pi~ is the same for every case and this is PPI++ (Angelopoulos, Duchi &
Zrnic 2024) exactly as `ppi_py.ppi_mean_ci` computes it with the n labeled cases on one side and the N - n
cases NOT labeled on the other (PPI's variance assumes the two sides independent):
      lambda = cov(Y, f_lab) / ((1 + n/N_u) * var([f_lab, f_unl]))          (cov ddof 0, var ddof 1)
      theta = lambda * mean(f_unl) + mean(Y - lambda * f_lab)
      Var(theta) = lambda^2 * var(f_unl) / N_u + var(Y - lambda * f_lab) / n  (ddof 0, N_u = N - n).
A census (every case labeled) is the humans' own mean. Its 95 % interval is not the Wald interval (which
collapses to a point when every label agrees) but the score interval with a continuity correction: every
rate t with |theta - t| - 1/(2n) <= 1.96 * sqrt(V(t)), where V(t) is Var(theta) with the labels' variance
var(Y) replaced by t(1 - t), the variance a true rate t would give them. At lambda = 0 it is Newcombe's
continuity-corrected Wilson interval of the humans' mean.
Otherwise (an active draw) it is the inverse-probability-weighted estimator of active inference (Zrnic &
Candès 2024): theta is the mean over all N cases of Z_i = A_i + lambda * B_i with A_i = xi_i * Y_i / pi~_i and
B_i = f_i * (1 - xi_i / pi~_i) (xi_i = 1 for a labeled drawn case), Var(theta) = var(Z) / N (ddof 0), and
lambda = -cov(A, B) / var(B), the value that minimises that variance; its interval is
theta +- 1.96 * sqrt(Var(theta)). Either lambda is clipped to [0, 1], every interval to [0, 1].
An estimate needs MIN_LABELS labeled drawn cases (or every case labeled): below that no interval covers
the true rate 93 % of the time at rates near 0 or 1 (docs/estimates.md, the coverage table).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

# One normal quantile for both estimates; the label-free correction (Rogan–Gladen) is the CI command's.
from judges.gate.rates import Z95

MIN_UNIFORM_SHARE = 0.2  # every active pi_i >= 0.2 * n / N: no case is left nearly impossible to draw
# An estimate (the headline or a category's) needs this many labeled drawn cases, or every case labeled.
MIN_LABELS = 30
ASSUMPTION = "Assumes the drawn cases were drawn at random, as recorded."


def uncertainty_from_repeats(f: np.ndarray) -> np.ndarray:
    """1 - |2f - 1|: 1 where the repeats split evenly, 0 where they all agree."""
    return 1.0 - np.abs(2.0 * f - 1.0)


def uncertainty_from_distance(distance: np.ndarray, scale: float) -> np.ndarray:
    """1 at the pass threshold, falling linearly to 0 at `scale` away from it (a score or a similarity)."""
    return np.clip(1.0 - np.abs(distance) / scale, 0.0, 1.0)


def inclusion_probabilities(uncertainty: np.ndarray, *, budget: int, uniform_share: float) -> tuple[np.ndarray, float]:
    """Each eligible case's probability of being drawn, and the scale c behind it.

    pi_i = min(1, c * ((1 - w) * u_i + w)), with c chosen so that the probabilities add up to the budget
    (cases capped at 1 give their excess to the others). w = 1 is a uniform draw: pi = n / N.
    """
    weight = (1.0 - uniform_share) * np.asarray(uncertainty, dtype=float) + uniform_share
    if budget >= len(weight):
        return np.ones(len(weight)), math.inf
    capped = np.zeros(len(weight), dtype=bool)
    while True:
        scale = (budget - capped.sum()) / weight[~capped].sum()
        newly = ~capped & (scale * weight >= 1.0)
        if not newly.any():
            return np.where(capped, 1.0, scale * weight), float(scale)
        capped |= newly


def probability_in_draw(uncertainty: np.ndarray, *, scale: float, uniform_share: float) -> np.ndarray:
    """pi_i^(d) of a stored draw, for any case (drawn in it or not)."""
    return np.minimum(1.0, scale * ((1.0 - uniform_share) * np.asarray(uncertainty, dtype=float) + uniform_share))


def drawn_and_labeled_probability(probabilities: np.ndarray, labeled_share: np.ndarray) -> np.ndarray:
    """pi~_i from an (cases x draws) matrix of pi_i^(d) and each draw's labeled_d / drawn_d."""
    not_before = np.cumprod(np.hstack([np.ones((len(probabilities), 1)), 1.0 - probabilities[:, :-1]]), axis=1)
    return (probabilities * not_before * labeled_share).sum(axis=1)


@dataclass(frozen=True)
class Estimate:
    theta: float
    variance: float
    lam: float
    ci95: list[float]


def _var0(x: np.ndarray) -> float:
    return float(np.var(x)) if len(x) else 0.0


def wald_interval(theta: float, variance: float) -> list[float]:
    half = Z95 * math.sqrt(max(variance, 0.0))
    return [max(0.0, theta - half), min(1.0, theta + half)]


def score_interval(theta: float, *, n: int, fixed: float, per_label: float) -> list[float]:
    """Every rate t with |theta - t| - 1/(2n) <= z * sqrt(fixed + (t(1 - t) + per_label) / n), clipped to
    [0, 1]: each bound is a root of (t - centre)^2 = z^2 (fixed + (t(1 - t) + per_label) / n) with the centre
    moved 1/(2n) outward (the continuity correction)."""
    z2, h = Z95 * Z95, 0.5 / n

    def root(centre: float, side: int) -> float:
        a, b, c = 1 + z2 / n, -(2 * centre + z2 / n), centre * centre - z2 * (fixed + per_label / n)
        return (-b + side * math.sqrt(max(b * b - 4 * a * c, 0.0))) / (2 * a)

    low = 0.0 if theta - h <= 0 else max(0.0, root(theta - h, -1))
    high = 1.0 if theta + h >= 1 else min(1.0, root(theta + h, 1))
    return [low, high]


def ppi_uniform(y: np.ndarray, f_labeled: np.ndarray, f_unlabeled: np.ndarray, lam: float | None = None) -> Estimate:
    """PPI++ for a uniform sample (ppi_py's ppi_mean_ci with `f_unlabeled` the cases not labeled; lam None
    tunes it as PPI++ does), with the continuity-corrected score interval. A census is the humans' mean."""
    n, big_n = len(y), len(f_unlabeled)
    if not big_n:
        lam = 0.0
    elif lam is None:
        spread = float(np.var(np.concatenate([f_labeled, f_unlabeled]), ddof=1))
        covariance = float(np.mean((y - y.mean()) * (f_labeled - f_labeled.mean())))
        lam = covariance / ((1 + n / big_n) * spread) if spread > 0 else 0.0
        lam = min(1.0, max(0.0, lam))
    judge_part = lam * float(f_unlabeled.mean()) if big_n else 0.0
    theta = judge_part + float((y - lam * f_labeled).mean())
    fixed = lam * lam * _var0(f_unlabeled) / big_n if big_n else 0.0
    variance = fixed + _var0(y - lam * f_labeled) / n
    # var(Y - lam f) = var(Y) - 2 lam cov(Y, f) + lam^2 var(f): the score interval puts t(1 - t) for var(Y).
    per_label = lam * lam * _var0(f_labeled) - 2 * lam * float(np.mean((y - y.mean()) * (f_labeled - f_labeled.mean())))
    return Estimate(theta, variance, lam, score_interval(theta, n=n, fixed=fixed, per_label=per_label))


def ppi_weighted(labeled: np.ndarray, y: np.ndarray, f_all: np.ndarray, pi: np.ndarray,
                 lam: float | None = None) -> Estimate:
    """The inverse-probability-weighted estimate over all N cases; `labeled` marks the labeled drawn
    cases, `y` and `pi` are their verdicts and pi~ (in the same order)."""
    big_n = len(f_all)
    a = np.zeros(big_n)
    a[labeled] = y / pi
    b = f_all.copy()
    b[labeled] = f_all[labeled] * (1.0 - 1.0 / pi)
    if lam is None:
        spread = _var0(b)
        lam = -float(np.mean((a - a.mean()) * (b - b.mean()))) / spread if spread > 0 else 0.0
        lam = min(1.0, max(0.0, lam))
    z = a + lam * b
    theta, variance = float(z.mean()), _var0(z) / big_n
    return Estimate(theta, variance, lam, wald_interval(theta, variance))


def humans_only(y: np.ndarray, pi: np.ndarray, *, uniform: bool) -> Estimate:
    """The Hájek mean of the labeled drawn cases (the plain mean when pi~ is equal), and its linearised
    variance sum((Y_i - theta)^2 / pi~_i^2) / (sum 1/pi~_i)^2 — var(Y)/n (ddof 0) for a uniform sample,
    whose interval is then the continuity-corrected Wilson interval (the census's)."""
    weights = 1.0 / pi
    theta = float((weights * y).sum() / weights.sum())
    variance = float((weights * weights * (y - theta) ** 2).sum() / weights.sum() ** 2)
    ci95 = score_interval(theta, n=len(y), fixed=0.0, per_label=0.0) if uniform else wald_interval(theta, variance)
    return Estimate(theta, variance, 0.0, ci95)


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))


@dataclass(frozen=True)
class Sample:
    """What the estimate reads, one entry per case of N (cases with an output).

    f: fraction of evaluated repeats that pass, NaN where none; category: the case's category;
    draw: the index of the draw that drew it, -1 if never drawn; human: 1.0 / 0.0 / NaN (no verdict yet);
    probabilities: (N x draws) pi_i^(d), read only for drawn cases; uniform: every draw was uniform.
    """

    f: np.ndarray
    category: np.ndarray
    draw: np.ndarray
    human: np.ndarray
    probabilities: np.ndarray
    uniform: bool


def _figures(sample: Sample, f_all: np.ndarray, labeled: np.ndarray, pi_tilde: np.ndarray,
             subset: np.ndarray | None = None) -> tuple[Estimate | None, Estimate | None]:
    """The estimate and the humans-only estimate within `subset` (all cases when None)."""
    if subset is not None:
        f_all, labeled, pi_tilde = f_all[subset], labeled[subset], pi_tilde[subset]
        human = sample.human[subset]
    else:
        human = sample.human
    y = human[labeled]
    if not len(y):
        return None, None
    pi = pi_tilde[labeled]
    if sample.uniform:
        estimate = ppi_uniform(y, f_all[labeled], f_all[~labeled])
    else:
        estimate = ppi_weighted(labeled, y, f_all, pi)
    return estimate, humans_only(y, pi, uniform=sample.uniform)


def enough_labels(labeled: np.ndarray) -> bool:
    """MIN_LABELS labeled drawn cases, or every case labeled (a census needs no judge)."""
    return int(labeled.sum()) >= min(MIN_LABELS, len(labeled))


def _labeled_share(sample: Sample, labeled: np.ndarray) -> np.ndarray:
    draws = sample.probabilities.shape[1]
    drawn = np.bincount(sample.draw[sample.draw >= 0], minlength=draws)
    done = np.bincount(sample.draw[labeled], minlength=draws)
    return np.divide(done, drawn, out=np.zeros(draws), where=drawn > 0)


def _pi_tilde(sample: Sample, labeled: np.ndarray) -> np.ndarray:
    pi = np.ones(len(sample.f))
    drawn = sample.draw >= 0
    if drawn.any():
        pi[drawn] = drawn_and_labeled_probability(sample.probabilities[drawn], _labeled_share(sample, labeled))
    return pi


def filled_f(f: np.ndarray) -> np.ndarray:
    """f with each case that has no evaluated repeat given the mean f (0.5 when none has one)."""
    known = ~np.isnan(f)
    return np.where(known, f, float(f[known].mean()) if known.any() else 0.5)


def estimate_at(sample: Sample, labeled: np.ndarray) -> Estimate | None:
    """The estimate counting only the `labeled` drawn cases (the interval's history replays this); None
    with too few of them."""
    if not enough_labels(labeled):
        return None
    return _figures(sample, filled_f(sample.f), labeled, _pi_tilde(sample, labeled))[0]


def _effective_labels(estimate: Estimate, human: Estimate, big_n: int) -> float | None:
    """sigma_H^2 / Var(theta), at most N: no judge is worth more labels than labeling every case (a census
    gives exactly N)."""
    spread = human.theta * (1.0 - human.theta)
    if spread <= 0 or estimate.variance <= 0:
        return None
    return min(float(big_n), spread / estimate.variance)


def pass_rate(sample: Sample) -> dict[str, Any]:
    """Every figure of the agent's pass rate, as plain JSON-ready values (docs/estimates.md)."""
    f_all = filled_f(sample.f)
    big_n = len(f_all)
    drawn = sample.draw >= 0
    labeled = drawn & ~np.isnan(sample.human)
    pending = drawn & np.isnan(sample.human)
    pi_tilde = _pi_tilde(sample, labeled)
    estimate, human = _figures(sample, f_all, labeled, pi_tilde)
    result: dict[str, Any] = {
        "estimate": None, "ci95": None, "method": ("uniform" if sample.uniform else "active") if drawn.any() else None,
        "lambda": None, "n_drawn": int(drawn.sum()), "n_labeled": int(labeled.sum()), "n_pending": int(pending.sum()),
        "N": big_n, "judge_pass_rate": float(f_all.mean()) if big_n else None,
        "human_only": {"estimate": None, "ci95": None}, "effective_labels": None,
        "provisional": None, "by_category": {}, "min_labels": min(MIN_LABELS, big_n),
    }
    if estimate is not None and human is not None and enough_labels(labeled):
        result.update({
            "estimate": _clip(estimate.theta), "ci95": estimate.ci95, "lambda": estimate.lam,
            "human_only": {"estimate": human.theta, "ci95": human.ci95},
            "effective_labels": _effective_labels(estimate, human, big_n),
        })
    if pending.any():
        result["provisional"] = {verdict: _bound(sample, f_all, drawn, pending, value)
                                 for verdict, value in (("all_pass", 1.0), ("all_fail", 0.0))}
    for category in sorted({str(c) for c in sample.category[drawn]}):
        within = sample.category == category
        count = int((labeled & within).sum())
        figures: dict[str, Any] = {"estimate": None, "ci95": None, "n_labeled": count}
        if enough_labels(labeled[within]):
            category_estimate, _ = _figures(sample, f_all, labeled, pi_tilde, within)
            if category_estimate is not None:
                figures.update(estimate=_clip(category_estimate.theta), ci95=category_estimate.ci95)
        result["by_category"][category] = figures
    return result


def _bound(sample: Sample, f_all: np.ndarray, drawn: np.ndarray, pending: np.ndarray, verdict: float) -> float:
    """The estimate if every pending drawn case had the given verdict."""
    completed = Sample(sample.f, sample.category, sample.draw, np.where(pending, verdict, sample.human),
                       sample.probabilities, sample.uniform)
    estimate, _ = _figures(completed, f_all, drawn, _pi_tilde(completed, drawn))
    assert estimate is not None  # every drawn case now has a verdict
    return _clip(estimate.theta)
