"""Calibration figures of one run against one rubric's human verdicts (docs/calibration.md).

Pure pandas, no ORM. Two frames describe a run:

- judgments, one row per judgment (COLUMNS):
    case_id, external_id, category, split, repeat, outcome, reason, error, contested, human
  `outcome` is "pass" / "fail" / "not_evaluated"; `contested` is True where a second-opinion judge
  disagreed (a frame without the column has none); `human` is the case's human verdict ("pass" / "fail" /
  None).
- cases, one row per case the run judged (CASE_COLUMNS): the case's columns and human verdict, and how
  many of its judgments there are, said pass, said fail, and were contested (evaluated ones only).
  `case_counts` reduces judgments to it; the database sums the same per case for a stored run
  (judges.calibration.selectors), so 100,000 judgments arrive as 20,000 rows. A cases frame may also
  carry FIRST_COLUMNS, whether its repeat-1 judgment passed / failed (0 or 1), for `cases_single`.

Every figure is counted from the cases frame; only the list of not-evaluated judgments needs judgment
rows, so a caller holding the cases frame passes just those. Only cases with a human verdict count, in
every figure. Positive = the judge says pass.

The counts are summed, vectorised, into a small table of integers per group (the whole run, each
category, each split, each calibration kind: `unset` for cases without one); every rate is then
derived from those integers by one scalar function, so the overall figures and the per-group figures
cannot drift apart. The result is a plain JSON-serialisable
dict: Python ints/floats/None/str/lists only, never a numpy type or NaN.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any, cast

import pandas as pd

COLUMNS = (
    "case_id", "external_id", "category", "split", "repeat", "outcome", "reason", "error", "contested", "human",
)
CASE_COLUMNS = (
    "case_id", "external_id", "category", "split", "human", "judgments", "passes", "fails", "contested",
)
# Whether a case's repeat-1 judgment said pass / fail (0 or 1 each): what CI's default single run would say.
FIRST_COLUMNS = ("first_pass", "first_fail")
VERDICTS = ("pass", "fail")
# The calibration kinds (docs/cases.md; labeling's CASE_KINDS); a case without one counts under UNSET.
KINDS = ("good", "bad", "incomplete", "injection", "paraphrase")
UNSET = "unset"
WILSON_Z95 = 1.959963984540054  # the 97.5 % quantile of the standard normal
OVERFIT_GAP = (1, 10)  # dev agreement may beat holdout by at most 10 points, as an exact fraction
OVERFIT_WARNING = "dev agreement beats holdout by more than 10 points (an overfit prompt)"
# judge_above_reviewers: tested on at least this many cases with two or more labels, one-sided at 95 %.
ABOVE_REVIEWERS_MIN_CASES = 20
NORMAL_Z95_ONE_SIDED = 1.6448536269514722  # the 95 % quantile of the standard normal

# The integer counts every figure is derived from, one row per case, summed over a group's cases.
# hp_jf: judgments where the human said pass and the judge fail (false fails); hf_jp: false passes.
# matches_sq, matches_evaluated, evaluated_sq and clusters (cases with an evaluated judgment) are what the
# interval needs to count each case's repeats as one cluster (clustered_agreement_interval).
_COUNTS = (
    "n", "judgments", "evaluated", "hp_jp", "hp_jf", "hf_jp", "hf_jf", "contested", "flips", "repeatable",
    "matches_sq", "matches_evaluated", "evaluated_sq", "clusters",
)


def wilson_interval(p: float, n: float, z: float = WILSON_Z95) -> list[float] | None:
    """Wilson score interval for a proportion p observed over n (n need not be whole: an effective n);
    None when n is 0 (nothing to estimate)."""
    if n <= 0:
        return None
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denominator
    low, high = centre - half, centre + half
    # Mathematically the bound is exactly 0 (p = 0) or 1 (p = 1); in floats it can miss by 1e-16, and a
    # page must not show 100 % as 99.99999… Otherwise clamp only against noise.
    return [0.0 if p == 0 else max(0.0, low), 1.0 if p == 1 else min(1.0, high)]


def clustered_agreement_interval(
    *, matches: int, evaluated: int, matches_sq: int, matches_evaluated: int, evaluated_sq: int, cases: int
) -> list[float] | None:
    """The 95 % interval of an agreement over judgments, each case one cluster of its evaluated repeats
    (docs/calibration.md, "The interval counts cases"): the Wilson interval at the effective n.

    Takes sums over the cases (m: a case's matching judgments, e: its evaluated ones): matches = Σm,
    evaluated = Σe, matches_sq = Σm², matches_evaluated = Σm·e, evaluated_sq = Σe², cases = the cases with
    an evaluated judgment. With M = Σm, E = Σe and p̂ = M / E, the cluster-robust variance of p̂ (no
    G / (G − 1) factor) is Σ(m − p̂e)² / E², so

        n_eff = p̂(1 − p̂) / Var = M(E − M)·E² / Σ(E·m − M·e)²,

    computed in integers until the one division, capped at `cases` (and `cases` itself when p̂ is 0 or 1,
    or when every case agrees in the same proportion). K = 1 gives n_eff = cases exactly; so does every
    verdict repeated K times.
    """
    if evaluated <= 0 or cases <= 0:
        return None
    m, e = matches, evaluated
    spread = e * e * matches_sq - 2 * e * m * matches_evaluated + m * m * evaluated_sq  # Σ(E·m − M·e)²
    if m in (0, e) or spread <= 0:
        effective_n = float(cases)
    else:
        effective_n = min(float(cases), m * (e - m) * e * e / spread)
    return wilson_interval(m / e, effective_n)


def _kappa_from_table(table: pd.DataFrame) -> tuple[float | None, str | None]:
    """Cohen's κ from a square contingency table (rows: rater A, columns: rater B, same labels).

    Integer arithmetic until the one division: κ = (N·Σagree − Σ row·col) / (N² − Σ row·col), so the
    "chance agreement is 1" test is exact rather than a float comparison.
    """
    counts = table.to_numpy()
    total = int(counts.sum())
    if total == 0:
        return None, "no evaluated judgments"
    agree = int(counts.trace())
    chance = int((counts.sum(axis=1) * counts.sum(axis=0)).sum())
    if chance == total * total:
        # Both raters used one and the same label for everything: chance agreement is 1, κ is 0/0.
        only = table.index[counts.sum(axis=1) > 0][0]
        return None, f"one class only: humans and judge all said {only}"
    return (total * agree - chance) / (total * total - chance), None


def cohen_kappa(human: pd.Series, judge: pd.Series) -> float | None:
    """Cohen's κ between two aligned series of labels (any labels); None when undefined."""
    pairs = pd.DataFrame({"a": pd.Series(human).to_numpy(), "b": pd.Series(judge).to_numpy()}).dropna()
    labels = sorted(set(pairs["a"]) | set(pairs["b"]))
    table = pd.crosstab(pairs["a"], pairs["b"]).reindex(index=labels, columns=labels, fill_value=0)
    return _kappa_from_table(table)[0]


def case_counts(judgments: pd.DataFrame) -> pd.DataFrame:
    """The cases frame (CASE_COLUMNS) of a judgments frame: one row per case, in order of appearance."""
    frame = judgments.reindex(columns=list(COLUMNS))  # an empty `.values()` frame has no columns at all
    evaluated = frame["outcome"].isin(VERDICTS)
    counted = frame[["case_id", "external_id", "category", "split", "human"]].assign(
        judgments=1,
        passes=frame["outcome"].eq("pass").astype(int),
        fails=frame["outcome"].eq("fail").astype(int),
        # Only an evaluated judgment can be contested (the primary's verdict stands, flagged); eq(True)
        # reads a missing column's NaN, None and False alike as "not contested".
        contested=(frame["contested"].eq(True) & evaluated).astype(int),
        first_pass=(frame["outcome"].eq("pass") & frame["repeat"].eq(1)).astype(int),
        first_fail=(frame["outcome"].eq("fail") & frame["repeat"].eq(1)).astype(int),
    )
    cases = counted.groupby("case_id", sort=False, as_index=False).agg(
        external_id=("external_id", "first"), category=("category", "first"), split=("split", "first"),
        human=("human", "first"), judgments=("judgments", "sum"), passes=("passes", "sum"),
        fails=("fails", "sum"), contested=("contested", "sum"), first_pass=("first_pass", "sum"),
        first_fail=("first_fail", "sum"),
    )
    human = cases["human"].astype(object)
    cases["human"] = human.where(human.notna(), None)  # "first" gives NaN for a case without a verdict
    return cases[[*CASE_COLUMNS, *FIRST_COLUMNS]]


def _confusion(human: pd.Series, judge_pass: pd.Series, judge_fail: pd.Series) -> dict[str, int]:
    """{tp, fn, fp, tn} over cases, positive = pass: each case's verdict is pass where `judge_pass`, fail
    where `judge_fail`, and the case is left out where neither holds."""
    human_pass, human_fail = human.eq("pass"), human.eq("fail")
    return {
        "tp": int((human_pass & judge_pass).sum()), "fn": int((human_pass & judge_fail).sum()),
        "fp": int((human_fail & judge_pass).sum()), "tn": int((human_fail & judge_fail).sum()),
    }


def case_confusions(cases: pd.DataFrame) -> dict[str, dict[str, int] | None]:
    """The evidence's confusion over cases, made the way CI makes its verdicts (docs/gate.md):

    `cases`: each case's verdict the majority of its evaluated repeats, ties (and cases with none) left out;
    `cases_single`: its repeat-1 verdict only, None when the frame has no FIRST_COLUMNS.
    Only cases with a human verdict count. What the CI command corrects the judge's pass rate with.
    """
    frame = cases.reindex(columns=[*CASE_COLUMNS, *FIRST_COLUMNS])
    passes, fails = frame["passes"].fillna(0), frame["fails"].fillna(0)
    single = None
    if set(FIRST_COLUMNS) <= set(cases.columns):
        single = _confusion(frame["human"], frame["first_pass"].fillna(0).gt(0), frame["first_fail"].fillna(0).gt(0))
    return {"cases": _confusion(frame["human"], passes > fails, fails > passes), "cases_single": single}


def _counted_cases(cases: pd.DataFrame) -> pd.DataFrame:
    """The cases with a human verdict, with one integer column per count in _COUNTS (and `kind`, UNSET
    where the case has none or the frame has no `kind` column)."""
    cases = cases.reindex(columns=[*CASE_COLUMNS, "kind"])
    df = cases[cases["human"].isin(VERDICTS)]
    human_pass = df["human"].eq("pass")
    passes, fails = df["passes"].astype(int), df["fails"].astype(int)
    evaluated = passes + fails
    matches = passes.where(human_pass, fails)
    return pd.DataFrame(
        {
            "external_id": df["external_id"].astype(str),
            "category": df["category"].fillna("").astype(str),
            "split": df["split"].fillna("").astype(str),
            # object first: a frame without kinds has an all-NaN float column
            "kind": df["kind"].astype(object).where(df["kind"].notna() & df["kind"].ne(""), UNSET).astype(str),
            "n": 1,
            "judgments": df["judgments"].astype(int),
            "evaluated": evaluated,
            "hp_jp": passes.where(human_pass, 0),
            "hp_jf": fails.where(human_pass, 0),
            "hf_jp": passes.where(~human_pass, 0),
            "hf_jf": fails.where(~human_pass, 0),
            "contested": df["contested"].astype(int),
            # A flip: among its evaluated repeats the judge said pass at least once and fail at least once.
            "flips": ((passes > 0) & (fails > 0)).astype(int),
            "repeatable": (evaluated >= 2).astype(int),
            "matches_sq": matches * matches,
            "matches_evaluated": matches * evaluated,
            "evaluated_sq": evaluated * evaluated,
            "clusters": (evaluated > 0).astype(int),
        },
        index=df.index,
    )


def _not_evaluated(judgments: pd.DataFrame) -> list[dict[str, Any]]:
    """Every not-evaluated judgment of a case with a human verdict, by external_id and repeat, with why:
    the engine's error, or the judge's reason when there is no error."""
    frame = judgments.reindex(columns=list(COLUMNS))
    missing = frame[frame["human"].isin(VERDICTS) & ~frame["outcome"].isin(VERDICTS)]
    missing = missing.assign(external_id=missing["external_id"].astype(str)).sort_values(["external_id", "repeat"])
    error, reason = missing["error"].fillna("").astype(str), missing["reason"].fillna("").astype(str)
    why = error.where(error.ne(""), reason)
    return [
        {"external_id": external_id, "repeat": int(repeat), "reason": text}
        for external_id, repeat, text in zip(
            missing["external_id"].tolist(), missing["repeat"].tolist(), why.tolist(), strict=True
        )
    ]


def _counts_by(cases: pd.DataFrame, key: str) -> dict[Hashable, dict[str, int]]:
    table = cases.groupby(key)[list(_COUNTS)].sum().sort_index()
    # The columns are _COUNTS, so each one's name is a str.
    return {name: {cast(str, col): int(value) for col, value in counts.items()} for name, counts in table.iterrows()}


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def _scalar_figures(c: dict[str, int]) -> dict[str, Any]:
    """Every scalar figure from one group's integer counts."""
    matches = c["hp_jp"] + c["hf_jf"]
    human_pass_evaluated = c["hp_jp"] + c["hp_jf"]
    human_fail_evaluated = c["hf_jp"] + c["hf_jf"]
    confusion = pd.DataFrame(
        [[c["hp_jp"], c["hp_jf"]], [c["hf_jp"], c["hf_jf"]]], index=list(VERDICTS), columns=list(VERDICTS)
    )
    kappa, kappa_note = _kappa_from_table(confusion)
    if c["repeatable"]:
        flip_rate, flip_note = c["flips"] / c["repeatable"], None
    else:
        # K = 1 (or every case lost repeats): nothing can flip. 0 by definition; the note says why.
        flip_rate, flip_note = 0.0, "no case has two or more evaluated repeats"
    return {
        "n": c["n"],
        "judgments": c["judgments"],
        "evaluated": c["evaluated"],
        "agreement": _ratio(matches, c["evaluated"]),
        "agreement_ci95": clustered_agreement_interval(
            matches=matches, evaluated=c["evaluated"], matches_sq=c["matches_sq"],
            matches_evaluated=c["matches_evaluated"], evaluated_sq=c["evaluated_sq"], cases=c["clusters"],
        ),
        "kappa": kappa,
        "kappa_note": kappa_note,
        "false_pass": c["hf_jp"],
        "false_pass_rate": _ratio(c["hf_jp"], human_fail_evaluated),
        "false_fail": c["hp_jf"],
        "false_fail_rate": _ratio(c["hp_jf"], human_pass_evaluated),
        # Computed from the matching counts, not as 1 − rate, so a boundary like 0.70 stays exact.
        "true_pass_rate": _ratio(c["hp_jp"], human_pass_evaluated),
        "true_fail_rate": _ratio(c["hf_jf"], human_fail_evaluated),
        "flips": c["flips"],
        "flip_rate": flip_rate,
        "flip_note": flip_note,
        "coverage": _ratio(c["evaluated"], c["judgments"]),
        # Where a second-opinion judge disagreed, over the same evaluated judgments as agreement.
        "contested": c["contested"],
        "contested_rate": _ratio(c["contested"], c["evaluated"]),
    }


def _overfit_warning(by_split: dict[Hashable, dict[str, int]]) -> bool:
    """dev agreement − holdout agreement > 0.10, compared exactly on the integer counts."""
    dev, holdout = by_split.get("dev"), by_split.get("holdout")
    if not dev or not holdout or not dev["evaluated"] or not holdout["evaluated"]:
        return False
    dev_match, dev_n = dev["hp_jp"] + dev["hf_jf"], dev["evaluated"]
    hold_match, hold_n = holdout["hp_jp"] + holdout["hf_jf"], holdout["evaluated"]
    gap_num, gap_den = OVERFIT_GAP
    return gap_den * (dev_match * hold_n - hold_match * dev_n) > gap_num * dev_n * hold_n


def _sorted_ids(ids: pd.Series) -> list[str]:
    return sorted(set(ids.tolist()))  # tolist(): iterating a pandas string column is slow


def calibration_figures(
    judgments: pd.DataFrame,
    *,
    cases: pd.DataFrame | None = None,
    reviewer_agreement: dict | None = None,
    reviewer_labels: pd.DataFrame | None = None,
) -> dict:
    """The calibration figures of one run (see the module docstring for the frames).

    `cases` is the run's cases frame (`case_counts(judgments)` when not given). With it, `judgments` may
    hold just the not-evaluated judgments: the figures read nothing else from it. `reviewer_labels` (the
    rubric's labels on cases with two or more, rows case, reviewer, verdict) adds `judge_above_reviewers`
    and, when the judge is above them, its warning.
    """
    cases = case_counts(judgments) if cases is None else cases
    counted = _counted_cases(cases)
    by_category = _counts_by(counted, "category")
    by_split = _counts_by(counted, "split")
    by_kind = _counts_by(counted, "kind")
    above = None if reviewer_labels is None else judge_above_reviewers(cases, reviewer_labels)
    warnings = [OVERFIT_WARNING] if _overfit_warning(by_split) else []
    if above is not None and above["above"]:
        warnings.append(above_reviewers_warning(above))
    overall = {col: int(counted[col].sum()) for col in _COUNTS}
    return {
        **_scalar_figures(overall),
        "not_evaluated": _not_evaluated(judgments),
        "confusion": {
            "human_pass": {"judge_pass": overall["hp_jp"], "judge_fail": overall["hp_jf"]},
            "human_fail": {"judge_pass": overall["hf_jp"], "judge_fail": overall["hf_jf"]},
        },
        "false_pass_cases": _sorted_ids(counted.loc[counted["hf_jp"].gt(0), "external_id"]),
        "false_fail_cases": _sorted_ids(counted.loc[counted["hp_jf"].gt(0), "external_id"]),
        "flipped_cases": _sorted_ids(counted.loc[counted["flips"].eq(1), "external_id"]),
        "contested_cases": _sorted_ids(counted.loc[counted["contested"].gt(0), "external_id"]),
        "by_category": {str(name): _scalar_figures(c) for name, c in by_category.items()},
        "by_split": {str(name): _scalar_figures(c) for name, c in by_split.items()},
        "by_kind": {str(name): _scalar_figures(c) for name, c in by_kind.items()},
        # Calibration kinds with no case with a human verdict: the set does not test what they test.
        "missing_kinds": [kind for kind in KINDS if kind not in by_kind],
        "warnings": warnings,
        "reviewer_agreement": reviewer_agreement,
        "judge_above_reviewers": above,
        **case_confusions(cases),
    }


def judge_above_reviewers(cases: pd.DataFrame, labels: pd.DataFrame) -> dict[str, Any]:
    """Does the judge agree with the reviewers more than they agree with each other? (docs/calibration.md,
    "A judge more agreeable than the reviewers"). The one place this is decided: the report, its JSON,
    `calibration_report`, the promotion page and the promotion services all read `above`.

    `cases`: the run's cases frame (case_id, passes, fails); `labels`: one row per counting label of the
    rubric on the run's dataset (case, reviewer, verdict). Compared like with like, on the cases with two
    or more labels and an evaluated judgment, case by case: the judge's agreement with each individual
    label (over its evaluated repeats) against the share of the case's pairs of labels that agree. The
    test is the paired normal test on the per-case differences d: z = mean(d) / (sd(d) / √G), one-sided;
    `above` when z > 1.645 (all d equal: when they are above 0), and never on fewer than 20 cases.

    Returns {"cases", "judge", "reviewers", "difference", "z", "above", "note"}: judge and reviewers are
    the per-case means (None without cases), z None when it is undefined, note saying why nothing was
    tested.
    """
    labels = labels.reindex(columns=["case", "reviewer", "verdict"])
    per_case = labels.assign(label_passes=labels["verdict"].eq("pass").astype(int)).groupby("case").agg(
        labels=("reviewer", "size"), label_passes=("label_passes", "sum")
    )
    judged = cases.reindex(columns=["case_id", "passes", "fails"]).astype({"passes": int, "fails": int})
    both = judged.merge(per_case, left_on="case_id", right_index=True, how="inner")
    both = both[(both["labels"] >= 2) & (both["passes"] + both["fails"] > 0)]
    result: dict[str, Any] = {"cases": len(both), "judge": None, "reviewers": None, "difference": None,
                              "z": None, "above": False, "note": None}
    if both.empty:
        result["note"] = "no case has two or more labels and an evaluated judgment"
        return result
    passes, fails, n_labels = both["passes"], both["fails"], both["labels"]
    label_passes = both["label_passes"]
    label_fails = n_labels - label_passes
    judge = (passes * label_passes + fails * label_fails) / ((passes + fails) * n_labels)
    reviewers = (label_passes * (label_passes - 1) + label_fails * (label_fails - 1)) / (n_labels * (n_labels - 1))
    difference = judge - reviewers
    mean = float(difference.mean())
    result |= {"judge": float(judge.mean()), "reviewers": float(reviewers.mean()), "difference": mean}
    if len(both) < ABOVE_REVIEWERS_MIN_CASES:
        result["note"] = (
            f"only {len(both)} case{'s' if len(both) != 1 else ''} with two or more labels "
            f"(the test needs {ABOVE_REVIEWERS_MIN_CASES})"
        )
        return result
    spread = float(difference.std(ddof=1))
    if spread == 0:
        # Every case differs by the same amount: no noise, so any lead is significant.
        result["above"] = mean > 0
        return result
    z = mean / (spread / math.sqrt(len(both)))
    result |= {"z": z, "above": z > NORMAL_Z95_ONE_SIDED}
    return result


def above_reviewers_warning(test: dict[str, Any]) -> str:
    """The report's and the command's warning for a judge `judge_above_reviewers` found above them."""
    return (
        f"suspect: on the {test['cases']} cases with two or more labels the judge agrees with each reviewer's "
        f"label {test['judge'] * 100:.1f} % of the time, the reviewers with each other {test['reviewers'] * 100:.1f} %"
        " (a one-sided 95 % test paired by case): like a judge at 100 %, it may be echoing what it is shown"
    )


def disagreements(cases: pd.DataFrame) -> list[dict[str, Any]]:
    """Cases (with a human verdict) where an evaluated repeat differs from it, for the report's table.

    One dict per case of a cases frame, ordered by external_id: case_id, external_id, category, split,
    human, passes and fails. Each repeat's verdict and reason are read for one page of the table.
    """
    counted = cases.reindex(columns=list(CASE_COLUMNS))
    human = counted["human"]
    wrong = (human.eq("pass") & counted["fails"].gt(0)) | (human.eq("fail") & counted["passes"].gt(0))
    shown = counted[wrong].assign(
        external_id=lambda df: df["external_id"].astype(str),
        category=lambda df: df["category"].fillna("").astype(str),
        split=lambda df: df["split"].fillna("").astype(str),
    ).sort_values(["external_id", "case_id"])  # case_id is unique: no tie to keep stable
    columns = ["case_id", "external_id", "category", "split", "human", "passes", "fails"]
    return [
        {"case_id": int(case_id), "external_id": external_id, "category": category, "split": split,
         "human": verdict, "passes": int(passes), "fails": int(fails)}
        for case_id, external_id, category, split, verdict, passes, fails in zip(
            *(shown[column].tolist() for column in columns), strict=True
        )
    ]
