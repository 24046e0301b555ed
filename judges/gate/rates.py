"""The agent's pass rate in CI: the judge's pass rate on the new outputs corrected with the evidence's true
pass and fail rates over cases (Rogan–Gladen, docs/estimates.md). Plain Python, no Django.

The evidence's case counts come with the gate config (`calibration.cases`, each case's majority verdict over
the evidence's K repeats; `cases_single`, its repeat-1 verdict): CI's verdicts are made the same way when
`--repeats` equals K (`cases`) or is 1 (`cases_single`); any other `--repeats` uses the nearer of the two,
marked approximate.
"""

from __future__ import annotations

import math
from typing import Any

Z95 = 1.959963984540054  # the 97.5 % quantile of the standard normal
METHOD = "delta"  # how the interval is made (docs/estimates.md)
# Why a correction has no estimate or no interval, as the summary says it.
STATUS_TEXT = {
    "undefined": "undefined: the evidence's TPR + TFR is at most 1, so the judge's rate says nothing about the "
                 "agent's",
    "unbounded": "unbounded: the lower 95 % bound of the evidence's TPR + TFR - 1 is at most 0, so the "
                 "corrected rate could be anything",
    "no_case_counts": "not made: the evidence was promoted before case counts were kept; renew it to get them",
    "no_cases": "not made: no case was evaluated",
}
ASSUMPTION = "Assumes the judge errs on these outputs as it did on the evidence's cases."


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))


def rogan_gladen(*, passed: int, judged: int, tp: int, fn: int, fp: int, tn: int) -> dict[str, Any]:
    """The judge's pass rate p = passed / judged corrected with the evidence's true pass and fail rates.

    theta = (p + TFR - 1) / (TPR + TFR - 1), clipped to [0, 1]. With J = TPR + TFR - 1 and FPR = 1 - TFR,
    the delta method gives
        Var(theta) = [p(1-p)/judged + theta^2 TPR(1-TPR)/(tp+fn) + (1-theta)^2 FPR(1-FPR)/(fp+tn)] / J^2
    (theta unclipped), counting the CI sample and the evidence's case counts as independent binomials.
    `status`: "ok"; "undefined" when J <= 0 or a count is missing; "unbounded" when J's own lower 95 %
    bound is <= 0 (the correction could be anything).
    """
    positives, negatives = tp + fn, fp + tn
    result: dict[str, Any] = {"status": "undefined", "estimate": None, "ci95": None,
                              "judge_pass_rate": passed / judged if judged else None,
                              "true_pass_rate": tp / positives if positives else None,
                              "true_fail_rate": tn / negatives if negatives else None}
    if not judged or not positives or not negatives:
        return result
    p, tpr, fpr = passed / judged, tp / positives, fp / negatives
    youden = tpr - fpr
    if youden <= 0:
        return result
    theta = (p - fpr) / youden
    result["estimate"] = _clip(theta)
    youden_se = math.sqrt(tpr * (1 - tpr) / positives + fpr * (1 - fpr) / negatives)
    if youden - Z95 * youden_se <= 0:
        result["status"] = "unbounded"
        return result
    variance = (p * (1 - p) / judged + theta * theta * tpr * (1 - tpr) / positives
                + (1 - theta) ** 2 * fpr * (1 - fpr) / negatives) / youden ** 2
    half = Z95 * math.sqrt(variance)
    result.update(status="ok", ci95=[_clip(theta - half), _clip(theta + half)])
    return result


def evidence_counts(calibration: dict[str, Any] | None, repeats: int) -> tuple[str | None, bool]:
    """(which case counts correct CI's rate at `repeats`, whether that is approximate): "cases" at the
    evidence's K, "cases_single" at 1, otherwise the nearer (the majority's on a tie), approximate; None
    when the evidence has no case counts (no evidence, or a snapshot older than them)."""
    calibration = calibration or {}
    k = calibration.get("repeats")
    if not isinstance(k, int) or not isinstance(calibration.get("cases"), dict):
        return None, False
    if repeats == k:
        return "cases", False
    single = calibration.get("cases_single")
    if repeats == 1:
        return ("cases_single", False) if isinstance(single, dict) else (None, False)
    if abs(repeats - 1) < abs(repeats - k) and isinstance(single, dict):
        return "cases_single", True
    return "cases", True


def corrected_rate(*, passed: int, failed: int, counts: dict[str, int] | None) -> dict[str, Any]:
    """One corrected rate: rogan_gladen over the evaluated cases (not-evaluated ones are left out of p),
    with `status` "no_case_counts" when there are no counts and "no_cases" when nothing was evaluated."""
    if counts is None:
        return {"status": "no_case_counts", "estimate": None, "ci95": None,
                "judge_pass_rate": passed / (passed + failed) if passed + failed else None,
                "true_pass_rate": None, "true_fail_rate": None}
    figures = rogan_gladen(passed=passed, judged=passed + failed, **counts)
    if not passed + failed:
        figures["status"] = "no_cases"
    return figures


def pass_rate(
    *, calibration: dict[str, Any] | None, repeats: int, passed: int, failed: int,
    by_category: dict[str, tuple[int, int]],
) -> dict[str, Any]:
    """The rubric's corrected pass rate, and each category's (`by_category`: {category: (passed, failed)}),
    every one corrected with the rubric's evidence counts (the evidence has no per-category counts)."""
    which, approximate = evidence_counts(calibration, repeats)
    counts = (calibration or {})[which] if which else None  # parse_gate_config checked their shape
    return {
        **corrected_rate(passed=passed, failed=failed, counts=counts),
        "counts": which,
        "approximate": approximate,
        "evidence_repeats": (calibration or {}).get("repeats"),
        "method": METHOD,
        "by_category": {
            category: corrected_rate(passed=p, failed=f, counts=counts)
            for category, (p, f) in sorted(by_category.items())
        },
    }


def describe(figures: dict[str, Any]) -> str:
    """One line for the summary: the corrected rate and its interval, or why there is none."""
    status = figures["status"]
    if status in ("ok", "unbounded") and figures["estimate"] is not None:
        text = f"{figures['estimate'] * 100:.1f} %"
        if status == "ok":
            low, high = figures["ci95"]
            text += f" (95 % {low * 100:.1f}-{high * 100:.1f} %)"
        else:
            text += f", {STATUS_TEXT['unbounded']}"
    else:
        text = STATUS_TEXT[status]
    judge = figures["judge_pass_rate"]
    if judge is not None:
        text += f"; judge's rate {judge * 100:.1f} %"
    return text
