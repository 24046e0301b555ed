"""The threshold explorer: a run's similarities replayed under other `pass_at` / `fail_below` settings.

Pure numpy and pandas on one frame (no database): a row per judgment of the run, with the case's human
verdict. docs/calibration.md, "The threshold explorer": a judgment a setting decides by similarity is compared with
its human verdict; one it would send to the judge counts with the run's judge verdict where the run has
one, and as "judge needed" (apart from agreement) where it has none. Judgments without a similarity
(no reference, a failed contract, embeddings that never came) keep the run's verdict, so at the run's
own thresholds the explorer's agreement is the report's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

# human: "pass" | "fail" | None; outcome, layer: the judgment's; similarity: float or NaN.
EXPLORER_COLUMNS = ("human", "outcome", "layer", "similarity")
GRID_STEP = 0.01


@dataclass(frozen=True)
class Setting:
    pass_at: float
    fail_below: float | None = None


def replay(frame: pd.DataFrame, setting: Setting, *, behavioral: bool) -> dict[str, Any]:
    """The figures of one setting over the run's judgments (see the module's docstring).

    Only judgments of cases with a human verdict count in agreement and the rates; `judge_calls_saved`
    counts every judgment with a similarity that the setting decides without the judge.
    """
    similarity = frame["similarity"].to_numpy(dtype=np.float64)
    outcome = frame["outcome"].to_numpy(dtype=object)
    human = frame["human"].to_numpy(dtype=object)
    has = ~np.isnan(similarity)
    with np.errstate(invalid="ignore"):  # NaN compares false: those rows are masked by `has`
        passes = has & (similarity >= setting.pass_at)
        fails = has & ~passes
        if behavioral:
            fails &= similarity < setting.fail_below if setting.fail_below is not None else False
    band = has & ~passes & ~fails
    judged = (frame["layer"].to_numpy(dtype=object) == "behavioral") & np.isin(outcome, ["pass", "fail"])
    verdict = np.where(passes, "pass", np.where(fails, "fail", np.where(band & ~judged, "needed", outcome)))

    labeled = np.isin(human, ["pass", "fail"])
    evaluated = labeled & np.isin(verdict, ["pass", "fail"])
    human_pass, human_fail = evaluated & (human == "pass"), evaluated & (human == "fail")
    false_fail = int((human_pass & (verdict == "fail")).sum())
    false_pass = int((human_fail & (verdict == "pass")).sum())
    n, n_pass, n_fail = int(evaluated.sum()), int(human_pass.sum()), int(human_fail.sum())
    decided = int((passes | fails).sum())
    return {
        "pass_at": setting.pass_at,
        "fail_below": setting.fail_below,
        "n": n,
        "agreement": (n - false_pass - false_fail) / n if n else None,
        "true_pass_rate": 1 - false_fail / n_pass if n_pass else None,
        "true_fail_rate": 1 - false_pass / n_fail if n_fail else None,
        "false_pass": false_pass,
        "false_fail": false_fail,
        "judge_needed": int((labeled & (verdict == "needed")).sum()),
        "with_similarity": int(has.sum()),
        "judge_calls_saved": decided,
        "sent_to_judge": int(band.sum()) if behavioral else 0,
    }


def sweep(frame: pd.DataFrame, *, fail_below: float | None, behavioral: bool, lo: float = 0.0) -> list[dict[str, Any]]:
    """`replay` at every pass_at from `lo` to 1 in steps of GRID_STEP, fail_below held (clamped to pass_at)."""
    steps = round((1.0 - lo) / GRID_STEP)
    grid = [round(lo + i * GRID_STEP, 2) for i in range(steps + 1)]
    return [
        replay(frame, Setting(p, None if fail_below is None else min(fail_below, p)), behavioral=behavioral)
        for p in grid
    ]
