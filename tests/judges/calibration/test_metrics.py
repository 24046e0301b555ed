"""Calibration figures: hand-computed runs, independent oracles (scikit-learn, statsmodels, a naive
per-case loop) and properties over random runs. No database: the figures are pure pandas."""

import json
import math
import random

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score, confusion_matrix
from statsmodels.stats.proportion import proportion_confint
from statsmodels.stats.weightstats import ztest

from judges.calibration.metrics import (
    CASE_COLUMNS,
    COLUMNS,
    FIRST_COLUMNS,
    OVERFIT_WARNING,
    calibration_figures,
    case_counts,
    clustered_agreement_interval,
    cohen_kappa,
    disagreements,
    judge_above_reviewers,
    wilson_interval,
)

SCALARS = {
    "n", "judgments", "evaluated", "agreement", "agreement_ci95", "kappa", "kappa_note", "false_pass",
    "false_pass_rate", "false_fail", "false_fail_rate", "true_pass_rate", "true_fail_rate", "flips",
    "flip_rate", "flip_note", "coverage", "contested", "contested_rate",
}


def make_frame(cases, *, shuffle: int | None = None) -> pd.DataFrame:
    """cases: (external_id, human, [outcome per repeat], category, split); an outcome may be
    ("not_evaluated", "error text"). One row per judgment, like the selector's `.values()` query."""
    rows = []
    for case_id, (external_id, human, outcomes, category, split) in enumerate(cases, start=1):
        for repeat, outcome in enumerate(outcomes, start=1):
            outcome, error = outcome if isinstance(outcome, tuple) else (outcome, "")
            rows.append({
                "case_id": case_id, "external_id": external_id, "category": category, "split": split,
                "repeat": repeat, "outcome": outcome, "reason": f"reason {external_id}/{repeat}",
                "error": error, "human": human,
            })
    if shuffle is not None:
        random.Random(shuffle).shuffle(rows)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def assert_plain_json(value) -> None:
    """Only Python builtins, no NaN: what a JSONField and the API can store as they are."""
    if isinstance(value, dict):
        assert all(type(k) is str for k in value)
        for v in value.values():
            assert_plain_json(v)
    elif isinstance(value, list):
        for v in value:
            assert_plain_json(v)
    else:
        assert value is None or type(value) in (str, int, float, bool), (value, type(value))
        if type(value) is float:
            assert math.isfinite(value)


SMALL_RUN = [
    # external_id, human, outcomes by repeat, category, split
    ("a", "pass", ["pass", "pass"], "policy", "dev"),  # 2 matches
    ("b", "pass", ["fail", "pass"], "policy", "dev"),  # 1 false fail, 1 match; flipped
    ("c", "fail", ["fail", "fail"], "tools", "holdout"),  # 2 matches
    ("d", "fail", ["pass", ("not_evaluated", "timeout")], "tools", "holdout"),  # 1 false pass, 1 missing
    ("e", None, ["pass", "fail"], "tools", "dev"),  # no human verdict: ignored everywhere
]


def test_it_computes_a_small_run_by_hand():
    figures = calibration_figures(make_frame(SMALL_RUN))

    assert figures["n"] == 4  # a, b, c, d; not e
    assert figures["judgments"] == 8
    assert figures["evaluated"] == 7  # d's repeat 2 is missing
    assert figures["agreement"] == 5 / 7  # a 2 + b 1 + c 2 + d 0
    # confusion (human × judge): pass/pass = a1 a2 b2 = 3, pass/fail = b1 = 1, fail/pass = d1 = 1,
    # fail/fail = c1 c2 = 2
    assert figures["confusion"] == {
        "human_pass": {"judge_pass": 3, "judge_fail": 1},
        "human_fail": {"judge_pass": 1, "judge_fail": 2},
    }
    # κ: N = 7, po = 5/7; humans pass 4 fail 3, judge pass 4 fail 3 → pe = (4·4 + 3·3)/49 = 25/49;
    # κ = (5/7 − 25/49) / (1 − 25/49) = (35 − 25) / (49 − 25) = 10/24
    assert figures["kappa"] == pytest.approx(10 / 24)
    assert figures["kappa_note"] is None
    assert figures["false_pass"] == 1 and figures["false_pass_rate"] == 1 / 3  # of 3 on human-failed
    assert figures["false_fail"] == 1 and figures["false_fail_rate"] == 1 / 4  # of 4 on human-passed
    assert figures["true_pass_rate"] == 3 / 4
    assert figures["true_fail_rate"] == 2 / 3
    # flipped: b only; cases with ≥ 2 evaluated repeats: a, b, c (d has one)
    assert figures["flips"] == 1 and figures["flip_rate"] == 1 / 3
    assert figures["coverage"] == 7 / 8
    assert figures["not_evaluated"] == [{"external_id": "d", "repeat": 2, "reason": "timeout"}]
    assert figures["false_pass_cases"] == ["d"]
    assert figures["false_fail_cases"] == ["b"]
    assert figures["flipped_cases"] == ["b"]

    # The interval counts cases: per case (m matching of e evaluated) a (2, 2), b (1, 2), c (2, 2), d (0, 1);
    # M = 5, E = 7. Σ(E·m − M·e)² = 4² + (−3)² + 4² + (−5)² = 66 (in sevenths), so n_eff = 5·2·49 / 66 = 7.42,
    # capped at the 4 cases: the Wilson interval of 5/7 at n = 4.
    low, high = figures["agreement_ci95"]
    expected_low, expected_high = proportion_confint(5 / 7 * 4, 4, alpha=0.05, method="wilson")
    assert (low, high) == (pytest.approx(expected_low), pytest.approx(expected_high))

    # policy = a, b: 3 of 4 agree; tools = c, d: 2 of 3 evaluated agree, 3 of 4 judged
    assert set(figures["by_category"]) == {"policy", "tools"}
    policy, tools = figures["by_category"]["policy"], figures["by_category"]["tools"]
    assert (policy["n"], policy["judgments"], policy["evaluated"], policy["agreement"]) == (2, 4, 4, 0.75)
    # policy: 1 false fail of 4 human-passed judgments, no human fail; b flipped of a, b
    assert (policy["false_fail_rate"], policy["false_pass_rate"], policy["flip_rate"]) == (0.25, None, 0.5)
    assert (tools["n"], tools["judgments"], tools["evaluated"], tools["agreement"]) == (2, 4, 3, 2 / 3)
    # tools: 1 false pass of 3 evaluated human-failed judgments (c1 c2 d1); 3 of 4 judged; only c has
    # two evaluated repeats and it did not flip
    assert (tools["false_pass_rate"], tools["coverage"], tools["flip_rate"]) == (1 / 3, 0.75, 0.0)
    assert set(policy) == SCALARS
    # the split here is the category again, and e (dev, no verdict) adds nothing to dev
    assert figures["by_split"] == {"dev": policy, "holdout": tools}
    # dev 0.75 − holdout 0.667 = 0.083: within 10 points
    assert figures["warnings"] == []
    assert figures["reviewer_agreement"] is None
    assert_plain_json(figures)
    json.dumps(figures, allow_nan=False)


def test_it_does_not_depend_on_the_order_of_the_rows():
    assert calibration_figures(make_frame(SMALL_RUN, shuffle=7)) == calibration_figures(make_frame(SMALL_RUN))


def test_it_passes_the_reviewer_agreement_through():
    reviewer_agreement = {"percent": 0.9, "kappa": 0.8, "kappa_kind": "cohen", "raters": 2}
    figures = calibration_figures(make_frame(SMALL_RUN), reviewer_agreement=reviewer_agreement)
    assert figures["reviewer_agreement"] == reviewer_agreement


def test_it_ignores_cases_without_a_human_verdict_everywhere():
    unverdicted = [
        ("x", None, [("not_evaluated", "rate limited"), "fail"], "adversarial", "dev"),
        ("y", None, ["pass", "fail"], "policy", "holdout"),
    ]
    with_them = calibration_figures(make_frame(SMALL_RUN + unverdicted))
    assert with_them == calibration_figures(make_frame(SMALL_RUN[:4]))
    assert "adversarial" not in with_them["by_category"]
    assert [row["external_id"] for row in with_them["not_evaluated"]] == ["d"]
    assert "y" not in with_them["flipped_cases"]


def test_it_warns_when_dev_beats_holdout_by_more_than_10_points():
    dev = [(f"dev-{i}", "pass", ["pass" if i < 9 else "fail"], "policy", "dev") for i in range(10)]
    holdout = [(f"hold-{i}", "pass", ["pass" if i < 7 else "fail"], "policy", "holdout") for i in range(10)]
    figures = calibration_figures(make_frame(dev + holdout))
    # 0.9 − 0.7 = 0.2 > 0.10
    assert figures["by_split"]["dev"]["agreement"] == 0.9
    assert figures["by_split"]["holdout"]["agreement"] == 0.7
    assert figures["warnings"] == [OVERFIT_WARNING]


def test_it_does_not_warn_at_exactly_10_points():
    # dev 4/5 = 0.8, holdout 7/10 = 0.7: exactly 10 points, which in floats is 0.10000000000000009
    dev = [(f"dev-{i}", "pass", ["pass" if i < 4 else "fail"], "policy", "dev") for i in range(5)]
    holdout = [(f"hold-{i}", "pass", ["pass" if i < 7 else "fail"], "policy", "holdout") for i in range(10)]
    figures = calibration_figures(make_frame(dev + holdout))
    assert figures["by_split"]["dev"]["agreement"] - figures["by_split"]["holdout"]["agreement"] > 0.10
    assert figures["warnings"] == []


def test_it_does_not_warn_without_a_holdout():
    dev = [(f"dev-{i}", "pass", ["pass"], "policy", "dev") for i in range(5)]
    assert calibration_figures(make_frame(dev))["warnings"] == []


def test_it_handles_no_human_verdicts():
    figures = calibration_figures(make_frame([("e", None, ["pass", "fail"], "tools", "dev")]))
    assert figures["n"] == figures["judgments"] == figures["evaluated"] == 0
    for key in ("agreement", "agreement_ci95", "kappa", "false_pass_rate", "false_fail_rate",
                "true_pass_rate", "true_fail_rate", "coverage"):
        assert figures[key] is None, key
    assert figures["kappa_note"] == "no evaluated judgments"
    assert figures["flip_rate"] == 0.0 and figures["flip_note"]
    assert figures["not_evaluated"] == figures["flipped_cases"] == figures["false_pass_cases"] == []
    assert figures["by_category"] == figures["by_split"] == {}
    assert_plain_json(figures)


def test_it_handles_a_frame_without_rows_or_columns():
    # what pd.DataFrame(list(queryset.values(...))) gives for a run with no judgments
    figures = calibration_figures(pd.DataFrame([]))
    assert figures["n"] == 0 and figures["coverage"] is None
    assert disagreements(pd.DataFrame([])) == []


def test_it_handles_every_judgment_not_evaluated():
    cases = [
        ("a", "pass", [("not_evaluated", "spend cap"), ("not_evaluated", "")], "policy", "dev"),
        ("b", "fail", [("not_evaluated", "invalid answer")] * 2, "tools", "holdout"),
    ]
    figures = calibration_figures(make_frame(cases))
    assert (figures["n"], figures["judgments"], figures["evaluated"]) == (2, 4, 0)
    assert figures["agreement"] is None and figures["agreement_ci95"] is None
    assert figures["kappa"] is None and figures["kappa_note"] == "no evaluated judgments"
    assert figures["coverage"] == 0.0
    assert figures["flip_rate"] == 0.0 and figures["flip_note"]
    # the reason is the error when there is one, else the judge's reason
    assert figures["not_evaluated"] == [
        {"external_id": "a", "repeat": 1, "reason": "spend cap"},
        {"external_id": "a", "repeat": 2, "reason": "reason a/2"},
        {"external_id": "b", "repeat": 1, "reason": "invalid answer"},
        {"external_id": "b", "repeat": 2, "reason": "invalid answer"},
    ]
    assert_plain_json(figures)


def test_it_leaves_kappa_undefined_with_one_class_only():
    cases = [(f"c{i}", "pass", ["pass", "pass"], "policy", "dev") for i in range(3)]
    figures = calibration_figures(make_frame(cases))
    # humans and judge all said pass: chance agreement pe = 1, κ = 0/0
    assert figures["kappa"] is None
    assert figures["kappa_note"].startswith("one class only")
    assert figures["agreement"] == 1.0
    assert figures["false_pass_rate"] is None and figures["true_fail_rate"] is None  # no human fail
    assert figures["true_pass_rate"] == 1.0
    assert figures["by_category"]["policy"]["kappa"] is None


def test_it_gives_kappa_zero_when_only_humans_use_one_class():
    # humans all pass, judge 2 pass 1 fail: po = 2/3 = pe, κ = 0 (defined; sklearn agrees)
    cases = [("a", "pass", ["pass"], "p", "dev"), ("b", "pass", ["pass"], "p", "dev"),
             ("c", "pass", ["fail"], "p", "dev")]
    figures = calibration_figures(make_frame(cases))
    assert figures["kappa"] == 0.0
    assert cohen_kappa_score(["pass"] * 3, ["pass", "pass", "fail"]) == 0.0


def test_it_says_why_the_flip_rate_is_zero_when_k_is_1():
    cases = [("a", "pass", ["pass"], "p", "dev"), ("b", "fail", ["pass"], "p", "dev")]
    figures = calibration_figures(make_frame(cases))
    assert figures["flips"] == 0 and figures["flip_rate"] == 0.0
    assert figures["flip_note"] == "no case has two or more evaluated repeats"


def test_it_counts_a_flip_only_between_evaluated_repeats():
    cases = [
        ("a", "pass", ["pass", ("not_evaluated", "timeout"), "pass"], "p", "dev"),  # no flip
        ("b", "fail", ["fail", ("not_evaluated", "timeout"), "pass"], "p", "dev"),  # flip
        ("c", "fail", [("not_evaluated", "x"), ("not_evaluated", "x"), "pass"], "p", "dev"),  # 1 evaluated
    ]
    figures = calibration_figures(make_frame(cases))
    assert figures["flipped_cases"] == ["b"]
    assert figures["flip_rate"] == 1 / 2  # b of a, b
    assert figures["flip_note"] is None


def test_it_lists_the_disagreements_by_case():
    rows = disagreements(case_counts(make_frame(SMALL_RUN, shuffle=3)))
    assert rows == [
        {"case_id": 2, "external_id": "b", "category": "policy", "split": "dev", "human": "pass",
         "passes": 1, "fails": 1},
        {"case_id": 4, "external_id": "d", "category": "tools", "split": "holdout", "human": "fail",
         "passes": 1, "fails": 0},
    ]
    assert_plain_json(rows)


@pytest.mark.parametrize("successes,n", [(0, 1), (1, 1), (0, 10), (8, 10), (10, 10), (24, 30), (87, 100),
                                          (1, 1000), (999, 1000)])
def test_it_matches_statsmodels_wilson_interval(successes, n):
    low, high = wilson_interval(successes / n, n)
    expected_low, expected_high = proportion_confint(successes, n, alpha=0.05, method="wilson")
    assert low == pytest.approx(expected_low, abs=1e-12)
    assert high == pytest.approx(expected_high, abs=1e-12)
    assert 0.0 <= low <= successes / n <= high <= 1.0


def test_it_computes_a_wilson_interval_by_hand():
    # 8 of 10, z² = 3.8415: centre = (0.8 + 3.8415/20) / (1 + 0.38415) = 0.99207 / 1.38415 = 0.71674;
    # half = 1.96 · √(0.016 + 3.8415/400) / 1.38415 = 1.96 · 0.15994 / 1.38415 = 0.22648
    low, high = wilson_interval(0.8, 10)
    assert low == pytest.approx(0.71674 - 0.22648, abs=1e-4)
    assert high == pytest.approx(0.71674 + 0.22648, abs=1e-4)
    assert wilson_interval(0.0, 0) is None


@pytest.mark.parametrize("human,judge", [
    (["pass", "pass", "fail", "fail"], ["pass", "fail", "fail", "fail"]),
    (["pass", "fail", "pass", "fail", "pass"], ["fail", "pass", "fail", "pass", "fail"]),
    (["pass", "pass", "pass"], ["fail", "fail", "fail"]),
    (["a", "b", "c", "a", "b"], ["a", "b", "b", "a", "c"]),  # any labels, not only pass/fail
])
def test_it_matches_sklearn_kappa(human, judge):
    assert cohen_kappa(pd.Series(human), pd.Series(judge)) == pytest.approx(cohen_kappa_score(human, judge))


def test_it_returns_none_for_an_undefined_kappa():
    assert cohen_kappa(pd.Series(["pass", "pass"]), pd.Series(["pass", "pass"])) is None
    assert cohen_kappa(pd.Series([], dtype=object), pd.Series([], dtype=object)) is None


# Properties over random runs -------------------------------------------------------------------------

OUTCOMES = ["pass", "fail", "not_evaluated"]


ANY_K = st.integers(min_value=1, max_value=4)


@st.composite
def random_runs(draw, repeats=ANY_K):
    k = draw(repeats)
    cases = draw(st.lists(
        st.tuples(
            st.sampled_from(["pass", "fail", None]),
            st.sampled_from(["policy", "tools", "edge"]),
            st.sampled_from(["dev", "holdout"]),
            st.lists(st.sampled_from(OUTCOMES), min_size=k, max_size=k),
        ),
        max_size=30,
    ))
    # external ids out of case-id order, so sorting by external_id is really exercised
    spec = [
        (f"case-{(37 * i) % 101:03d}", human, outcomes, category, split)
        for i, (human, category, split, outcomes) in enumerate(cases)
    ]
    return make_frame(spec, shuffle=draw(st.integers(0, 1000)))


def naive_effective_n(clusters: list[tuple[int, int]]) -> tuple[float, float]:
    """(p̂, effective n) straight from DESIGN's words, in floats: p̂(1 − p̂) / Var_cluster(p̂), the
    cluster-robust variance Σ(m − p̂e)² / E² with no G / (G − 1) factor, capped at the number of cases."""
    matches, evaluated = sum(m for m, _ in clusters), sum(e for _, e in clusters)
    p = matches / evaluated
    variance = sum((m - p * e) ** 2 for m, e in clusters) / evaluated**2
    if p in (0.0, 1.0) or variance == 0:
        return p, float(len(clusters))
    return p, min(float(len(clusters)), p * (1 - p) / variance)


def naive_figures(frame: pd.DataFrame) -> dict:
    """An independent oracle: a plain loop per case, written straight from the words of docs/calibration.md."""
    judged = [r for r in frame.to_dict("records") if r["human"] in ("pass", "fail")]
    evaluated = [r for r in judged if r["outcome"] in ("pass", "fail")]
    by_case: dict[str, list[str]] = {}
    human_of = {r["external_id"]: r["human"] for r in judged}
    for r in evaluated:
        by_case.setdefault(r["external_id"], []).append(r["outcome"])
    repeatable = [outs for outs in by_case.values() if len(outs) >= 2]
    flipped = [outs for outs in repeatable if len(set(outs)) > 1]
    return {
        "n": len({r["case_id"] for r in judged}),
        "judgments": len(judged),
        "evaluated": len(evaluated),
        "matches": sum(r["outcome"] == r["human"] for r in evaluated),
        "false_pass_cases": sorted({r["external_id"] for r in evaluated
                                    if r["human"] == "fail" and r["outcome"] == "pass"}),
        "flipped_cases": sorted(e for e, outs in by_case.items() if len(set(outs)) > 1),
        "flip_rate": len(flipped) / len(repeatable) if repeatable else 0.0,
        "pairs": ([r["human"] for r in evaluated], [r["outcome"] for r in evaluated]),
        # (matching, evaluated) per case with an evaluated judgment: the interval's clusters
        "clusters": [
            (sum(o == human_of[e] for o in outs), len(outs)) for e, outs in by_case.items()
        ],
    }


# sklearn warns (and returns NaN) exactly when κ is undefined; that case is asserted below.
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
@settings(max_examples=60, deadline=None)
@given(random_runs())
def test_it_agrees_with_the_oracles_on_random_runs(frame):
    figures = calibration_figures(frame)
    oracle = naive_figures(frame)
    assert_plain_json(figures)

    assert figures["n"] == oracle["n"]
    assert figures["judgments"] == oracle["judgments"]
    assert figures["evaluated"] == oracle["evaluated"]
    assert figures["false_pass_cases"] == oracle["false_pass_cases"]
    assert figures["flipped_cases"] == oracle["flipped_cases"]
    assert figures["flip_rate"] == pytest.approx(oracle["flip_rate"])
    # every evaluated judgment is a match, a false pass or a false fail
    assert figures["false_pass"] + figures["false_fail"] + oracle["matches"] == figures["evaluated"]

    if figures["evaluated"]:
        assert 0.0 <= figures["agreement"] <= 1.0
        assert figures["agreement"] == pytest.approx(oracle["matches"] / oracle["evaluated"])
        low, high = figures["agreement_ci95"]
        p, n = naive_effective_n(oracle["clusters"])
        expected = proportion_confint(p * n, n, alpha=0.05, method="wilson")
        assert (low, high) == (pytest.approx(expected[0]), pytest.approx(expected[1]))
        human, judge = oracle["pairs"]
        matrix = confusion_matrix(human, judge, labels=["pass", "fail"])
        confusion = figures["confusion"]
        assert matrix.tolist() == [
            [confusion["human_pass"]["judge_pass"], confusion["human_pass"]["judge_fail"]],
            [confusion["human_fail"]["judge_pass"], confusion["human_fail"]["judge_fail"]],
        ]
        expected_kappa = cohen_kappa_score(human, judge, labels=["pass", "fail"])
        if math.isnan(expected_kappa):
            assert figures["kappa"] is None and figures["kappa_note"]
        else:
            assert figures["kappa"] == pytest.approx(expected_kappa)
            assert figures["kappa_note"] is None
    else:
        assert figures["agreement"] is None and figures["kappa"] is None

    if figures["judgments"]:
        assert 0.0 <= figures["coverage"] <= 1.0
        assert len(figures["not_evaluated"]) == figures["judgments"] - figures["evaluated"]
    for rate in ("false_pass_rate", "false_fail_rate", "true_pass_rate", "true_fail_rate"):
        assert figures[rate] is None or 0.0 <= figures[rate] <= 1.0
    if figures["false_pass_rate"] is not None:
        assert figures["true_fail_rate"] == pytest.approx(1 - figures["false_pass_rate"])
    if figures["false_fail_rate"] is not None:
        assert figures["true_pass_rate"] == pytest.approx(1 - figures["false_fail_rate"])

    # the groups partition the run
    for groups in (figures["by_category"], figures["by_split"]):
        for key in ("n", "judgments", "evaluated", "false_pass", "false_fail", "flips"):
            assert sum(group[key] for group in groups.values()) == figures[key]


@settings(max_examples=50, deadline=None)
@given(random_runs(repeats=st.just(1)))
def test_it_never_flips_with_one_repeat(frame):
    figures = calibration_figures(frame)
    assert figures["flip_rate"] == 0.0 and figures["flipped_cases"] == []
    assert all(group["flip_rate"] == 0.0 for group in figures["by_category"].values())


@settings(max_examples=50, deadline=None)
@given(random_runs())
def test_it_lists_exactly_the_cases_with_a_wrong_evaluated_repeat(frame):
    rows = disagreements(case_counts(frame))
    figures = calibration_figures(frame)
    assert [row["external_id"] for row in rows] == sorted(
        set(figures["false_pass_cases"]) | set(figures["false_fail_cases"])
    )
    for row in rows:
        outcomes = frame.loc[frame["external_id"] == row["external_id"], "outcome"].tolist()
        assert (row["passes"], row["fails"]) == (outcomes.count("pass"), outcomes.count("fail"))
        assert row["fails" if row["human"] == "pass" else "passes"] > 0


@settings(max_examples=40, deadline=None)
@given(random_runs())
def test_the_not_evaluated_judgments_are_enough_beside_the_case_counts(frame):
    # What a stored run does: the database sums each case, and only the not-evaluated judgments are read.
    missing = frame[~frame["outcome"].isin(["pass", "fail"])]
    assert calibration_figures(missing, cases=case_counts(frame)) == calibration_figures(frame)


def test_it_counts_each_case_once_with_its_columns():
    frame = make_frame([
        ("a", "pass", ["pass", ("not_evaluated", "timeout"), "fail"], "policy", "dev"),
        ("b", None, ["fail"], "tools", "holdout"),
    ], shuffle=3).assign(contested=False)
    frame.loc[(frame["external_id"] == "a") & (frame["repeat"] == 3), "contested"] = True
    frame.loc[(frame["external_id"] == "a") & (frame["repeat"] == 2), "contested"] = True  # not evaluated
    cases = case_counts(frame).set_index("external_id")

    assert tuple(case_counts(frame).columns) == (*CASE_COLUMNS, *FIRST_COLUMNS)
    assert cases.loc["a", ["category", "split", "human"]].tolist() == ["policy", "dev", "pass"]
    assert cases.loc["a", ["judgments", "passes", "fails", "contested"]].tolist() == [3, 1, 1, 1]
    assert cases.loc["b", ["judgments", "passes", "fails", "contested"]].tolist() == [1, 0, 1, 0]
    # a's repeat 1 passed, b's failed
    assert cases.loc[["a", "b"], list(FIRST_COLUMNS)].values.tolist() == [[1, 0], [0, 1]]
    assert case_counts(pd.DataFrame()).empty


# ---- by calibration kind ------------------------------------------------------------------------------

def test_it_computes_the_figures_by_kind_by_hand():
    cases = case_counts(make_frame(SMALL_RUN))
    # a good, b bad, c no kind, d good, e injection (no human verdict: it counts nowhere)
    cases["kind"] = cases["external_id"].map({"a": "good", "b": "bad", "c": "", "d": "good", "e": "injection"})
    missing = make_frame(SMALL_RUN)
    figures = calibration_figures(missing[missing["outcome"] == "not_evaluated"], cases=cases)

    assert list(figures["by_kind"]) == ["bad", "good", "unset"]
    good, bad, unset = (figures["by_kind"][k] for k in ("good", "bad", "unset"))
    # good = a (pass, pass on a human pass) and d (pass on a human fail, one not evaluated): 2 of 3 agree
    assert (good["n"], good["judgments"], good["evaluated"], good["agreement"]) == (2, 4, 3, 2 / 3)
    assert (good["false_pass"], good["false_fail"], good["coverage"], good["flip_rate"]) == (1, 0, 0.75, 0.0)
    # bad = b: fail then pass on a human pass: 1 of 2, one false fail, flipped
    assert (bad["n"], bad["agreement"], bad["false_fail"], bad["flip_rate"]) == (1, 0.5, 1, 1.0)
    # unset = c: fail, fail on a human fail
    assert (unset["n"], unset["agreement"], unset["true_fail_rate"]) == (1, 1.0, 1.0)
    assert set(good) == SCALARS
    assert figures["missing_kinds"] == ["incomplete", "injection", "paraphrase"]
    assert_plain_json(figures)


def test_a_frame_without_kinds_counts_every_case_unset():
    figures = calibration_figures(make_frame(SMALL_RUN))
    assert list(figures["by_kind"]) == ["unset"] and figures["by_kind"]["unset"]["n"] == 4
    assert figures["missing_kinds"] == ["good", "bad", "incomplete", "injection", "paraphrase"]


def test_gaps_in_a_frame_read_as_empty_text():
    # None where text belongs (no category or split, a judgment with neither error nor reason) is said as
    # "", never as "nan" or "None"; a judge's reason stands in for a missing error.
    frame = make_frame([
        ("a", "pass", ["fail", ("not_evaluated", None)], None, None),
        ("b", "fail", [("not_evaluated", None)], "tools", "dev"),
    ])
    frame.loc[frame["external_id"].eq("a") & frame["repeat"].eq(2), "reason"] = None
    figures = calibration_figures(frame)

    assert (list(figures["by_category"]), list(figures["by_split"])) == (["", "tools"], ["", "dev"])
    assert figures["not_evaluated"] == [{"external_id": "a", "repeat": 2, "reason": ""},
                                        {"external_id": "b", "repeat": 1, "reason": "reason b/1"}]
    assert disagreements(case_counts(frame)) == [
        {"case_id": 1, "external_id": "a", "category": "", "split": "", "human": "pass", "passes": 0, "fails": 1}]


def test_external_ids_are_text_in_the_case_lists_and_the_disagreements_alike():
    frame = make_frame([(10, "pass", ["fail"], "policy", "dev"), (9, "pass", ["fail"], "policy", "dev")])
    assert calibration_figures(frame)["false_fail_cases"] == ["10", "9"]
    assert [row["external_id"] for row in disagreements(case_counts(frame))] == ["10", "9"]


def test_none_and_all_give_bounds_of_exactly_0_and_1():
    # In floats the lower bound of 0 of 3 comes out at 5.6e-17: a page would show it as more than none.
    for n in range(1, 50):
        assert wilson_interval(0.0, n)[0] == 0.0
        assert wilson_interval(1.0, n)[1] == 1.0


def test_the_kappa_note_names_the_one_class_used():
    cases = [(f"c{i}", "fail", ["fail"], "policy", "dev") for i in range(3)]
    assert calibration_figures(make_frame(cases))["kappa_note"] == "one class only: humans and judge all said fail"


def test_dev_agreement_counts_the_agreed_fails_too():
    # dev 10 of 10 (every one an agreed fail), holdout 8 of 10: 20 points apart
    dev = [(f"dev-{i}", "fail", ["fail"], "policy", "dev") for i in range(10)]
    holdout = [(f"hold-{i}", "fail", ["fail" if i < 8 else "pass"], "policy", "holdout") for i in range(10)]
    assert calibration_figures(make_frame(dev + holdout))["warnings"] == [OVERFIT_WARNING]


def test_the_cases_frame_keeps_the_order_of_appearance_integer_counts_and_none_for_no_verdict():
    frame = make_frame([("a", "pass", ["pass"], "p", "dev"), ("b", None, ["fail"], "p", "dev")])
    frame["case_id"] = frame["case_id"].map({1: 7, 2: 3})  # the later case has the lower id
    cases = case_counts(frame)
    assert cases["case_id"].tolist() == [7, 3]
    assert cases["human"].tolist() == ["pass", None]
    # Integers like the database's sums, not floats that happen to be whole.
    assert {str(cases[c].dtype) for c in ("judgments", "passes", "fails", "contested")} == {"int64"}


# The interval counts cases, not repeats ----------------------------------------------------------------


def _repeated(frame: pd.DataFrame, k: int) -> pd.DataFrame:
    """Every judgment of a K = 1 run said again K times, as repeats 1..K."""
    return pd.concat([frame.assign(repeat=r) for r in range(1, k + 1)], ignore_index=True)


@settings(max_examples=30, deadline=None)
@given(random_runs(repeats=st.just(1)), st.integers(min_value=2, max_value=6))
def test_repeating_every_verdict_k_times_leaves_the_interval_of_k_1(frame, k):
    once, repeated = calibration_figures(frame), calibration_figures(_repeated(frame, k))
    # Exactly, not approximately: repeats of one verdict add no evidence.
    assert repeated["agreement_ci95"] == once["agreement_ci95"]
    for fold in ("by_category", "by_split", "by_kind"):
        assert {g: f["agreement_ci95"] for g, f in repeated[fold].items()} == {
            g: f["agreement_ci95"] for g, f in once[fold].items()
        }


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=8).flatmap(
    lambda e: st.tuples(st.integers(min_value=0, max_value=e), st.just(e))), min_size=1, max_size=40))
def test_no_set_of_repeats_is_narrower_than_wilson_over_cases(clusters):
    matches, evaluated = sum(m for m, _ in clusters), sum(e for _, e in clusters)
    low, high = clustered_agreement_interval(
        matches=matches, evaluated=evaluated, matches_sq=sum(m * m for m, _ in clusters),
        matches_evaluated=sum(m * e for m, e in clusters), evaluated_sq=sum(e * e for _, e in clusters),
        cases=len(clusters),
    )
    # The Wilson interval over the cases at the same agreement holds inside it.
    over_cases_low, over_cases_high = wilson_interval(matches / evaluated, len(clusters))
    assert low <= over_cases_low + 1e-12 and high >= over_cases_high - 1e-12
    # And it is the Wilson interval at DESIGN's effective n (statsmodels as the reference).
    p, n = naive_effective_n(clusters)
    expected = proportion_confint(p * n, n, alpha=0.05, method="wilson")
    assert (low, high) == (pytest.approx(expected[0], abs=1e-9), pytest.approx(expected[1], abs=1e-9))


def test_it_computes_a_clustered_interval_by_hand():
    # Four cases, (matching, evaluated): (0, 3), (1, 1), (1, 1), (1, 1). M = 3, E = 6, p̂ = 1/2.
    # E·m − M·e per case: 0 − 9 = −9, 6 − 3 = 3, 3, 3; squares 81 + 9 + 9 + 9 = 108.
    # n_eff = M(E − M)·E² / 108 = 3·3·36 / 108 = 3: the case judged three times counts less than three cases.
    # Wilson at p = 0.5, n = 3, z² = 3.8415: centre = (0.5 + 3.8415/6) / (1 + 3.8415/3) = 1.14025 / 2.28049
    # = 0.5; half = 1.96 · √(0.25/3 + 3.8415/36) / 2.28049 = 1.96 · 0.43594 / 2.28049 = 0.37467.
    frame = make_frame([
        ("a", "pass", ["fail", "fail", "fail"], "policy", "dev"),
        ("b", "pass", ["pass"], "policy", "dev"),
        ("c", "fail", ["fail"], "policy", "dev"),
        ("d", "fail", ["fail"], "policy", "dev"),
    ])
    low, high = calibration_figures(frame)["agreement_ci95"]
    assert low == pytest.approx(0.5 - 0.37467, abs=1e-4)
    assert high == pytest.approx(0.5 + 0.37467, abs=1e-4)
    # Counted over the six judgments instead it would be narrower: 0.1876 – 0.8124.
    assert wilson_interval(0.5, 6)[0] > low + 0.05


def _coverage(rng: np.random.Generator, *, cases: int, repeats: int, deterministic_share: float) -> float:
    """The share of 2,000 simulated runs whose interval holds the true agreement. Each case has its own
    chance that the judge agrees with the human: deterministic_share of them 0 or 1 (a judge that says the
    same every time), the rest drawn from Beta(4, 1.5); the truth is the mean over all cases that could
    be drawn: 0.85 for the fixed ones, 4 / 5.5 for the others."""
    truth = deterministic_share * 0.85 + (1 - deterministic_share) * 4 / 5.5
    held = 0
    simulations = 2000
    for _ in range(simulations):
        fixed = rng.random(cases) < deterministic_share
        chance = np.where(fixed, (rng.random(cases) < 0.85).astype(float), rng.beta(4, 1.5, cases))
        m = rng.binomial(repeats, chance)
        e = np.full(cases, repeats)
        low, high = clustered_agreement_interval(
            matches=int(m.sum()), evaluated=int(e.sum()), matches_sq=int((m * m).sum()),
            matches_evaluated=int((m * e).sum()), evaluated_sq=int((e * e).sum()), cases=cases,
        )
        held += low <= truth <= high
    return held / simulations


@pytest.mark.parametrize(("deterministic_share", "at_most"), [(1.0, 0.98), (0.5, 1.0)])
def test_the_interval_covers_the_truth_at_least_95_percent_of_the_time(deterministic_share, at_most):
    # Seeded: the same draws every run. Counting 40 cases × K = 3 repeats as 120 judgments would cover far
    # less when repeats agree (they are no new evidence); counting cases keeps about 95 %. Where repeats
    # differ, the cap at the number of cases makes it conservative (over 95 %), never narrower.
    rng = np.random.default_rng(29)
    coverage = _coverage(rng, cases=40, repeats=3, deterministic_share=deterministic_share)
    assert 0.93 <= coverage <= at_most


# A judge more agreeable than the reviewers -------------------------------------------------------------


def _two_labels(verdicts: list[tuple[str, str]]) -> pd.DataFrame:
    """Labels of two reviewers (1 and 2) on cases 1, 2, …: verdicts[i] = (reviewer 1's, reviewer 2's)."""
    rows = [(case, reviewer, verdict) for case, pair in enumerate(verdicts, start=1)
            for reviewer, verdict in enumerate(pair, start=1)]
    return pd.DataFrame(rows, columns=["case", "reviewer", "verdict"])


def _judged(verdicts: list[list[str]]) -> pd.DataFrame:
    """A cases frame of cases 1, 2, … whose evaluated repeats are verdicts[i]."""
    return pd.DataFrame({"case_id": range(1, len(verdicts) + 1),
                         "passes": [v.count("pass") for v in verdicts], "fails": [v.count("fail") for v in verdicts]})


def test_it_refuses_a_judge_above_the_reviewers_by_hand():
    # 20 cases with two labels. 12 the reviewers agree on (pass, pass) and the judge passes: judge 1, reviewers 1,
    # d = 0. 8 they split (pass, fail): the judge passes and so agrees with one label of two, 0.5; the one
    # pair agrees 0 times: d = 0.5. mean d = 8 · 0.5 / 20 = 0.2; Σ(d − 0.2)² = 12 · 0.04 + 8 · 0.09 = 1.2,
    # sd = √(1.2 / 19) = 0.25131, se = 0.25131 / √20 = 0.056195, z = 0.2 / 0.056195 = 3.559 > 1.645: above.
    labels = _two_labels([("pass", "pass")] * 12 + [("pass", "fail")] * 8)
    test = judge_above_reviewers(_judged([["pass"]] * 20), labels)
    assert test["cases"] == 20
    assert test["judge"] == pytest.approx(0.8) and test["reviewers"] == pytest.approx(0.6)
    assert test["z"] == pytest.approx(3.559, abs=1e-3)
    assert test["above"] is True and test["note"] is None
    # statsmodels' one-sample z-test on the same differences is the reference.
    differences = [0.0] * 12 + [0.5] * 8
    assert test["z"] == pytest.approx(ztest(differences, value=0, alternative="larger")[0])

    # The same, but the judge fails three of the agreed cases: d = −1 three times, 0 nine times, 0.5 eight
    # times; mean 0.05, Σ(d − 0.05)² = 3 · 1.1025 + 9 · 0.0025 + 8 · 0.2025 = 4.95, sd = √(4.95 / 19) = 0.51042,
    # se = 0.11413, z = 0.438: higher on average, but not by a margin the test can tell from chance.
    test = judge_above_reviewers(_judged([["fail"]] * 3 + [["pass"]] * 17), labels)
    assert test["z"] == pytest.approx(0.438, abs=1e-3)
    assert test["difference"] == pytest.approx(0.05) and test["above"] is False


def test_repeats_count_each_labels_agreement_over_the_evaluated_ones():
    # One case, labels (pass, fail); the judge passes twice and fails once of three repeats (a fourth not
    # evaluated): it agrees with "pass" 2 of 3 times and with "fail" 1 of 3: 3 of 6 = 0.5.
    cases = pd.DataFrame({"case_id": [1], "passes": [2], "fails": [1]})
    test = judge_above_reviewers(cases, _two_labels([("pass", "fail")]))
    assert test["judge"] == pytest.approx(0.5) and test["reviewers"] == 0.0


def test_it_tests_nothing_on_fewer_than_20_cases():
    test = judge_above_reviewers(_judged([["pass"]] * 19), _two_labels([("pass", "fail")] * 19))
    assert test["cases"] == 19 and test["judge"] == pytest.approx(0.5)
    assert test["above"] is False and test["z"] is None
    assert test["note"] == "only 19 cases with two or more labels (the test needs 20)"


def test_a_case_with_one_label_or_no_evaluated_judgment_is_left_out():
    labels = pd.concat([_two_labels([("pass", "pass")] * 20), pd.DataFrame(
        [(21, 1, "pass"), (22, 1, "fail"), (22, 2, "pass")], columns=["case", "reviewer", "verdict"])])
    # case 21 has one label; case 22 has two but the judge evaluated none of its repeats
    cases = pd.concat([_judged([["pass"]] * 21), pd.DataFrame({"case_id": [22], "passes": [0], "fails": [0]})])
    test = judge_above_reviewers(cases, labels)
    assert test["cases"] == 20
    # Every case differs by the same amount (0): nothing to refuse.
    assert test["above"] is False


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(2, 4), st.integers(0, 4)),
                min_size=20, max_size=40))
def test_the_judge_above_reviewers_test_is_the_one_sample_z_test(rows):
    """Random cases (judge passes, judge fails, labels, pass labels), against a per-case loop and statsmodels."""
    rows = [(p, f, n, min(lp, n)) for p, f, n, lp in rows if p + f > 0]
    labels = pd.DataFrame(
        [(case, r, "pass" if r < lp else "fail") for case, (_, _, n, lp) in enumerate(rows) for r in range(n)],
        columns=["case", "reviewer", "verdict"])
    cases = pd.DataFrame({"case_id": range(len(rows)), "passes": [r[0] for r in rows], "fails": [r[1] for r in rows]})
    test = judge_above_reviewers(cases, labels)
    differences = []
    for p, f, n, lp in rows:
        judge = (p * lp + f * (n - lp)) / ((p + f) * n)
        pairs = n * (n - 1) / 2
        reviewers = (lp * (lp - 1) / 2 + (n - lp) * (n - lp - 1) / 2) / pairs
        differences.append(judge - reviewers)
    assert test["cases"] == len(rows)
    if len(rows) < 20:
        assert test["above"] is False
        return
    assert test["difference"] == pytest.approx(float(np.mean(differences)))
    if np.std(differences) > 1e-12:
        z = ztest(differences, value=0, alternative="larger")[0]
        assert test["z"] == pytest.approx(z)
        assert test["above"] is bool(z > 1.6448536269514722)
