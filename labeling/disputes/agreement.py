"""How well reviewers agree with each other (docs/calibration.md, "Reviewers' agreement").

One function, `reviewer_agreement`, used by the labeling pages and by the calibration report: a judge
that agrees with the humans more than they agree with each other is suspect. The figures come from
one query's rows, computed by `agreement_figures`, a pure function on a DataFrame.
"""

import pandas as pd
from django.db.models import Exists, OuterRef

from labeling.models import CaseTally, Label, Rubric

COHEN, FLEISS = "cohen", "fleiss"


def reviewer_agreement(*, rubric: Rubric, dataset_id: int | None = None) -> dict:
    """Reviewers' agreement on `rubric` over the counting labels of one dataset's cases (every case when
    None).

    Returns {"percent", "pairs", "cases", "kappa", "kappa_kind", "raters", "kappa_note"}: see
    `agreement_figures`. One query.
    """
    return agreement_figures(
        paired_labels(rubric_ids=[rubric.pk], dataset_ids=None if dataset_id is None else [dataset_id])
    )


def paired_labels(*, rubric_ids: list[int], dataset_ids: list[int] | None = None) -> pd.DataFrame:
    """The counting labels of the rubrics on the cases each has two or more labels on (of these datasets
    when given): one row per label, columns rubric, dataset, case, reviewer, verdict. One query."""
    labels = Label.objects.counting().filter(rubric_id__in=rubric_ids)
    # Only a case with two or more labels of the rubric can make a pair: its tally counts them (counting
    # or not), so the labels of the rest (most cases of a 1-label rubric) stay in the database.
    paired = CaseTally.objects.filter(rubric_id=OuterRef("rubric_id"), case_id=OuterRef("case_id"), labels__gte=2)
    if dataset_ids is not None:
        labels = labels.filter(dataset_id__in=dataset_ids)
    rows = labels.filter(Exists(paired)).values_list("rubric_id", "dataset_id", "case_id", "reviewer_id", "verdict")
    return pd.DataFrame.from_records(list(rows), columns=["rubric", "dataset", "case", "reviewer", "verdict"])


def agreement_figures(labels: pd.DataFrame) -> dict:
    """Agreement figures from one row per label: columns case, reviewer, verdict ("pass"/"fail").

    - percent: agreeing pairs of labels on the same case / all such pairs, a fraction from 0 to 1
      (None without any case labeled twice); pairs: that denominator; cases: cases with 2+ labels.
    - kappa: Cohen's κ when every case with two or more labels has the same two reviewers; else
      Fleiss' κ over the cases that have the most common number of labels (the larger number on a
      tie). kappa_kind says which ("cohen", "fleiss"), raters that number of labels per case. kappa is
      None, with kappa_note saying why, when it is undefined.
    """
    result = {"percent": None, "pairs": 0, "cases": 0, "kappa": None, "kappa_kind": None, "raters": None,
              "kappa_note": None}
    if labels.empty:
        result["kappa_note"] = "No case has labels from two reviewers."
        return result
    per_case = labels.assign(is_pass=labels["verdict"].eq("pass")).groupby("case").agg(
        n=("reviewer", "size"), passes=("is_pass", "sum")
    )
    per_case = per_case[per_case["n"] >= 2]
    if per_case.empty:
        result["kappa_note"] = "No case has labels from two reviewers."
        return result
    fails = per_case["n"] - per_case["passes"]
    pairs = int((per_case["n"] * (per_case["n"] - 1) // 2).sum())
    agreeing = int((per_case["passes"] * (per_case["passes"] - 1) // 2 + fails * (fails - 1) // 2).sum())
    result |= {"percent": agreeing / pairs, "pairs": pairs, "cases": len(per_case)}

    multi = labels[labels["case"].isin(per_case.index)]
    # Two labels on every case, by one and the same pair of reviewers: (lowest, highest) id identical.
    pairs_of_reviewers = multi.groupby("case")["reviewer"].agg(["min", "max"]).drop_duplicates()
    if (per_case["n"] == 2).all() and len(pairs_of_reviewers) == 1:
        kappa, note = _cohen(multi)
        result |= {"kappa_kind": COHEN, "raters": 2}
    else:
        counts = per_case["n"].value_counts()
        raters = int(max(counts[counts == counts.max()].index))
        kappa, note = _fleiss(per_case[per_case["n"] == raters], raters)
        result |= {"kappa_kind": FLEISS, "raters": raters}
    result |= {"kappa": kappa, "kappa_note": note}
    return result


def _cohen(labels: pd.DataFrame) -> tuple[float | None, str | None]:
    """Cohen's κ for two reviewers who labeled the same cases: (po - pe) / (1 - pe)."""
    table = labels.pivot(index="case", columns="reviewer", values="verdict")
    first, second = table.columns
    observed = (table[first] == table[second]).mean()
    expected = sum(
        (table[first] == verdict).mean() * (table[second] == verdict).mean() for verdict in ("pass", "fail")
    )
    if expected >= 1:
        return None, "Both reviewers gave one verdict only, so chance agreement is 100 % and κ is undefined."
    return float((observed - expected) / (1 - expected)), None


def _fleiss(per_case: pd.DataFrame, raters: int) -> tuple[float | None, str | None]:
    """Fleiss' κ over cases with `raters` labels each, two categories (pass, fail)."""
    passes = per_case["passes"].astype(float)
    fails = raters - passes
    agreement_per_case = (passes**2 + fails**2 - raters) / (raters * (raters - 1))
    observed = agreement_per_case.mean()
    share_pass = passes.sum() / (len(per_case) * raters)
    expected = share_pass**2 + (1 - share_pass) ** 2
    if expected >= 1:
        return None, "Every label on these cases is the same verdict, so chance agreement is 100 % and κ is undefined."
    return float((observed - expected) / (1 - expected)), None
