"""The evidence's case counts the CI command corrects its pass rate with (docs/gate.md, `calibration.cases`):
each case's majority verdict over its evaluated repeats (ties left out), and its repeat-1 verdict alone,
against a run worked out by hand, from judgments (pure) and from the database."""

import pandas as pd
import pytest

from judges.calibration.metrics import calibration_figures, case_confusions
from judges.calibration.selectors import run_figures
from tests.judges.promotion_factories import evidence_run

# evidence_run(n=12, repeats=2, wrong=2, flips=4, not_evaluated=1); human verdicts alternate pass, fail:
#   0 pass, both repeats fail: fn        1 fail, both pass: fp
#   2-5 repeat 2 flipped: a tie, left out of the majority; repeat 1 right: tp, tn, tp, tn
#   6-10 right: tp, tn, tp, tn, tp       11 fail, repeat 2 not evaluated: the majority of one, tn
MAJORITY = {"tp": 3, "fn": 1, "fp": 1, "tn": 3}
SINGLE = {"tp": 5, "fn": 1, "fp": 1, "tn": 5}


def judgments_frame() -> pd.DataFrame:
    rows = []
    for i in range(12):
        human = "pass" if i % 2 == 0 else "fail"
        other = "fail" if human == "pass" else "pass"
        outcomes = [other, other] if i < 2 else [human, other] if i < 6 else [human, human]
        if i == 11:
            outcomes[1] = "not_evaluated"
        rows += [{"case_id": i, "external_id": f"c{i}", "category": "", "split": "", "repeat": r + 1,
                  "outcome": outcome, "reason": "", "error": "", "contested": False, "human": human}
                 for r, outcome in enumerate(outcomes)]
    return pd.DataFrame(rows)


def test_majority_and_repeat_one_counts_from_judgments():
    figures = calibration_figures(judgments_frame())
    assert (figures["cases"], figures["cases_single"]) == (MAJORITY, SINGLE)


def test_a_case_without_a_human_verdict_never_counts_and_no_repeat_one_column_means_no_single_counts():
    frame = judgments_frame()
    frame.loc[frame["case_id"] == 6, "human"] = None
    cases = calibration_figures(frame)["cases"]
    assert cases == MAJORITY | {"tp": 2}
    counts = pd.DataFrame([{"case_id": 1, "external_id": "a", "category": "", "split": "", "human": "pass",
                            "judgments": 3, "passes": 2, "fails": 1, "contested": 0}])
    assert case_confusions(counts) == {"cases": {"tp": 1, "fn": 0, "fp": 0, "tn": 0}, "cases_single": None}


@pytest.mark.django_db
def test_the_same_counts_from_the_database(rubric, dataset, lead, reviewer):
    run = evidence_run(rubric, dataset, lead, reviewer, n=12, repeats=2, wrong=2, flips=4, not_evaluated=1)
    figures = run_figures(run=run)
    assert (figures["cases"], figures["cases_single"]) == (MAJORITY, SINGLE)
