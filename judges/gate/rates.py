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
METHOD = "lang-reiczigel"  # how the interval is made (docs/estimates.md)
# Below this many evaluated cases the summary says "too few cases" instead of a rate: the interval still
# covers there, but at 5 cases it spans most of 0-100 % (docs/estimates.md, the coverage table).
MIN_CASES = 10
# Why a correction has no estimate or no interval, as the summary says it.
STATUS_TEXT = {
    "undefined": "undefined: the evidence's TPR + TFR is at most 1, so the judge's rate says nothing about the "
                 "agent's",
    "unbounded": "unbounded: the lower 95 % bound of the evidence's TPR + TFR - 1 is at most 0, so the "
                 "corrected rate could be anything",
    "no_case_counts": "not made: the evidence was promoted before case counts were kept; renew it to get them",
    "no_evidence": "not made: no evidence yet (the rubric has no promoted calibration run)",
    "no_cases": "not made: no case was evaluated",
    "too_few_cases": "not made: too few cases ({judged} evaluated; the correction needs at least {minimum})",
}
ASSUMPTION = "Assumes the judge errs on these outputs as it did on the evidence's cases."


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))


def rogan_gladen(*, passed: int, judged: int, tp: int, fn: int, fp: int, tn: int) -> dict[str, Any]:
    """The judge's pass rate p = passed / judged corrected with the evidence's true pass and fail rates.

    theta = (p + TFR - 1) / (TPR + TFR - 1), clipped to [0, 1]. Its 95 % interval is Lang & Reiczigel's
    (2014): p, TPR and TFR adjusted as Agresti-Coull does (p with z^2/2 passes and fails added, TPR and TFR
    with one of each), the delta method's standard error at the adjusted values, and the centre shifted by
        d = 2 z^2 (theta' TPR'(1-TPR')/n_pos' - (1-theta') TFR'(1-TFR')/n_neg').
    Unlike the plain delta method it does not collapse to a point at p = 0 or 1, and it covers at small n
    (docs/estimates.md). `status`: "ok"; "undefined" when J = TPR + TFR - 1 <= 0 or a count is missing;
    "unbounded" when J's own lower 95 % bound is <= 0 (the correction could be anything); "too_few_cases"
    below MIN_CASES evaluated cases.
    """
    positives, negatives = tp + fn, fp + tn
    result: dict[str, Any] = {"status": "undefined", "estimate": None, "ci95": None, "judged": judged,
                              "judge_pass_rate": passed / judged if judged else None,
                              "true_pass_rate": tp / positives if positives else None,
                              "true_fail_rate": tn / negatives if negatives else None}
    if not judged or not positives or not negatives:
        return result
    p, tpr, fpr = passed / judged, tp / positives, fp / negatives
    youden = tpr - fpr
    if youden <= 0:
        return result
    result["estimate"] = _clip((p - fpr) / youden)
    youden_se = math.sqrt(tpr * (1 - tpr) / positives + fpr * (1 - fpr) / negatives)
    if youden - Z95 * youden_se <= 0:
        result["status"] = "unbounded"
        return result
    if judged < MIN_CASES:
        result.update(status="too_few_cases", estimate=None)
        return result
    result.update(status="ok", ci95=lang_reiczigel(passed=passed, judged=judged, tp=tp, fn=fn, fp=fp, tn=tn))
    return result


def lang_reiczigel(*, passed: int, judged: int, tp: int, fn: int, fp: int, tn: int) -> list[float]:
    """The 95 % interval of Lang & Reiczigel (2014) for a prevalence corrected with an estimated
    sensitivity (TPR) and specificity (TFR), clipped to [0, 1]; the caller has checked that J > 0."""
    z2 = Z95 * Z95
    n_ci, n_pos, n_neg = judged + z2, tp + fn + 2, fp + tn + 2
    p, tpr, tfr = (passed + z2 / 2) / n_ci, (tp + 1) / n_pos, (tn + 1) / n_neg
    youden = tpr + tfr - 1
    theta = (p + tfr - 1) / youden
    spread_pos, spread_neg = tpr * (1 - tpr) / n_pos, tfr * (1 - tfr) / n_neg
    se = math.sqrt(p * (1 - p) / n_ci + theta * theta * spread_pos + (1 - theta) ** 2 * spread_neg) / youden
    centre = theta + 2 * z2 * (theta * spread_pos - (1 - theta) * spread_neg)
    return [_clip(centre - Z95 * se), _clip(centre + Z95 * se)]


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


def corrected_rate(*, passed: int, failed: int, counts: dict[str, int] | None,
                   calibration: dict[str, Any] | None) -> dict[str, Any]:
    """One corrected rate: rogan_gladen over the evaluated cases (not-evaluated ones are left out of p),
    with `status` "no_evidence" when the rubric has no evidence, "no_case_counts" when its evidence has no
    counts and "no_cases" when nothing was evaluated."""
    if counts is None:
        return {"status": "no_case_counts" if calibration else "no_evidence", "estimate": None, "ci95": None,
                "judged": passed + failed,
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
        **corrected_rate(passed=passed, failed=failed, counts=counts, calibration=calibration),
        "counts": which,
        "approximate": approximate,
        "evidence_repeats": (calibration or {}).get("repeats"),
        "method": METHOD,
        "by_category": {
            category: corrected_rate(passed=p, failed=f, counts=counts, calibration=calibration)
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
        text = STATUS_TEXT[status].format(judged=figures.get("judged"), minimum=MIN_CASES)
    judge = figures["judge_pass_rate"]
    if judge is not None:
        text += f"; judge's rate {judge * 100:.1f} %"
    return text
