"""The seeded simulation of a monitor's estimators (docs/monitoring.md, "Checks"): 14 daily windows, the agent's
true pass rate dropping on day 8 with new failures the judge misses. Plain numpy; the benchmark runs it at
full size and a test at a smaller one."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from judges.monitoring.estimates import WindowFigures, change, drift, window_figures

DAYS, DROP_DAY, BASELINE_DAYS = 14, 8, 7
CASES, SAMPLE, LABELS = 2000, 0.5, 150
BEFORE, AFTER = 0.80, 0.70
TPR, TNR_OLD, TNR_NEW = 0.95, 0.6, 0.2
FLOOR = 0.80


@dataclass
class Tally:
    repeats: int = 0
    covered: np.ndarray = field(default_factory=lambda: np.zeros(DAYS))
    raw: np.ndarray = field(default_factory=lambda: np.zeros(DAYS))
    corrected: np.ndarray = field(default_factory=lambda: np.zeros(DAYS))
    width: np.ndarray = field(default_factory=lambda: np.zeros(DAYS))
    labeled: np.ndarray = field(default_factory=lambda: np.zeros(DAYS))
    flagged_by_day9: int = 0
    false_alarms: int = 0  # days 2-7 worse than the day before
    comparisons: int = 0
    baseline_false_alarms: int = 0  # days 2-7 worse than the days before them (1 .. d-1)
    drift_fired: np.ndarray = field(default_factory=lambda: np.zeros(DAYS))


def one_day(rng: np.random.Generator, day: int) -> tuple[WindowFigures, float, float]:
    """One window: (its figures, the true rate, the drift rule's verdict as 0/1)."""
    true = BEFORE if day < DROP_DAY else AFTER
    judged = rng.random(CASES) < SAMPLE
    n = int(judged.sum())
    # Each case: a pass, an old kind of failure, or (from the drop) a new kind the judge mostly misses.
    u = rng.random(n)
    new_share = 0.0 if day < DROP_DAY else BEFORE - AFTER
    passes, new_fail = u < true, (u >= true) & (u < true + new_share)
    judge_pass_p = np.where(passes, TPR, np.where(new_fail, 1 - TNR_NEW, 1 - TNR_OLD))
    f = (rng.random(n) < judge_pass_p).astype(float)
    probability = min(1.0, LABELS / (CASES * SAMPLE))
    audited = rng.random(n) < probability
    human = np.where(audited, passes.astype(float), np.nan)
    figures = window_figures(f=f, audited=audited, human=human, probability=np.full(n, probability))
    return figures, true, float(drift(f=f[audited], human=human[audited], floor=FLOOR).fires)


def simulate(repeats: int, seed: int = 20261206) -> Tally:
    tally = Tally(repeats=repeats)
    rng = np.random.default_rng(seed)
    for _ in range(repeats):
        days = []
        for day in range(1, DAYS + 1):
            figures, true, fired = one_day(rng, day)
            days.append(figures)
            i = day - 1
            assert figures.ci95 is not None and figures.estimate is not None and figures.raw is not None
            tally.covered[i] += figures.ci95[0] <= true <= figures.ci95[1]
            tally.raw[i] += figures.raw
            tally.corrected[i] += figures.estimate
            tally.width[i] += figures.ci95[1] - figures.ci95[0]
            tally.labeled[i] += figures.labeled
            tally.drift_fired[i] += fired
        baseline = days[:BASELINE_DAYS]
        flags = [change(days[d - 1], baseline) for d in (DROP_DAY, DROP_DAY + 1)]
        tally.flagged_by_day9 += any(c is not None and c.worse for c in flags)
        for d in range(2, BASELINE_DAYS + 1):
            previous = change(days[d - 1], [days[d - 2]])
            before = change(days[d - 1], days[: d - 1])
            tally.comparisons += 1
            tally.false_alarms += bool(previous and previous.worse)
            tally.baseline_false_alarms += bool(before and before.worse)
    return tally


def report(tally: Tally) -> str:
    r = tally.repeats
    lines = [f"{r} repeats, {DAYS} daily windows of {CASES} cases, sample {SAMPLE}, {LABELS} labels asked a day",
             "day  true  judge raw  corrected  width  labeled  covered  drift fired"]
    for i in range(DAYS):
        true = BEFORE if i + 1 < DROP_DAY else AFTER
        lines.append(f"{i + 1:>3}  {true:.2f}  {tally.raw[i] / r:9.3f}  {tally.corrected[i] / r:9.3f}  "
                     f"{tally.width[i] / r:5.3f}  {tally.labeled[i] / r:7.1f}  {tally.covered[i] / r:7.3f}  "
                     f"{tally.drift_fired[i] / r:11.3f}")
    lines.append(f"lowest window coverage {tally.covered.min() / r:.3f}")
    lines.append(f"drop flagged against the baseline by day {DROP_DAY + 1}: {tally.flagged_by_day9 / r:.3f}")
    lines.append(f"false alarms days 2-{BASELINE_DAYS}, vs previous day: {tally.false_alarms / tally.comparisons:.4f}; "
                 f"vs the days before: {tally.baseline_false_alarms / tally.comparisons:.4f}")
    return "\n".join(lines)
