"""The threshold explorer: its replay against a plain-loop oracle, its chart, and its place in the report."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judges.calibration.charts import threshold_chart
from judges.calibration.explorer import Setting, replay, sweep


def oracle(rows: list[dict], setting: Setting, behavioral: bool) -> dict:
    """docs/calibration.md, "The threshold explorer", one judgment at a time."""
    n = agree = n_pass = n_fail = false_pass = false_fail = needed = saved = with_similarity = sent = 0
    for row in rows:
        s = row["similarity"]
        if s is None:
            verdict = row["outcome"]
        else:
            with_similarity += 1
            if s >= setting.pass_at:
                verdict = "pass"
                saved += 1
            elif not behavioral or (setting.fail_below is not None and s < setting.fail_below):
                verdict = "fail"
                saved += 1
            else:
                sent += 1
                judged = row["layer"] == "behavioral" and row["outcome"] in ("pass", "fail")
                verdict = row["outcome"] if judged else "needed"
        if row["human"] is None:
            continue
        if verdict == "needed":
            needed += 1
        if verdict not in ("pass", "fail"):
            continue
        n += 1
        agree += verdict == row["human"]
        if row["human"] == "pass":
            n_pass += 1
            false_fail += verdict == "fail"
        else:
            n_fail += 1
            false_pass += verdict == "pass"
    return {
        "n": n, "agreement": agree / n if n else None,
        "true_pass_rate": 1 - false_fail / n_pass if n_pass else None,
        "true_fail_rate": 1 - false_pass / n_fail if n_fail else None,
        "false_pass": false_pass, "false_fail": false_fail, "judge_needed": needed,
        "with_similarity": with_similarity, "judge_calls_saved": saved, "sent_to_judge": sent,
    }


ROWS = st.lists(
    st.fixed_dictionaries({
        "human": st.sampled_from(["pass", "fail", None]),
        "outcome": st.sampled_from(["pass", "fail", "not_evaluated"]),
        "layer": st.sampled_from(["semantic", "behavioral", "contract"]),
        "similarity": st.none() | st.integers(0, 100).map(lambda i: i / 100),
    }),
    max_size=40,
)
THRESHOLDS = st.integers(0, 100).map(lambda i: i / 100)


def frame_of(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["human", "outcome", "layer", "similarity"])
    frame["similarity"] = pd.to_numeric(frame["similarity"]).astype("float64")
    return frame


@settings(max_examples=300, deadline=None, derandomize=True)
@given(rows=ROWS, pass_at=THRESHOLDS, fail_below=st.none() | THRESHOLDS, behavioral=st.booleans())
def test_replay_agrees_with_a_plain_loop(rows, pass_at, fail_below, behavioral):
    if fail_below is not None:
        fail_below = min(fail_below, pass_at)
    setting = Setting(pass_at, fail_below)
    got = replay(frame_of(rows), setting, behavioral=behavioral)
    expected = oracle(rows, setting, behavioral)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value) if value is not None else got[key] is None, key


def test_each_threshold_is_inclusive_as_the_engine_decides():
    rows = [
        {"human": "pass", "outcome": "pass", "layer": "semantic", "similarity": 0.8},  # at pass_at: pass
        {"human": "fail", "outcome": "fail", "layer": "behavioral", "similarity": 0.3},  # at fail_below: judge
        {"human": "fail", "outcome": "fail", "layer": "semantic", "similarity": 0.29},  # below: fail
        {"human": "pass", "outcome": "pass", "layer": "semantic", "similarity": 0.5},  # judge needed
    ]
    r = replay(frame_of(rows), Setting(0.8, 0.3), behavioral=True)
    assert (r["n"], r["agreement"], r["judge_needed"], r["judge_calls_saved"], r["sent_to_judge"]) == (3, 1.0, 1, 2, 2)
    # Without a judge, below pass_at fails: the 0.5 case becomes a false fail.
    r = replay(frame_of(rows), Setting(0.8, None), behavioral=False)
    assert (r["n"], r["false_fail"], r["judge_needed"], r["judge_calls_saved"]) == (4, 1, 0, 4)


def test_judgments_without_similarity_keep_their_verdict():
    rows = [{"human": "fail", "outcome": "pass", "layer": "contract", "similarity": None}]
    r = replay(frame_of(rows), Setting(0.0), behavioral=True)
    assert (r["n"], r["false_pass"], r["with_similarity"]) == (1, 1, 0)


def test_sweep_covers_the_grid_holding_fail_below_under_pass_at():
    rows = [{"human": "pass", "outcome": "pass", "layer": "semantic", "similarity": 0.6}]
    points = sweep(frame_of(rows), fail_below=0.4, behavioral=True, lo=0.3)
    assert [p["pass_at"] for p in points][:3] == [0.3, 0.31, 0.32] and points[-1]["pass_at"] == 1.0
    assert len(points) == 71
    assert points[0]["fail_below"] == 0.3 and points[-1]["fail_below"] == 0.4
    assert points[0]["agreement"] == 1.0 and points[-1]["judge_needed"] == 1


def test_the_chart_marks_the_floor_the_runs_thresholds_the_choice_and_the_calls_saved():
    rows = [
        {"human": "pass", "outcome": "pass", "layer": "semantic", "similarity": 0.9},
        {"human": "fail", "outcome": "fail", "layer": "behavioral", "similarity": 0.55},
        {"human": "fail", "outcome": "fail", "layer": "semantic", "similarity": 0.1},
    ]
    points = sweep(frame_of(rows), fail_below=0.2, behavioral=True, lo=0.0)
    chart = threshold_chart(points=points, floor=0.8, current={"pass_at": 0.8, "fail_below": 0.2},
                            chosen={"pass_at": 0.5, "fail_below": 0.2})
    assert chart.floor["label"] == "floor 80 %"
    assert [m["label"] for m in chart.marks] == [
        "pass_at 0.80 (run)", "fail_below 0.20 (run)", "pass_at 0.50 (chosen)"]
    assert len(chart.bars) == 101
    at_80 = chart.bars[80]
    assert at_80["title"] == "pass_at 0.80: 2 of 3 judgments decided without the judge (66.7 %)"
    assert chart.bars[50]["height"] == pytest.approx(56.0)  # every one decided at 0.50
    assert {s["key"] for s in chart.series} == {"agreement", "true_pass_rate", "true_fail_rate"}
    # At 0.50 the human-failed 0.55 passes by similarity: a false pass.
    assert "at pass_at 0.50: agreement 66.7 %, 3 of 3 judgments decided" in chart.title
    left, right = chart.plot["x"], chart.plot["right"]
    assert chart.marks[0]["x"] == pytest.approx(left + 0.8 * (right - left), abs=0.1)
    assert not any(math.isnan(p["y"]) for s in chart.series for p in s["points"])
    assert np.isfinite([b["y"] for b in chart.bars]).all()
