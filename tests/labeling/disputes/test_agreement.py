"""Reviewers' agreement: percent of agreeing pairs, and Cohen's or Fleiss' κ, against hand-computed values."""

import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa

from labeling.disputes.agreement import COHEN, FLEISS, agreement_figures, reviewer_agreement
from labeling.models import Rubric
from tests.conftest import make_user
from tests.labeling.queue_helpers import change_content, give_label, make_cases


def frame(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["case", "reviewer", "verdict"])


def two_reviewers(a: str, b: str) -> pd.DataFrame:
    """One letter per case for reviewers 1 and 2: P pass, F fail."""
    verdict = {"P": "pass", "F": "fail"}
    return frame([(i, 1, verdict[x]) for i, x in enumerate(a)] + [(i, 2, verdict[y]) for i, y in enumerate(b)])


def test_cohen_for_the_same_two_reviewers_on_every_case():
    # Agree on 7 of 10; reviewer 1 passes 6, reviewer 2 passes 5: pe = .6*.5 + .4*.5 = .5, κ = (.7-.5)/.5.
    figures = agreement_figures(two_reviewers("PPPPPPFFFF", "PPPPFFFFFP"))
    assert figures["kappa_kind"] == COHEN and figures["raters"] == 2
    assert figures["percent"] == pytest.approx(0.7)
    assert (figures["pairs"], figures["cases"]) == (10, 10)
    assert figures["kappa"] == pytest.approx(0.4)
    a = ["pass"] * 6 + ["fail"] * 4
    b = ["pass"] * 4 + ["fail"] * 5 + ["pass"]
    assert figures["kappa"] == pytest.approx(cohen_kappa_score(a, b))


def test_fleiss_over_the_most_common_number_of_labels():
    # Four cases with three labels (3, 2, 1, 0 passes) and one case with two: Fleiss over the four.
    # P_i = 1, 1/3, 1/3, 1 -> P = 2/3; p(pass) = 6/12 -> Pe = 1/2; κ = (2/3 - 1/2) / (1/2) = 1/3.
    rows = []
    for case, passes in enumerate([3, 2, 1, 0]):
        rows += [(case, r, "pass" if r < passes else "fail") for r in range(3)]
    rows += [(9, 0, "pass"), (9, 1, "fail")]
    figures = agreement_figures(frame(rows))
    assert figures["kappa_kind"] == FLEISS and figures["raters"] == 3
    assert figures["kappa"] == pytest.approx(1 / 3)
    assert figures["kappa"] == pytest.approx(fleiss_kappa([[3, 0], [2, 1], [1, 2], [0, 3]]))
    # Pairs over every case: 4 x 3 + 1 = 13, agreeing 3 + 1 + 1 + 3 + 0 = 8.
    assert (figures["pairs"], figures["cases"]) == (13, 5)
    assert figures["percent"] == pytest.approx(8 / 13)


def test_fleiss_when_two_labels_per_case_come_from_different_reviewers():
    rows = [(0, "a", "pass"), (0, "b", "pass"), (1, "a", "fail"), (1, "c", "pass"), (2, "b", "fail"),
            (2, "c", "fail")]
    figures = agreement_figures(frame(rows))
    assert (figures["kappa_kind"], figures["raters"]) == (FLEISS, 2)
    assert figures["kappa"] == pytest.approx(fleiss_kappa([[2, 0], [1, 1], [0, 2]]))


def test_a_tie_in_the_number_of_labels_takes_the_larger_number():
    rows = [(0, 1, "pass"), (0, 2, "pass"), (1, 1, "fail"), (1, 3, "pass"),
            (2, 1, "pass"), (2, 2, "pass"), (2, 3, "fail"), (3, 1, "fail"), (3, 2, "fail"), (3, 3, "fail")]
    figures = agreement_figures(frame(rows))
    assert figures["raters"] == 3
    assert figures["kappa"] == pytest.approx(fleiss_kappa([[2, 1], [0, 3]]))


def test_single_labels_do_not_count():
    figures = agreement_figures(frame([(0, 1, "pass"), (1, 1, "fail"), (2, 2, "pass"), (2, 3, "pass")]))
    assert (figures["pairs"], figures["cases"], figures["percent"]) == (1, 1, 1.0)


def test_kappa_is_undefined_with_a_reason_when_everyone_always_agrees_on_one_verdict():
    figures = agreement_figures(two_reviewers("PPP", "PPP"))
    assert figures["percent"] == 1.0
    assert figures["kappa"] is None and "undefined" in figures["kappa_note"]


def test_nothing_to_compare_without_a_case_labeled_twice():
    for rows in ([], [(0, 1, "pass")]):
        figures = agreement_figures(frame(rows))
        assert figures["percent"] is None and figures["kappa"] is None and figures["kappa_note"]


def test_reviewer_agreement_reads_the_counting_labels_of_one_rubric(dataset, other_dataset, rubric, reviewer,
                                                                    second_reviewer):
    other_rubric = Rubric.objects.create(project=rubric.project, slug="tone", name="Polite?", criteria="…")
    cases = make_cases(dataset, 4)
    for case, (a, b) in zip(cases, [("pass", "pass"), ("pass", "fail"), ("fail", "fail"), ("pass", "pass")],
                            strict=True):
        give_label(case, rubric, reviewer, a)
        give_label(case, rubric, second_reviewer, b)
        give_label(case, other_rubric, reviewer, "fail")
    change_content(cases[3], "changed")  # its two labels stop counting
    foreign = make_cases(other_dataset, 1, prefix="x")[0]
    give_label(foreign, rubric, reviewer, "pass")
    give_label(foreign, rubric, second_reviewer, "fail")

    figures = reviewer_agreement(rubric=rubric, dataset_id=dataset.pk)
    assert (figures["pairs"], figures["percent"], figures["kappa_kind"]) == (3, pytest.approx(2 / 3), COHEN)
    assert figures["kappa"] == pytest.approx(cohen_kappa_score(["pass", "pass", "fail"], ["pass", "fail", "fail"]))
    assert reviewer_agreement(rubric=rubric)["pairs"] == 4
    assert reviewer_agreement(rubric=other_rubric)["pairs"] == 0


def test_a_third_reviewer_on_some_cases_switches_to_fleiss(dataset, rubric, reviewer, second_reviewer):
    third = make_user("third")
    cases = make_cases(dataset, 3)
    for case in cases:
        give_label(case, rubric, reviewer, "pass")
        give_label(case, rubric, second_reviewer, "pass")
    give_label(cases[0], rubric, third, "fail")
    figures = reviewer_agreement(rubric=rubric)
    assert (figures["kappa_kind"], figures["raters"]) == (FLEISS, 2)
