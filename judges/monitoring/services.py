"""Writes of production monitoring (docs/monitoring.md): monitors, the periodic tick that draws and hands new cases
to the judge, pauses on an outage and stops at a spend cap, and the messages it leaves for the channels.

The judging itself is the run worker's (judges.runs.worker): each UTC day of a monitor is one run (source
`monitor`) whose spend cap is the monitor's daily cap and whose concurrency is its cap; the tick appends the day's
newly drawn cases to it as chunks. A case is drawn once (MonitorCase is unique per monitor and case), handed to a
run once (its `day` is set in the same transaction as the chunk is written), and a judgment is unique per (run,
case, repeat): nothing is judged twice; a case that arrives while judging is paused waits, recorded, for the
resume: nothing is lost.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import F, Min
from django.utils import timezone

from judges.drift.selectors import ci_events
from judges.models import (
    JudgeConfig,
    Judgment,
    Monitor,
    MonitorCase,
    MonitorDay,
    MonitorMessage,
    MonitorWindow,
    Run,
    RunChunk,
)
from judges.monitoring.delivery import deliveries_create
from judges.monitoring.selectors import monitor_windows
from judges.monitoring.windows import window_length, window_start
from judges.runs.services import queue_run_work
from judges.runs.tallies import case_tallies_refresh
from labeling.models import CaseTally, Dataset, QueuePriority, Rubric

# A provider that cannot answer (docs/judging.md): judging pauses and these judgments are asked again. A refused key
# or an invalid answer is not an outage: it stays not evaluated, as in any run.
OUTAGE_ERRORS = ("timeout", "rate limit", "server error", "connection error")
CASES_PER_TICK = 50_000  # a tick's bound on new cases read; the rest wait for the next tick


class MonitorError(ValueError):
    """A monitor cannot be made or changed as asked; the message says why."""


def _check(*, project, rubric: Rubric, dataset: Dataset, sample: float, concurrency: int, labels_per_window: int,
           spend_cap_usd: Decimal | None, by) -> None:
    if rubric.project_id != project.pk or dataset.project_id != project.pk:
        raise MonitorError("A monitor watches a rubric and a dataset of its own project.")
    if by is None or not by.leads(project.pk):
        raise MonitorError("Only a lead of the project may set up its monitors.")
    if not 0 < sample <= 1:
        raise MonitorError("The sample is a share above 0 % and up to 100 % of new cases.")
    if not 1 <= concurrency <= 64:
        raise MonitorError("Concurrency must be between 1 and 64.")
    if labels_per_window < 1:
        raise MonitorError("Ask at least one audit label per window.")
    if spend_cap_usd is not None and spend_cap_usd <= 0:
        raise MonitorError("A spend cap must be above $0 (leave it empty for none).")


def monitor_create(*, project, slug: str, rubric: Rubric, dataset: Dataset, sample: float = 1.0,
                   window: str = Monitor.Window.DAY, spend_cap_usd: Decimal | None = None, concurrency: int = 4,
                   labels_per_window: int = 150, expected_cases: int = 1000, digest: bool = False, by) -> Monitor:
    """A monitor of `rubric` on `dataset` that judges the cases arriving from now on (those already there are
    a run's business, as with traffic judging)."""
    _check(project=project, rubric=rubric, dataset=dataset, sample=sample, concurrency=concurrency,
           labels_per_window=labels_per_window, spend_cap_usd=spend_cap_usd, by=by)
    if slug == "channels":
        raise MonitorError("The name channels is the channels page's: choose another.")
    if project.monitors.filter(slug=slug).exists():
        raise MonitorError(f"The project has a monitor named {slug} already.")
    return Monitor.objects.create(
        project=project, slug=slug, rubric=rubric, dataset=dataset, sample=sample, window=window,
        spend_cap_usd=spend_cap_usd, concurrency=concurrency, labels_per_window=labels_per_window,
        expected_cases=max(1, expected_cases), digest=digest, seed=secrets.randbits(62), created_by=by,
        last_case_id=dataset.cases.order_by("-id").values_list("id", flat=True).first() or 0,
    )


def monitor_update(*, monitor: Monitor, sample: float, spend_cap_usd: Decimal | None, concurrency: int,
                   labels_per_window: int, digest: bool, enabled: bool, by) -> Monitor:
    """Change a monitor's settings; they apply to cases arriving from now on (a window's audit probability stays
    what it was when the window opened)."""
    _check(project=monitor.project, rubric=monitor.rubric, dataset=monitor.dataset, sample=sample,
           concurrency=concurrency, labels_per_window=labels_per_window, spend_cap_usd=spend_cap_usd, by=by)
    monitor.sample, monitor.spend_cap_usd, monitor.concurrency = sample, spend_cap_usd, concurrency
    monitor.labels_per_window, monitor.digest, monitor.enabled = labels_per_window, digest, enabled
    monitor.save(update_fields=["sample", "spend_cap_usd", "concurrency", "labels_per_window", "digest", "enabled"])
    return monitor


def baseline_pin(*, monitor: Monitor, starts: list[str], by) -> Monitor:
    """Pin the windows starting at `starts` (ISO dates) as the baseline; an empty list unpins it."""
    if by is None or not by.leads(monitor.project_id):
        raise MonitorError("Only a lead of the project may pin a baseline.")
    known = {w.date().isoformat() for w in monitor.windows.values_list("start", flat=True)}
    unknown = sorted(set(starts) - known)
    if unknown:
        raise MonitorError(f"No window of this monitor starts on {', '.join(unknown)}.")
    monitor.baseline = sorted(set(starts))
    monitor.save(update_fields=["baseline"])
    return monitor


def _draws(seed: int, case_id: int) -> tuple[float, float]:
    """The case's two uniform draws in [0, 1) (judged? audited?): from a hash of the monitor's seed and the case's
    id, so they are the same whenever they are made, independent across cases, and recorded. (A hash, not a
    seeded generator per case: that costs ten times as much at 100,000 cases a day.)"""
    digest = hashlib.blake2b(f"{seed}:{case_id}".encode(), digest_size=16).digest()
    return int.from_bytes(digest[:8], "big") / 2**64, int.from_bytes(digest[8:], "big") / 2**64


def _open_window(monitor: Monitor, start: datetime) -> MonitorWindow:
    """The window starting at `start`, opened with its audit probability: the labels asked over the judged cases
    expected (the traffic of the window before, else the monitor's expectation, times the sample)."""
    window = monitor.windows.filter(start=start).first()
    if window is not None:
        return window
    before = monitor.windows.filter(start__lt=start).order_by("-start").first()
    expected = before.traffic if before is not None and before.traffic else monitor.expected_cases
    judged = max(1.0, expected * monitor.sample)
    return MonitorWindow.objects.create(
        monitor=monitor, start=start, end=start + window_length(monitor.window), expected_cases=expected,
        audit_probability=min(1.0, monitor.labels_per_window / judged),
    )


def message_add(*, monitor: Monitor, kind: str, key: str, subject: str, body: str) -> MonitorMessage | None:
    """Leave a message for the project's channels, once per key (None when it was left before). Delivered by
    judges.monitoring.delivery after the transaction commits."""
    message, created = MonitorMessage.objects.get_or_create(
        monitor=monitor, key=key, defaults={"kind": kind, "subject": subject, "body": body})
    if not created:
        return None
    deliveries_create(message=message)
    return message


def _count_traffic(traffic: dict[int, int]) -> None:
    """Add the counted arrivals to their windows, and start counting afresh."""
    for window_id, count in traffic.items():
        MonitorWindow.objects.filter(pk=window_id).update(traffic=F("traffic") + count)
    traffic.clear()


def _take_new_cases(monitor: Monitor, now: datetime) -> int:
    """Record each case that arrived since the last tick: its window, its draw, whether it is judged (skipped
    after a cap) and audited; the drawn audit cases are served ahead in the reviewers' queue."""
    rows = list(monitor.dataset.cases.answered().filter(pk__gt=monitor.last_case_id).order_by("id")
                .values_list("id", "created_at")[:CASES_PER_TICK])
    newest = monitor.dataset.cases.filter(pk__gt=monitor.last_case_id).order_by("id").values_list("id", flat=True)
    last = rows[-1][0] if len(rows) == CASES_PER_TICK else newest.last()
    if last is None:
        return 0
    windows: dict[datetime, MonitorWindow] = {}
    cases, traffic, audited = [], dict[int, int](), dict[int, int]()
    for case_id, created_at in rows:
        start = window_start(monitor.window, created_at)
        if start not in windows:
            _count_traffic(traffic)  # the window before counts its traffic before the next one expects it
            windows[start] = _open_window(monitor, start)
        window = windows[start]
        u, v = _draws(monitor.seed, case_id)
        sampled = u < monitor.sample
        skipped = sampled and window.capped_at is not None and created_at >= window.capped_at
        drawn = sampled and not skipped and v < window.audit_probability
        cases.append(MonitorCase(
            monitor=monitor, window=window, case_id=case_id, arrived_at=created_at, draw=u, sample=monitor.sample,
            sampled=sampled, audited=drawn, audit_probability=window.audit_probability if sampled else 0.0,
            skipped=MonitorCase.Skipped.CAP if skipped else MonitorCase.Skipped.NO,
        ))
        traffic[window.pk] = traffic.get(window.pk, 0) + 1
        if drawn:
            # The audit sample's random order in the queue: the case's own draw, spread over the order's range.
            audited[case_id] = 1 + int(v / window.audit_probability * 2**30)
    MonitorCase.objects.bulk_create(cases, batch_size=2000, ignore_conflicts=True)
    _count_traffic(traffic)
    if audited:
        tallies = list(CaseTally.objects.filter(rubric_id=monitor.rubric_id, case_id__in=list(audited))
                       .only("id", "case_id", "priority", "priority_order"))
        for tally in tallies:
            tally.priority = max(tally.priority, QueuePriority.AUDIT_SAMPLE)
            tally.priority_order = audited[tally.case_id]
        CaseTally.objects.bulk_update(tallies, ["priority", "priority_order"], batch_size=1000)
    Monitor.objects.filter(pk=monitor.pk).update(last_case_id=last)
    monitor.last_case_id = last
    return len(rows)


def _day_run(monitor: Monitor, day, config: JudgeConfig) -> Run:
    found = MonitorDay.objects.filter(monitor=monitor, day=day).select_related("run").first()
    if found is not None:
        return found.run
    run = Run.objects.create(
        config=config, dataset=monitor.dataset, repeats=1, concurrency=monitor.concurrency,
        spend_cap_usd=monitor.spend_cap_usd, created_by=monitor.created_by, total=0, source=Run.Source.MONITOR,
        status=Run.Status.FINISHED,
    )
    MonitorDay.objects.create(monitor=monitor, day=day, run=run)
    return run


def _hand_waiting(monitor: Monitor, config: JudgeConfig) -> int:
    """Hand the drawn cases not yet judged to their day's run, as new chunks, and queue its work."""
    waiting = list(MonitorCase.objects.filter(monitor=monitor, sampled=True, day__isnull=True, skipped="")
                   .order_by("case_id").values_list("pk", "case_id", "arrived_at"))
    by_day: dict = {}
    for pk, case_id, arrived_at in waiting:
        by_day.setdefault(arrived_at.astimezone(UTC).date(), []).append((pk, case_id))
    size = settings.EVALHUB_CHUNK_CASES
    for day, pairs in sorted(by_day.items()):
        run = _day_run(monitor, day, config)
        run = Run.objects.select_for_update().get(pk=run.pk)  # the worker's window end waits: no chunk missed
        last_index = run.chunks.order_by("-index").values_list("index", flat=True).first()
        start = 0 if last_index is None else last_index + 1
        case_ids = [case_id for _, case_id in pairs]
        RunChunk.objects.bulk_create(
            RunChunk(run=run, index=start + i, case_ids=case_ids[at : at + size])
            for i, at in enumerate(range(0, len(case_ids), size))
        )
        fields: dict = {"total": F("total") + len(case_ids)}
        if run.status == Run.Status.FINISHED:
            fields |= {"status": Run.Status.QUEUED, "finished_at": None}
        Run.objects.filter(pk=run.pk).update(**fields)
        MonitorCase.objects.filter(pk__in=[pk for pk, _ in pairs]).update(day=MonitorDay.objects.get(run=run))
        queue_run_work(run.pk)
    return len(waiting)


def _retry_outage(run: Run) -> int:
    """Ask again the judgments of a finished run that the provider could not answer: their rows go (the tokens
    spent stay counted) and their chunks are to do again, as run_retry_not_evaluated does for a lead."""
    retry = run.judgments.filter(outcome="not_evaluated", error__in=OUTAGE_ERRORS)
    case_ids = set(retry.values_list("case_id", flat=True))
    if not case_ids:
        return 0
    count = retry.count()
    retry.delete()
    case_tallies_refresh(run_id=run.pk, case_ids=case_ids)
    chunk_ids = [c.pk for c in run.chunks.all() if case_ids.intersection(c.case_ids)]
    RunChunk.objects.filter(pk__in=chunk_ids).update(done_at=None)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.QUEUED, finished_at=None, done=F("done") - count,
                                         not_evaluated=F("not_evaluated") - count)
    queue_run_work(run.pk)
    return count


def _watch_runs(monitor: Monitor, now: datetime) -> None:
    """Caps and outages of the monitor's runs: a cap closes its window's judging at the first capped case's
    arrival; a finished run with judgments the provider could not answer pauses judging and asks them again
    (each tick, until they are answered: then judging resumes)."""
    # The days of the last week and a day: older days' runs are settled (a cap or an outage is seen within a
    # tick or two), and a tick's cost must not grow with the monitor's age.
    recent = (now - timedelta(days=8)).date()
    days = list(MonitorDay.objects.filter(monitor=monitor, day__gte=recent).select_related("run").order_by("day"))
    outage = None
    for day in days:
        run = day.run
        capped = MonitorCase.objects.filter(day=day, skipped="").filter(
            case__judgments__run=run, case__judgments__error="spend cap").aggregate(first=Min("arrived_at"))["first"]
        if capped is not None:
            window = MonitorWindow.objects.filter(monitor=monitor, start=window_start(monitor.window, capped)).first()
            if window is not None and window.capped_at is None:
                MonitorWindow.objects.filter(pk=window.pk).update(capped_at=capped)
                # Drawn cases from the cap on, waiting or handed, that the judge did not answer: not judged in this
                # window, and no longer asked of the reviewers ahead of the rest.
                answered = Judgment.objects.filter(run=run, outcome__in=("pass", "fail")).values("case_id")
                after = MonitorCase.objects.filter(window=window, sampled=True, arrived_at__gte=capped).exclude(
                    day=day, case_id__in=answered)
                unserved = list(after.filter(audited=True).values_list("case_id", flat=True))
                after.update(skipped=MonitorCase.Skipped.CAP, audited=False)
                CaseTally.objects.filter(rubric_id=monitor.rubric_id, case_id__in=unserved,
                                         priority=QueuePriority.AUDIT_SAMPLE).update(priority=QueuePriority.NONE)
                message_add(monitor=monitor, kind=MonitorMessage.Kind.CAP, key=f"cap:{window.start.date()}",
                            subject=f"{monitor.slug}: the spend cap stopped judging at {capped:%H:%M} UTC",
                            body=(f"The daily spend cap of ${monitor.spend_cap_usd} was reached. The window of "
                                  f"{window.start:%Y-%m-%d} covers {window.start:%H:%M}–{capped:%H:%M} UTC only."))
        if run.status in (Run.Status.FINISHED, Run.Status.CANCELLED):
            error = run.judgments.filter(outcome="not_evaluated", error__in=OUTAGE_ERRORS).values_list(
                "error", flat=True).first()
            if error is not None:
                outage = error
                _retry_outage(run)
    if outage is not None and not monitor.paused_since:
        monitor.paused_reason, monitor.paused_since = f"provider outage ({outage})", now
        monitor.save(update_fields=["paused_reason", "paused_since"])
        message_add(monitor=monitor, kind=MonitorMessage.Kind.PAUSE, key=f"pause:{now.isoformat()}",
                    subject=f"{monitor.slug}: judging paused",
                    body=f"The provider could not answer ({outage}). Judging resumes by itself once it does; "
                         "cases arriving meanwhile wait, recorded.")
    elif outage is None and monitor.paused_since and not Run.objects.filter(
        monitor_day__monitor=monitor, status__in=(Run.Status.QUEUED, Run.Status.RUNNING)
    ).exists():
        since = monitor.paused_since
        monitor.paused_reason, monitor.paused_since = "", None
        monitor.save(update_fields=["paused_reason", "paused_since"])
        message_add(monitor=monitor, kind=MonitorMessage.Kind.RESUME, key=f"resume:{since.isoformat()}",
                    subject=f"{monitor.slug}: judging resumed", body="The provider answers again; judging resumed.")


def monitor_tick(*, monitor_id: int, now: datetime | None = None) -> int:
    """One tick of a monitor, in one transaction with its row locked (two ticks never take the same cases):
    watch its runs, record the new cases, hand the drawn ones to the judge unless paused. Returns the cases
    read. A rubric with no judge CI could use (draft, or an imported config) records cases and judges none."""
    now = now or timezone.now()
    config = next((event.ci_config for event in ci_events(rubric_ids=[Monitor.objects.get(pk=monitor_id).rubric_id])),
                  None)
    with transaction.atomic():
        monitor = Monitor.objects.select_for_update().select_related("dataset", "project").get(pk=monitor_id)
        if not monitor.enabled:
            return 0
        _watch_runs(monitor, now)
        read = _take_new_cases(monitor, now)
        if not monitor.paused_since and config is not None and not config.external:
            _hand_waiting(monitor, config)
        _figure_messages(monitor, now)
    return read


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f} %"


def _figure_messages(monitor: Monitor, now: datetime) -> None:
    """Messages the newest closed windows call for, each once: a drop (the corrected rate worse than the
    baseline's or the window before's: the difference's interval below zero), the drift rule firing on the
    window's audit labels; and on Mondays the weekly digest, when the monitor has it on."""
    rows = monitor_windows(monitor=monitor, now=now, last=2)
    for row in rows:
        if row.current:
            continue  # a window is judged once it has closed
        day = row.window.start.date()
        figures = row.figures
        pending = f" ({figures.pending} audit labels still pending: provisional)" if figures.pending else ""
        for name, found in (("the baseline", row.vs_baseline), ("the window before", row.vs_previous)):
            if found is not None and found.worse:
                message_add(
                    monitor=monitor, kind=MonitorMessage.Kind.DROP, key=f"drop:{day}:{name}",
                    subject=f"{monitor.slug}: the agent's pass rate dropped on {day} vs {name}",
                    body=(f"Corrected pass rate {_pct(figures.estimate)} (95 % interval {_pct(figures.ci95[0])}–"
                          f"{_pct(figures.ci95[1])}){pending}; {_pct(-found.difference)} lower than {name} (interval "
                          f"of the difference {_pct(found.ci95[0])} to {_pct(found.ci95[1])}). The judge's raw rate: "
                          f"{_pct(figures.raw)}.") if figures.ci95 else "",
                )
        if row.drift is not None and row.drift.fires:
            message_add(
                monitor=monitor, kind=MonitorMessage.Kind.DRIFT, key=f"drift:{day}",
                subject=f"{monitor.slug}: the judge drifted on {day}",
                body=(f"On {row.drift.n} audit labels of {day} the judge agrees with the reviewers "
                      f"{_pct(row.drift.agreement)} (95 % interval up to "
                      f"{_pct(row.drift.ci95[1] if row.drift.ci95 else None)}), below the floor of "
                      f"{_pct(monitor.rubric.agreement_floor)}: recalibrate the judge."),
            )
    if monitor.digest and now.weekday() == 0:
        year, week, _ = now.isocalendar()
        lines = [f"{row.window.start:%Y-%m-%d}: corrected {_pct(row.figures.estimate)}, judge {_pct(row.figures.raw)}, "
                 f"{row.figures.labeled}/{row.asked} labels"
                 for row in monitor_windows(monitor=monitor, now=now, last=7)]
        message_add(monitor=monitor, kind=MonitorMessage.Kind.DIGEST, key=f"digest:{year}-W{week:02}",
                    subject=f"{monitor.slug}: the week in figures", body="\n".join(lines) or "No window yet.")


def monitors_tick() -> list[int]:
    """A tick of every enabled monitor; returns their ids."""
    ids = list(Monitor.objects.filter(enabled=True).order_by("pk").values_list("pk", flat=True))
    for monitor_id in ids:
        monitor_tick(monitor_id=monitor_id)
    return ids
