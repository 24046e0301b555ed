"""Contested figures (docs/judging.md, "Second opinion"): how many evaluated judgments a
second-opinion judge disagreed with, their rate, and which cases. Pure pandas, no database."""

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from judges.calibration.metrics import COLUMNS, calibration_figures


def frame(rows) -> pd.DataFrame:
    """rows: (external_id, human, [(outcome, contested) per repeat], category, split)."""
    records = []
    for case_id, (external_id, human, repeats, category, split) in enumerate(rows, start=1):
        for repeat, (outcome, contested) in enumerate(repeats, start=1):
            records.append({
                "case_id": case_id, "external_id": external_id, "category": category, "split": split,
                "repeat": repeat, "outcome": outcome, "reason": "", "error": "", "contested": contested,
                "human": human,
            })
    return pd.DataFrame(records, columns=list(COLUMNS))


RUN = [
    ("a", "pass", [("pass", True), ("pass", False)], "safety", "dev"),  # 1 contested of 2
    ("b", "fail", [("fail", False), ("fail", False)], "safety", "holdout"),
    ("c", "fail", [("pass", True), ("pass", True)], "policy", "dev"),  # 2 contested, and false passes
    ("d", "pass", [("not_evaluated", False), ("pass", False)], "policy", "dev"),
    ("e", None, [("pass", True), ("fail", True)], "policy", "dev"),  # no human verdict: counts nowhere
]


def test_it_counts_contested_judgments_over_evaluated_ones():
    figures = calibration_figures(frame(RUN))
    # 7 evaluated judgments of cases with a human verdict (d's first repeat was not evaluated)
    assert figures["evaluated"] == 7
    assert figures["contested"] == 3
    assert figures["contested_rate"] == 3 / 7
    assert figures["contested_cases"] == ["a", "c"]


def test_it_counts_contested_judgments_by_category_and_split():
    figures = calibration_figures(frame(RUN))
    safety, policy = figures["by_category"]["safety"], figures["by_category"]["policy"]
    assert (safety["contested"], safety["evaluated"], safety["contested_rate"]) == (1, 4, 0.25)
    assert (policy["contested"], policy["evaluated"], policy["contested_rate"]) == (2, 3, 2 / 3)
    assert figures["by_split"]["holdout"]["contested"] == 0
    assert figures["by_split"]["holdout"]["contested_rate"] == 0.0


def test_a_not_evaluated_judgment_is_never_contested():
    figures = calibration_figures(frame([("x", "pass", [("not_evaluated", True)], "policy", "dev")]))
    assert (figures["contested"], figures["contested_rate"], figures["contested_cases"]) == (0, None, [])


def test_a_frame_without_the_column_or_with_nulls_has_nothing_contested():
    without = frame(RUN).drop(columns=["contested"])
    nulls = frame(RUN).assign(contested=None)
    for f in (without, nulls):
        figures = calibration_figures(f)
        assert (figures["contested"], figures["contested_rate"], figures["contested_cases"]) == (0, 0.0, [])
    assert calibration_figures(pd.DataFrame([]))["contested_rate"] is None


def test_contested_figures_change_no_other_figure():
    plain = calibration_figures(frame(RUN).assign(contested=False))
    contested = calibration_figures(frame(RUN))
    keys = set(plain) - {"contested", "contested_rate", "contested_cases", "by_category", "by_split", "by_kind"}
    assert {k: plain[k] for k in keys} == {k: contested[k] for k in keys}


@st.composite
def random_runs(draw):
    k = draw(st.integers(1, 3))
    cases = draw(st.lists(st.tuples(
        st.sampled_from(["pass", "fail", None]),
        st.sampled_from(["safety", "policy"]),
        st.lists(st.tuples(st.sampled_from(["pass", "fail", "not_evaluated"]), st.booleans()), min_size=k, max_size=k),
    ), max_size=25))
    rows = [(f"case-{(37 * i) % 101:03d}", human, repeats, category, "dev")
            for i, (human, category, repeats) in enumerate(cases)]
    f = frame(rows)
    return f.sample(frac=1, random_state=draw(st.integers(0, 99)))  # rows in any order


@settings(max_examples=40, deadline=None)
@given(random_runs())
def test_it_agrees_with_a_plain_loop(f):
    # The oracle, from docs/calibration.md's words: evaluated judgments of cases with a human verdict, contested ones.
    judged = [r for r in f.to_dict("records") if r["human"] in ("pass", "fail") and r["outcome"] in ("pass", "fail")]
    contested = [r for r in judged if r["contested"]]
    figures = calibration_figures(f)
    assert figures["contested"] == len(contested)
    assert figures["contested_rate"] == (len(contested) / len(judged) if judged else None)
    assert figures["contested_cases"] == sorted({r["external_id"] for r in contested})
    assert sum(g["contested"] for g in figures["by_category"].values()) == figures["contested"]
