"""A monitor with the real worker (a Celery process) and the stand-in provider: an outage pauses judging and
resumes it with no case judged twice and none lost; a spend cap stops the window's judging and says what its
figures cover. The tick is called here (beat calls it in production); the worker judges the runs."""

from decimal import Decimal

import pytest

from judges.models import Judgment, ModelPrice, MonitorCase, MonitorMessage, MonitorWindow, Run
from judges.monitoring.selectors import monitor_windows
from judges.monitoring.services import monitor_create, monitor_tick
from tests.judges.monitoring.factories import MODEL, ingest, observed
from tests.judges.workers import broker_url, empty_broker, fresh, kill, start_worker, wait_for


def runs_settled(monitor) -> bool:
    return fresh(lambda: not Run.objects.filter(monitor_day__monitor=monitor,
                                                status__in=(Run.Status.QUEUED, Run.Status.RUNNING)).exists())


@pytest.fixture
def worker(tmp_path, settings, fake_provider):
    url = broker_url("redis")
    empty_broker(url)
    process = start_worker(tmp_path, "monitor", broker=url, concurrency=2)
    yield process
    kill(process)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_an_outage_pauses_and_resumes_without_loss_or_double_judging(worker, project, lead, fake_provider):
    fake_provider.control(rule={"kind": "answer_contains", "text": "ships"})
    dataset, rubric, _ = observed(project=project, lead=lead)
    monitor = monitor_create(project=project, slug="ships", rubric=rubric, dataset=dataset, sample=1.0,
                             labels_per_window=2, expected_cases=10, by=lead)
    fake_provider.control(fault="500")  # the provider is down
    ingest(dataset, "a", 6)
    monitor_tick(monitor_id=monitor.pk)
    wait_for(lambda: runs_settled(monitor), 120, "the first cases to come back not evaluated")
    assert Judgment.objects.filter(run__monitor_day__monitor=monitor, error="server error").count() == 6

    monitor_tick(monitor_id=monitor.pk)  # sees the outage: pauses, and asks those cases again
    monitor.refresh_from_db()
    assert monitor.paused_since is not None and "server error" in monitor.paused_reason
    assert MonitorMessage.objects.filter(monitor=monitor, kind="pause").count() == 1
    ingest(dataset, "b", 4)  # arriving while paused: recorded, waiting
    monitor_tick(monitor_id=monitor.pk)
    assert MonitorCase.objects.filter(monitor=monitor, day__isnull=True).count() == 4

    fake_provider.control(fault=None)  # the provider is back
    for _ in range(4):  # a tick asks the outage's cases again until they are answered, then resumes
        wait_for(lambda: runs_settled(monitor), 120, "the run to settle")
        monitor_tick(monitor_id=monitor.pk)
        monitor.refresh_from_db()
        if not monitor.paused_since and not MonitorCase.objects.filter(monitor=monitor, day__isnull=True).exists():
            break
    wait_for(lambda: runs_settled(monitor), 120, "the waiting cases to be judged")
    assert monitor.paused_since is None
    assert MonitorMessage.objects.filter(monitor=monitor, kind="resume").count() == 1
    judgments = Judgment.objects.filter(run__monitor_day__monitor=monitor)
    # Every case judged, each once, all evaluated: none lost, none twice.
    assert judgments.count() == 10 == judgments.values("case_id").distinct().count()
    assert set(judgments.values_list("outcome", flat=True)) <= {"pass", "fail"}


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_spend_cap_stops_the_window_and_says_what_it_covers(worker, project, lead, fake_provider):
    # $1,000 per million output tokens: a call reserves its 200 max_tokens ($0.20) and costs what the stand-in's
    # answer used (~$0.03), so a $0.25 cap lets two calls through one by one.
    ModelPrice.objects.create(model=MODEL, input_per_mtok=Decimal(0), output_per_mtok=Decimal(1000),
                              updated_by=lead)
    fake_provider.control(rule={"kind": "answer_contains", "text": "ships"})
    dataset, rubric, _ = observed(project=project, lead=lead, params={"temperature": 0, "max_tokens": 200})
    monitor = monitor_create(project=project, slug="ships", rubric=rubric, dataset=dataset, sample=1.0,
                             spend_cap_usd=Decimal("0.25"), concurrency=1, labels_per_window=2, expected_cases=10,
                             by=lead)
    ingest(dataset, "a", 5)
    monitor_tick(monitor_id=monitor.pk)
    wait_for(lambda: runs_settled(monitor), 120, "the run to reach its cap")
    monitor_tick(monitor_id=monitor.pk)
    window = MonitorWindow.objects.get(monitor=monitor)
    assert window.capped_at is not None
    assert MonitorMessage.objects.filter(monitor=monitor, kind="cap").count() == 1
    ingest(dataset, "b", 3)  # after the cap: recorded, never judged
    monitor_tick(monitor_id=monitor.pk)
    assert MonitorCase.objects.filter(monitor=monitor, skipped="cap").count() >= 3
    assert not Judgment.objects.filter(run__monitor_day__monitor=monitor, case__external_id__startswith="b").exists()
    [row] = monitor_windows(monitor=monitor)
    assert row.covers.startswith("00:00–")
    # The window's figures count the cases judged before the cap, never those the cap left unjudged.
    answered = Judgment.objects.filter(run__monitor_day__monitor=monitor, outcome__in=("pass", "fail")).count()
    assert 0 < row.figures.judged == answered < 5
    assert row.suggested_sample is not None and row.suggested_sample < 1.0


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_three_days_through_the_worker_and_the_reviewers_queue(worker, project, lead, reviewer, fake_provider):
    """The plumbing end to end: three days of traffic judged by the worker, each day's audit sample served first in
    the reviewer's queue and labeled there, and each closed window's corrected rate with its interval."""
    from datetime import timedelta

    from django.utils import timezone

    from labeling.models import Case
    from labeling.queue.services import case_serve, label_submit

    fake_provider.control(rule={"kind": "answer_contains", "text": "ships"})
    dataset, rubric, _ = observed(project=project, lead=lead)
    dataset.reviewers.add(reviewer)
    # 45 labels asked of 60 cases a day: about 45 drawn (never near the 30 an estimate needs), 15 not.
    monitor = monitor_create(project=project, slug="ships", rubric=rubric, dataset=dataset, sample=1.0,
                             labels_per_window=45, expected_cases=60, by=lead)
    today = timezone.now().replace(hour=12, minute=0, second=0, microsecond=0)
    for day in range(3):
        ingest(dataset, f"d{day}-", 60)
        Case.objects.filter(dataset=dataset, external_id__startswith=f"d{day}-").update(
            created_at=today - timedelta(days=3 - day))
        monitor_tick(monitor_id=monitor.pk)
    wait_for(lambda: runs_settled(monitor), 180, "three days judged")
    audited = set(MonitorCase.objects.filter(monitor=monitor, audited=True).values_list("case_id", flat=True))
    assert audited
    # The reviewer's queue serves the audit sample first; humans fail "somewhere" answers and every fifth other one.
    served = []
    while len(served) < len(audited):
        case = case_serve(dataset=dataset, rubric=rubric, reviewer=reviewer)
        assert case is not None
        served.append(case.pk)
        verdict = "pass" if "ships" in (case.output or "") and case.pk % 5 else "fail"
        label_submit(case=case, rubric=rubric, reviewer=reviewer, verdict=verdict, content_hash=case.content_hash)
    assert set(served) == audited
    rows = monitor_windows(monitor=monitor)
    assert len(rows) == 3
    for row in rows:
        assert row.figures.judged == MonitorCase.objects.filter(window=row.window, sampled=True).count()
        assert row.figures.labeled == row.figures.drawn > 0 and row.figures.pending == 0
        assert row.figures.ci95 is not None and row.figures.ci95[0] <= row.figures.estimate <= row.figures.ci95[1]
        assert not row.provisional
