"""The agent's pass rate (judges.calibration.estimates): against ppi_py, the reference implementation of
PPI++; hand-worked probabilities; coverage by seeded simulation. No database."""


import numpy as np
import pytest
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

from judges.calibration.estimates import (
    MIN_LABELS,
    Z95,
    Sample,
    drawn_and_labeled_probability,
    inclusion_probabilities,
    pass_rate,
    ppi_uniform,
    ppi_weighted,
    uncertainty_from_repeats,
)


def _random_run(rng: np.random.Generator, big_n: int, n: int):
    """f over N cases (3 repeats of a judge that leans to pass) and human verdicts on n drawn uniformly."""
    truth = rng.random(big_n) < 0.6
    f = rng.binomial(3, np.where(truth, 0.85, 0.35)) / 3
    drawn = rng.choice(big_n, size=n, replace=False)
    return f, truth.astype(float), drawn


def _uniform_sample(f, truth, drawn, categories=None, pending=()):
    big_n = len(f)
    draw = np.full(big_n, -1)
    draw[drawn] = 0
    human = np.full(big_n, np.nan)
    human[drawn] = truth[drawn]
    human[list(pending)] = np.nan
    probabilities = np.full((big_n, 1), len(drawn) / big_n)
    category = np.array(categories if categories is not None else ["all"] * big_n, dtype=object)
    return Sample(f=f, category=category, draw=draw, human=human, probabilities=probabilities, uniform=True)


@pytest.mark.parametrize("seed", range(8))
def test_it_equals_ppi_py_for_a_uniform_sample(seed):
    rng = np.random.default_rng(seed)
    big_n, n = int(rng.integers(200, 3000)), int(rng.integers(20, 150))
    f, truth, drawn = _random_run(rng, big_n, n)
    figures = pass_rate(_uniform_sample(f, truth, drawn))
    # Yhat_unlabeled is f over the N - n cases NOT labeled (docs/estimates.md): PPI assumes the sides independent.
    y, yhat, unlabeled = truth[drawn], f[drawn], np.delete(f, drawn)
    expected = float(ppi_mean_pointestimate(y, yhat, unlabeled)[0])
    low, high = ppi_mean_ci(y, yhat, unlabeled, alpha=0.05)
    assert figures["estimate"] == pytest.approx(expected, abs=1e-9)
    # The variance is ppi_py's (its Wald half-width); the interval printed is the score interval around it.
    estimate = ppi_uniform(y, yhat, unlabeled)
    assert Z95 * np.sqrt(estimate.variance) == pytest.approx((float(high[0]) - float(low[0])) / 2, abs=1e-9)
    assert figures["ci95"][0] <= figures["estimate"] <= figures["ci95"][1]
    assert 0.0 <= figures["lambda"] <= 1.0
    assert figures["n_labeled"] == n and figures["N"] == big_n and figures["n_pending"] == 0


@pytest.mark.parametrize("lam", [0.0, 1.0])
def test_it_gives_the_classical_interval_at_lambda_0_and_plain_ppi_at_1(lam):
    rng = np.random.default_rng(7)
    f, truth, drawn = _random_run(rng, 1000, 80)
    y, yhat, unlabeled = truth[drawn], f[drawn], np.delete(f, drawn)
    estimate = ppi_uniform(y, yhat, unlabeled, lam=lam)
    if lam == 0.0:
        assert estimate.theta == pytest.approx(y.mean(), abs=1e-12)
        assert estimate.variance == pytest.approx(y.var() / len(y), abs=1e-12)
    else:
        assert estimate.theta == pytest.approx(unlabeled.mean() + (y - yhat).mean(), abs=1e-12)
    low, high = ppi_mean_ci(y, yhat, unlabeled, alpha=0.05, lam=lam)
    assert Z95 * np.sqrt(estimate.variance) == pytest.approx((high[0] - low[0]) / 2, abs=1e-9)


def _newcombe(successes: int, n: int) -> list[float]:
    """Newcombe's (1998) closed form of the continuity-corrected Wilson interval, method 4."""
    p, z2 = successes / n, Z95 * Z95
    low = (2 * n * p + z2 - 1 - Z95 * np.sqrt(z2 - 2 - 1 / n + 4 * p * (n * (1 - p) + 1))) / (2 * (n + z2))
    high = (2 * n * p + z2 + 1 + Z95 * np.sqrt(z2 + 2 - 1 / n + 4 * p * (n * (1 - p) - 1))) / (2 * (n + z2))
    return [0.0 if successes == 0 else max(0.0, low), 1.0 if successes == n else min(1.0, high)]


@pytest.mark.parametrize(("successes", "n"), [(0, 30), (1, 30), (17, 40), (40, 40), (29, 30), (81, 200)])
def test_at_lambda_0_the_interval_is_newcombes_continuity_corrected_wilson(successes, n):
    y = np.array([1.0] * successes + [0.0] * (n - successes))
    estimate = ppi_uniform(y, y, np.array([0.5] * 10), lam=0.0)
    assert estimate.ci95 == pytest.approx(_newcombe(successes, n), abs=1e-12)
    # Hand-worked: 0 of 30 gives [0, (z^2 + 1 + z sqrt(z^2 + 2 - 1/30)) / (2 (30 + z^2))]
    #   = [0, (3.84146 + 1 + 1.95996 * 2.41002) / 67.68292] = [0, 9.56503 / 67.68292] = [0, 0.141320].
    if (successes, n) == (0, 30):
        assert estimate.ci95 == pytest.approx([0.0, 0.141320], abs=1e-6)


def test_a_census_is_the_humans_own_mean_and_interval_never_narrower_worth_exactly_n():
    # The bug this fixes: with all 40 cases labeled, the judge's verdicts on the same cases were counted again
    # as an independent unlabeled sample: a narrower interval and "worth 73 labels" out of 40 cases.
    rng = np.random.default_rng(45)
    f, truth, _ = _random_run(rng, 40, 0)
    figures = pass_rate(_uniform_sample(f, truth, np.arange(40)))
    assert figures["estimate"] == pytest.approx(truth.mean(), abs=1e-12)
    assert figures["ci95"] == pytest.approx(figures["human_only"]["ci95"], abs=1e-12)
    assert figures["lambda"] == 0.0 and figures["effective_labels"] == pytest.approx(40)


def test_worth_in_labels_never_exceeds_the_cases():
    for seed in range(40):
        rng = np.random.default_rng(seed)
        big_n = int(rng.integers(40, 120))
        f, truth, drawn = _random_run(rng, big_n, int(rng.integers(MIN_LABELS, big_n + 1)))
        worth = pass_rate(_uniform_sample(truth * 0.9 + f * 0.1, truth, drawn))["effective_labels"]
        assert worth is None or worth <= big_n


def test_too_few_labels_give_no_estimate_and_say_how_many_are_needed():
    rng = np.random.default_rng(9)
    f, truth, drawn = _random_run(rng, 40, MIN_LABELS - 1)
    figures = pass_rate(_uniform_sample(f, truth, drawn))
    assert figures["estimate"] is None and figures["ci95"] is None and figures["effective_labels"] is None
    assert (figures["n_labeled"], figures["min_labels"]) == (MIN_LABELS - 1, MIN_LABELS)
    # Every case of a small run labeled is a census: it needs no more.
    f, truth, _ = _random_run(rng, 12, 0)
    assert pass_rate(_uniform_sample(f, truth, np.arange(12)))["estimate"] == pytest.approx(truth.mean())


def test_the_weighted_estimate_equals_the_uniform_one_at_equal_probabilities():
    rng = np.random.default_rng(3)
    f, truth, drawn = _random_run(rng, 500, 50)
    labeled = np.zeros(500, dtype=bool)
    labeled[drawn] = True
    weighted = ppi_weighted(labeled, truth[labeled], f, np.full(50, 50 / 500), lam=0.6)
    # The weighted estimator's B_i over all N cases is the uniform one's f over every case (PPI's first form).
    assert weighted.theta == pytest.approx(0.6 * f.mean() + (truth[labeled] - 0.6 * f[labeled]).mean(), abs=1e-12)


def test_it_gives_effective_labels_equal_to_the_labeled_count_at_lambda_0():
    # A judge that says nothing (constant f) gets lambda 0; then the estimate is the humans' mean.
    rng = np.random.default_rng(5)
    truth = (rng.random(400) < 0.5).astype(float)
    drawn = rng.choice(400, size=60, replace=False)
    figures = pass_rate(_uniform_sample(np.full(400, 0.5), truth, drawn))
    assert figures["ci95"] == pytest.approx(figures["human_only"]["ci95"], abs=1e-12)
    assert figures["lambda"] == 0.0
    assert figures["effective_labels"] == pytest.approx(60, abs=1e-9)
    assert figures["estimate"] == pytest.approx(figures["human_only"]["estimate"], abs=1e-12)


def test_an_informative_judge_is_worth_more_labels_than_were_given():
    rng = np.random.default_rng(11)
    f, truth, drawn = _random_run(rng, 5000, 100)
    figures = pass_rate(_uniform_sample(f, truth, drawn))
    assert figures["effective_labels"] > 100
    width = figures["ci95"][1] - figures["ci95"][0]
    human_width = figures["human_only"]["ci95"][1] - figures["human_only"]["ci95"][0]
    assert width < human_width


def test_pending_cases_give_provisional_bounds_and_stay_out_of_the_estimate():
    rng = np.random.default_rng(2)
    f, truth, drawn = _random_run(rng, 800, 60)
    pending = drawn[:15]
    figures = pass_rate(_uniform_sample(f, truth, drawn, pending=pending))
    assert (figures["n_drawn"], figures["n_labeled"], figures["n_pending"]) == (60, 45, 15)
    # The labeled part of a uniform sample is a uniform sample: the estimate uses just those 45.
    expected = float(ppi_mean_pointestimate(truth[drawn[15:]], f[drawn[15:]], np.delete(f, drawn[15:]))[0])
    assert figures["estimate"] == pytest.approx(expected, abs=1e-9)
    bounds = figures["provisional"]
    assert bounds["all_fail"] < figures["estimate"] < bounds["all_pass"]
    all_pass = truth.copy()
    all_pass[pending] = 1.0
    assert bounds["all_pass"] == pytest.approx(
        float(ppi_mean_pointestimate(all_pass[drawn], f[drawn], np.delete(f, drawn))[0]))


def test_categories_need_the_same_labeled_drawn_cases():
    rng = np.random.default_rng(4)
    f, truth, _ = _random_run(rng, 600, 0)
    categories = ["policy"] * 300 + ["tools"] * 300
    drawn = np.concatenate([np.arange(0, MIN_LABELS), np.arange(300, 300 + MIN_LABELS - 1)])
    figures = pass_rate(_uniform_sample(f, truth, drawn, categories=categories))
    policy, tools = figures["by_category"]["policy"], figures["by_category"]["tools"]
    assert policy["n_labeled"] == MIN_LABELS and policy["estimate"] is not None
    expected = float(ppi_mean_pointestimate(truth[:MIN_LABELS], f[:MIN_LABELS], f[MIN_LABELS:300])[0])
    assert policy["estimate"] == pytest.approx(min(1.0, max(0.0, expected)), abs=1e-9)
    assert tools == {"estimate": None, "ci95": None, "n_labeled": MIN_LABELS - 1}


def test_nothing_labeled_gives_only_the_judges_rate():
    figures = pass_rate(_uniform_sample(np.array([1.0, 0.0, np.nan, 1.0]), np.ones(4), np.array([], dtype=int)))
    assert figures["estimate"] is None and figures["ci95"] is None and figures["method"] is None
    assert figures["judge_pass_rate"] == pytest.approx(2 / 3)  # the case with no repeat gets the mean f


def test_two_uniform_draws_give_every_case_the_same_probability():
    # N = 100: 20 drawn (pi 0.2), then 10 of the other 80 (pi 0.125); 15 and 5 of them labeled:
    # pi~ = 0.2 * 15/20 + 0.8 * 0.125 * 5/10 = 0.15 + 0.05 = 0.2 = 20 labeled / 100.
    probabilities = np.array([[0.2, 0.125]] * 3)
    assert drawn_and_labeled_probability(probabilities, np.array([0.75, 0.5])) == pytest.approx([0.2] * 3)


def test_active_probabilities_add_up_to_the_budget_with_a_uniform_floor():
    rng = np.random.default_rng(0)
    uncertainty = rng.random(1000) ** 4
    uncertainty[:5] = 1.0
    pi, scale = inclusion_probabilities(uncertainty, budget=600, uniform_share=0.2)
    assert pi.sum() == pytest.approx(600)
    assert pi.max() <= 1.0 and (pi[:5] == 1.0).all()  # the most uncertain cases are capped, others take the rest
    assert pi.min() >= 0.2 * 600 / 1000
    uncapped = pi < 1.0
    assert uncapped.sum() > 500
    assert scale * (0.8 * uncertainty[uncapped] + 0.2) == pytest.approx(pi[uncapped])  # proportional to the weight
    uniform, _ = inclusion_probabilities(uncertainty, budget=300, uniform_share=1.0)
    assert uniform == pytest.approx(np.full(1000, 0.3))


# Coverage by simulation: a superpopulation where 65 % of answers truly pass. Easy cases (80 %, 74 % of
# them truly pass): the judge's five repeats agree with the truth 97 % of the time. Hard cases (20 %, 30 %
# of them truly pass): its repeats pass 60 % of the time whatever the truth. So the judge is too generous
# (it passes about 70 %), and its split repeats say where it errs.
TRUE_RATE, N_CASES, BUDGET, REPETITIONS, REPEATS = 0.65, 4000, 250, 1000, 5


def _population(rng):
    hard = rng.random(N_CASES) < 0.2
    truth = rng.random(N_CASES) < np.where(hard, 0.3, (TRUE_RATE - 0.2 * 0.3) / 0.8)
    repeat_pass = np.where(hard, 0.6, np.where(truth, 0.97, 0.03))
    return rng.binomial(REPEATS, repeat_pass) / REPEATS, truth.astype(float)


def _active_sample(rng, f, truth):
    pi, _ = inclusion_probabilities(uncertainty_from_repeats(f), budget=BUDGET, uniform_share=0.2)
    drawn = rng.random(N_CASES) < pi
    draw = np.where(drawn, 0, -1)
    human = np.where(drawn, truth, np.nan)
    return Sample(f=f, category=np.full(N_CASES, "all", dtype=object), draw=draw, human=human,
                  probabilities=pi[:, None], uniform=False)


def test_the_interval_covers_the_true_rate_95_percent_of_the_time_uniform_and_active():
    rng = np.random.default_rng(20261202)
    covered = {"uniform": 0, "active": 0}
    widths: dict[str, list[float]] = {"uniform": [], "active": []}
    judge_rates = []
    for _ in range(REPETITIONS):
        f, truth = _population(rng)
        judge_rates.append(f.mean())
        drawn = rng.choice(N_CASES, size=BUDGET, replace=False)
        samples = {"uniform": _uniform_sample(f, truth, drawn), "active": _active_sample(rng, f, truth)}
        for method, sample in samples.items():
            low, high = pass_rate(sample)["ci95"]
            covered[method] += low <= TRUE_RATE <= high
            widths[method].append(high - low)
    assert np.mean(judge_rates) > TRUE_RATE + 0.04  # the judge alone would overstate the agent
    assert 0.93 <= covered["uniform"] / REPETITIONS <= 0.97, covered
    assert 0.93 <= covered["active"] / REPETITIONS <= 0.97, covered
    # The judge's uncertainty says where it errs, so labels spent there narrow the interval.
    assert np.mean(widths["active"]) < 0.9 * np.mean(widths["uniform"]), {k: np.mean(v) for k, v in widths.items()}
