"""A monitor's windows and their figures, read from the database (docs/monitoring.md).

Five queries however many windows and cases: the windows; the days with their runs and costs; the judgments of
those runs counted by verdict; the audited cases one by one, and their human verdicts. The estimate sees a case
that was not audited only through its verdict, so the other cases are rebuilt from the counts (as
judges.estimates does)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import numpy as np
from django.db.models import Count, OuterRef, Subquery
from django.utils import timezone

from judges.models import Judgment, Monitor, MonitorCase, MonitorDay, MonitorMessage, MonitorWindow
from judges.monitoring.estimates import Change, Drift, WindowFigures, change, drift, suggested_sample, window_figures
from judges.monitoring.windows import window_start
from labeling.disputes.selectors import cases_with_human_verdict
from labeling.models import Case

VERDICT = {"pass": 1.0, "fail": 0.0}


@dataclass
class WindowRow:
    window: MonitorWindow
    figures: WindowFigures
    cost_usd: Decimal = Decimal(0)
    asked: int = 0
    vs_previous: Change | None = None
    vs_baseline: Change | None = None
    drift: Drift | None = None
    in_baseline: bool = False
    current: bool = False  # the window still open
    covers: str = ""  # "00:00–14:20" when a cap cut it short
    suggested_sample: float | None = None
    extra: dict = field(default_factory=dict)

    @property
    def provisional(self) -> bool:
        return self.current or self.figures.pending > 0


def _outcome():
    return Subquery(Judgment.objects.filter(run_id=OuterRef("day__run_id"), case_id=OuterRef("case_id"), repeat=1)
                    .values("outcome")[:1])


def monitor_windows(*, monitor: Monitor, now: datetime | None = None, last: int | None = None) -> list[WindowRow]:
    """The monitor's windows, oldest first (the `last` newest only, plus the baseline's), with their figures,
    changes, drift, cost and coverage."""
    now = now or timezone.now()
    windows = list(monitor.windows.order_by("start"))
    pinned = set(monitor.baseline)
    if last is not None:
        windows = [w for i, w in enumerate(windows)
                   if i >= len(windows) - last - 1 or w.start.date().isoformat() in pinned]
    by_start = {w.start: w for w in windows}
    days = [(day, run_id, cost) for day, run_id, cost in MonitorDay.objects.filter(monitor=monitor)
            .values_list("day", "run_id", "run__cost_usd")]
    window_of_run: dict[int, int] = {}
    costs: dict[int, Decimal] = defaultdict(Decimal)
    for day, run_id, cost in days:
        window = by_start.get(window_start(monitor.window, datetime(day.year, day.month, day.day, tzinfo=UTC)))
        if window is not None:
            window_of_run[run_id] = window.pk
            costs[window.pk] += cost or Decimal(0)
    # The verdicts of each window's judged cases, counted from its days' runs: one grouped query on the judgments'
    # own index, not a lookup per case. A case a cap left unjudged ("spend cap") is no judged case of the window.
    counts: dict[int, dict[str | None, int]] = defaultdict(lambda: defaultdict(int))
    for run_id, outcome, n in (Judgment.objects.filter(run_id__in=list(window_of_run), repeat=1)
                               .exclude(error="spend cap").values("run_id", "outcome").annotate(n=Count("id"))
                               .order_by().values_list("run_id", "outcome", "n")):
        counts[window_of_run[run_id]][outcome] += n
    audited = list(MonitorCase.objects.filter(monitor=monitor, window_id__in=[w.pk for w in windows],
                                              audited=True, skipped="", day__isnull=False).annotate(outcome=_outcome())
                   .values_list("window_id", "case_id", "audit_probability", "outcome"))
    human = dict(cases_with_human_verdict(rubric=monitor.rubric, cases=Case.objects.filter(
        pk__in=[row[1] for row in audited])).values_list("pk", "human_verdict"))  # type: ignore[misc]
    by_window: dict[int, list[tuple]] = defaultdict(list)
    for window_id, case_id, drawn_with, outcome in audited:
        by_window[window_id].append((drawn_with, outcome, human.get(case_id)))
        if outcome is not None:
            counts[window_id][outcome] -= 1  # counted one by one below, as a drawn case
    rows = []
    for window in windows:
        drawn = by_window.get(window.pk, [])
        f_drawn = [VERDICT.get(outcome or "", np.nan) for _, outcome, _ in drawn]
        f_rest = [VERDICT.get(outcome or "", np.nan) for outcome, n in counts.get(window.pk, {}).items()
                  for _ in range(n)]
        f = np.array(f_drawn + f_rest, dtype=float)
        audited_mask = np.zeros(len(f), dtype=bool)
        audited_mask[: len(drawn)] = True
        h = np.full(len(f), np.nan)
        h[: len(drawn)] = [VERDICT.get(verdict or "", np.nan) for _, _, verdict in drawn]
        probability = np.full(len(f), window.audit_probability)
        probability[: len(drawn)] = [p for p, _, _ in drawn]
        figures = window_figures(f=f, audited=audited_mask, human=h, probability=probability)
        row = WindowRow(window=window, figures=figures, cost_usd=costs.get(window.pk, Decimal(0)),
                        asked=monitor.labels_per_window, in_baseline=window.start.date().isoformat() in pinned,
                        current=window.end > now)
        row.drift = drift(f=f[: len(drawn)], human=h[: len(drawn)], floor=monitor.rubric.agreement_floor)
        if window.capped_at is not None:
            row.covers = f"{window.start:%H:%M}–{window.capped_at:%H:%M}"
            if window.end - window.start > timedelta(days=1):
                row.covers = f"{window.start:%a %H:%M}–{window.capped_at:%a %H:%M}"
            if monitor.spend_cap_usd:
                # A capped window is rare: one count of the traffic that came before its cap.
                covered = MonitorCase.objects.filter(window=window, arrived_at__lte=window.capped_at).count()
                row.suggested_sample = suggested_sample(
                    sample=monitor.sample, spent_usd=float(row.cost_usd), cap_usd=float(monitor.spend_cap_usd),
                    covered_cases=covered,
                    window_cases=max(window.traffic, window.expected_cases if row.current else 0))
        rows.append(row)
    baseline = [row.figures for row in rows if row.in_baseline]
    for i, row in enumerate(rows):
        if i > 0:
            row.vs_previous = change(row.figures, [rows[i - 1].figures])
        if baseline and not row.in_baseline:
            row.vs_baseline = change(row.figures, baseline)
    return rows


def messages(*, monitor: Monitor, limit: int = 50) -> list[MonitorMessage]:
    """The monitor's newest messages with their deliveries and channels. Two queries."""
    return list(monitor.messages.prefetch_related("deliveries__channel")[:limit])


@dataclass
class MonitorSummary:
    monitor: Monitor
    latest: WindowRow | None
    arrow: str  # "↑" / "↓" when the change vs the window before (or the baseline) is sure, "→" otherwise


def monitors_with_latest(*, project) -> list[MonitorSummary]:
    """Each monitor of the project with its newest window's figures and an arrow: ↓ only when the difference's
    interval lies below zero, ↑ above, → otherwise. A few queries per monitor (a project has few)."""
    found = []
    for monitor in project.monitors.select_related("rubric", "dataset").order_by("slug"):
        rows = monitor_windows(monitor=monitor, last=1)
        latest = rows[-1] if rows else None
        change_ = latest and (latest.vs_baseline or latest.vs_previous)
        arrow = "↓" if change_ and change_.worse else "↑" if change_ and change_.better else "→"
        found.append(MonitorSummary(monitor=monitor, latest=latest, arrow=arrow))
    return found
