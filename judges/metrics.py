"""Calibration figures of one run against one rubric's human verdicts (DESIGN "Calibration figures").

Pure pandas, no ORM: a selector builds the frame from one `.values()` query, one row per judgment:

    case_id, external_id, category, split, repeat, outcome, reason, error, contested, human

`outcome` is "pass" / "fail" / "not_evaluated"; `contested` is True where a second-opinion judge
disagreed (a frame without the column has none); `human` is the case's human verdict ("pass" / "fail" /
None). Only cases with a human verdict count, in every figure. Positive = the judge says pass.

Everything is counted once, vectorised, into a small table of integers per group (the whole run, each
category, each split); every rate is then derived from those integers by one scalar function, so the
overall figures and the per-group figures cannot drift apart. The result is a plain JSON-serialisable
dict: Python ints/floats/None/str/lists only, never a numpy type or NaN.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd

COLUMNS = (
    "case_id", "external_id", "category", "split", "repeat", "outcome", "reason", "error", "contested", "human",
)
VERDICTS = ("pass", "fail")
WILSON_Z95 = 1.959963984540054  # the 97.5 % quantile of the standard normal
OVERFIT_GAP = (1, 10)  # dev agreement may beat holdout by at most 10 points, as an exact fraction
OVERFIT_WARNING = "dev agreement beats holdout by more than 10 points (an overfit prompt)"

# The integer counts every figure is derived from. Row counts are per judgment, case counts per case.
_ROW_COUNTS = ("judgments", "evaluated", "hp_jp", "hp_jf", "hf_jp", "hf_jf", "contested")
_CASE_COUNTS = ("n", "flips", "repeatable")


def wilson_interval(successes: int, n: int, z: float = WILSON_Z95) -> list[float] | None:
    """Wilson score interval for successes / n; None when n is 0 (nothing to estimate)."""
    successes, n = int(successes), int(n)
    if n <= 0:
        return None
    p = successes / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denominator
    low, high = centre - half, centre + half
    # Mathematically the bound is exactly 0 (none) or 1 (all); in floats it can miss by 1e-16, and a
    # page must not show 100 % as 99.99999… Otherwise clamp only against noise.
    return [0.0 if successes == 0 else max(0.0, low), 1.0 if successes == n else min(1.0, high)]


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


def _prepare(frame: pd.DataFrame) -> pd.DataFrame:
    """The judgments of cases with a human verdict, with one 0/1 column per count."""
    frame = frame.reindex(columns=list(COLUMNS))  # an empty `.values()` frame has no columns at all
    df = frame[frame["human"].isin(VERDICTS)]
    human_pass = df["human"].eq("pass")
    judge_pass = df["outcome"].eq("pass")
    judge_fail = df["outcome"].eq("fail")
    evaluated = judge_pass | judge_fail
    error = df["error"].fillna("").astype(str)
    reason = df["reason"].fillna("").astype(str)
    return pd.DataFrame(
        {
            "case_id": df["case_id"],
            "external_id": df["external_id"].astype(str),
            "category": df["category"].fillna("").astype(str),
            "split": df["split"].fillna("").astype(str),
            "repeat": df["repeat"],
            "outcome": df["outcome"],
            "human": df["human"],
            # The judge's reason for a verdict; for a missing verdict the engine's error if it has one.
            "why": reason.where(evaluated | error.eq(""), error),
            "judgments": 1,
            "evaluated": evaluated.astype(int),
            "hp_jp": (human_pass & judge_pass).astype(int),
            "hp_jf": (human_pass & judge_fail).astype(int),  # false fail
            "hf_jp": (~human_pass & judge_pass).astype(int),  # false pass
            "hf_jf": (~human_pass & judge_fail).astype(int),
            "judge_pass": judge_pass.astype(int),
            # Only an evaluated judgment can be contested (the primary's verdict stands, flagged);
            # eq(True) reads a missing column's NaN, None and False alike as "not contested".
            "contested": (df["contested"].eq(True) & evaluated).astype(int),
        }
    )


def _per_case(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per case: its category and split, and whether its evaluated repeats flipped."""
    cases = rows.groupby("case_id", sort=False).agg(
        external_id=("external_id", "first"),
        category=("category", "first"),
        split=("split", "first"),
        evaluated=("evaluated", "sum"),
        judge_pass=("judge_pass", "sum"),
    )
    cases["n"] = 1
    cases["repeatable"] = (cases["evaluated"] >= 2).astype(int)
    # A flip: among its evaluated repeats the judge said pass at least once and fail at least once.
    cases["flips"] = (
        (cases["judge_pass"] > 0) & (cases["judge_pass"] < cases["evaluated"])
    ).astype(int)
    return cases


def _counts_by(rows: pd.DataFrame, cases: pd.DataFrame, key: str) -> dict[Hashable, dict[str, int]]:
    by_row = rows.groupby(key)[list(_ROW_COUNTS)].sum()
    by_case = cases.groupby(key)[list(_CASE_COUNTS)].sum()
    table = by_row.join(by_case, how="outer").fillna(0).astype(int).sort_index()
    return {name: {col: int(value) for col, value in counts.items()} for name, counts in table.iterrows()}


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
        "agreement_ci95": wilson_interval(matches, c["evaluated"]),
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


def _overfit_warning(by_split: dict[str, dict[str, int]]) -> bool:
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


def calibration_figures(frame: pd.DataFrame, *, reviewer_agreement: dict | None = None) -> dict:
    """DESIGN's calibration figures of one run's judgments (see the module docstring for the frame)."""
    rows = _prepare(frame)
    cases = _per_case(rows)
    overall = {col: int(rows[col].sum()) for col in _ROW_COUNTS} | {
        col: int(cases[col].sum()) for col in _CASE_COUNTS
    }
    by_category = _counts_by(rows, cases, "category")
    by_split = _counts_by(rows, cases, "split")

    missing = rows[rows["evaluated"].eq(0)].sort_values(["external_id", "repeat"])
    not_evaluated = [
        {"external_id": str(external_id), "repeat": int(repeat), "reason": str(why)}
        for external_id, repeat, why in zip(
            missing["external_id"], missing["repeat"], missing["why"], strict=True
        )
    ]
    return {
        **_scalar_figures(overall),
        "not_evaluated": not_evaluated,
        "confusion": {
            "human_pass": {"judge_pass": overall["hp_jp"], "judge_fail": overall["hp_jf"]},
            "human_fail": {"judge_pass": overall["hf_jp"], "judge_fail": overall["hf_jf"]},
        },
        "false_pass_cases": _sorted_ids(rows.loc[rows["hf_jp"].eq(1), "external_id"]),
        "false_fail_cases": _sorted_ids(rows.loc[rows["hp_jf"].eq(1), "external_id"]),
        "flipped_cases": _sorted_ids(cases.loc[cases["flips"].eq(1), "external_id"]),
        "contested_cases": _sorted_ids(rows.loc[rows["contested"].eq(1), "external_id"]),
        "by_category": {str(name): _scalar_figures(c) for name, c in by_category.items()},
        "by_split": {str(name): _scalar_figures(c) for name, c in by_split.items()},
        "warnings": [OVERFIT_WARNING] if _overfit_warning(by_split) else [],
        "reviewer_agreement": reviewer_agreement,
    }


def disagreements(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Cases (with a human verdict) where an evaluated repeat differs from it, for the report's table.

    One dict per case, ordered by external_id: its human verdict, and every repeat's outcome and
    reason (not-evaluated repeats included, so the row reads as the run saw it), ordered by repeat.
    """
    rows = _prepare(frame)
    wrong = rows["hp_jf"].eq(1) | rows["hf_jp"].eq(1)
    shown = rows[rows["case_id"].isin(rows.loc[wrong, "case_id"])]
    shown = shown.sort_values(["external_id", "case_id", "repeat"], kind="stable")
    # Each case's rows are now contiguous: slice plain lists at the case boundaries rather than
    # building a Series per case (groupby(...).agg(list) is ten times slower here).
    starts = np.flatnonzero(~shown["case_id"].duplicated().to_numpy()).tolist()
    columns = {col: shown[col].tolist() for col in ("external_id", "category", "split", "human")}
    repeats, outcomes, reasons = (shown[col].tolist() for col in ("repeat", "outcome", "why"))
    return [
        {
            "external_id": columns["external_id"][a],
            "category": columns["category"][a],
            "split": columns["split"][a],
            "human": columns["human"][a],
            "repeats": [int(r) for r in repeats[a:b]],
            "outcomes": outcomes[a:b],
            "reasons": reasons[a:b],
        }
        for a, b in pairwise([*starts, len(shown)])
    ]
