"""The monitor's tick (judges/monitoring/services.py) with the runs worked in-process (eager): what is drawn,
judged, audited and served; the cost checks. The real worker's behaviour (outage, cap): test_worker.py."""

from datetime import timedelta

import pytest
from django.utils import timezone

from judges.models import Judgment, MonitorCase, MonitorWindow, RunChunk
from judges.monitoring.services import MonitorError, _draws, monitor_create, monitor_tick
from labeling.models import CaseTally, QueuePriority
from tests.judges.monitoring.factories import ingest, observed


@pytest.fixture
def world(db, settings, project, lead, fake_provider):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    fake_provider.control(rule={"kind": "answer_contains", "text": "ships"})
    dataset, rubric, config = observed(project=project, lead=lead)
    return {"dataset": dataset, "rubric": rubric, "config": config, "lead": lead, "project": project}


@pytest.fixture
def tick(django_capture_on_commit_callbacks):
    def run(monitor) -> int:
        with django_capture_on_commit_callbacks(execute=True):
            return monitor_tick(monitor_id=monitor.pk)
    return run


def test_it_judges_a_recorded_sample_of_new_cases_once(world, tick, fake_provider):
    ingest(world["dataset"], "old", 5)
    monitor = monitor_create(project=world["project"], slug="ships", rubric=world["rubric"],
                             dataset=world["dataset"], sample=0.5, labels_per_window=20, expected_cases=100,
                             by=world["lead"])
    assert tick(monitor) == 0  # the cases there before are not the monitor's
    ingest(world["dataset"], "new", 100)
    assert tick(monitor) == 100
    rows = MonitorCase.objects.filter(monitor=monitor)
    assert rows.count() == 100
    sampled = rows.filter(sampled=True)
    # Each case's draw is recorded and decides: judged exactly when it is below the sample.
    assert all((row.draw < 0.5) == row.sampled for row in rows)
    judged = Judgment.objects.filter(run__monitor_day__monitor=monitor)
    assert set(judged.values_list("case_id", flat=True)) == set(sampled.values_list("case_id", flat=True))
    assert fake_provider.stats()["total"] == sampled.count()
    # The window's audit probability: 20 labels over 100 expected cases x 0.5 judged.
    window = MonitorWindow.objects.get(monitor=monitor)
    assert window.audit_probability == pytest.approx(0.4) and window.traffic == 100
    audited = set(rows.filter(audited=True).values_list("case_id", flat=True))
    assert audited and audited <= set(sampled.values_list("case_id", flat=True))
    served = set(CaseTally.objects.filter(rubric=world["rubric"], priority=QueuePriority.AUDIT_SAMPLE)
                 .values_list("case_id", flat=True))
    assert served == audited
    # A second tick takes nothing again, hands nothing again and judges nothing twice.
    assert tick(monitor) == 0
    assert fake_provider.stats()["total"] == sampled.count()
    handed = [case_id for chunk in RunChunk.objects.filter(run__monitor_day__monitor=monitor)
              for case_id in chunk.case_ids]
    assert sorted(handed) == sorted(sampled.values_list("case_id", flat=True))


def test_sample_one_fifth_makes_a_fifth_of_the_calls_and_the_audit_size_holds(world, tick, fake_provider):
    """The cost checks: sample 0.2 makes a fifth of the calls (+-5 %), exactly one call per drawn case; a day's
    realised audit size stays within +-30 % of the 150 asked at 2,000 cases a day."""
    monitor = monitor_create(project=world["project"], slug="ships", rubric=world["rubric"],
                             dataset=world["dataset"], sample=0.2, labels_per_window=150, expected_cases=2000,
                             by=world["lead"])
    ingest(world["dataset"], "day", 2000)
    tick(monitor)
    sampled = MonitorCase.objects.filter(monitor=monitor, sampled=True).count()
    assert fake_provider.stats()["total"] == sampled  # one call per drawn case, none for the others
    # The share at 2,000 draws is a binomial's (a standard deviation of 4.5 % of 400): checked at +-3 of them
    # here, and at +-5 % over 100,000 draws below, where the same rule is 3.5 standard deviations wide.
    assert 400 - 3 * 18 <= sampled <= 400 + 3 * 18
    audited = MonitorCase.objects.filter(monitor=monitor, audited=True).count()
    assert 0.7 * 150 <= audited <= 1.3 * 150


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_draws_take_the_sample_share_within_five_percent(seed):
    draws = [_draws(seed, case_id)[0] for case_id in range(100_000)]
    share = sum(u < 0.2 for u in draws) / len(draws)
    assert 0.19 <= share <= 0.21


def test_a_monitor_watches_its_own_projects_rubric_and_dataset(world, other_project):
    from labeling.models import Dataset
    theirs = Dataset.objects.create(project=other_project, slug="theirs", name="Theirs")
    with pytest.raises(MonitorError, match="own project"):
        monitor_create(project=world["project"], slug="x", rubric=world["rubric"], dataset=theirs, by=world["lead"])
    with pytest.raises(MonitorError, match="share"):
        monitor_create(project=world["project"], slug="x", rubric=world["rubric"], dataset=world["dataset"],
                       sample=1.5, by=world["lead"])


def test_the_next_window_expects_the_traffic_of_the_one_before(world, tick):
    monitor = monitor_create(project=world["project"], slug="ships", rubric=world["rubric"],
                             dataset=world["dataset"], sample=1.0, labels_per_window=10, expected_cases=50,
                             by=world["lead"])
    ingest(world["dataset"], "a", 40)
    from labeling.models import Case
    Case.objects.filter(dataset=world["dataset"], external_id__startswith="a").update(
        created_at=timezone.now() - timedelta(days=1))
    ingest(world["dataset"], "b", 5)
    tick(monitor)
    first, second = MonitorWindow.objects.filter(monitor=monitor).order_by("start")
    assert first.audit_probability == pytest.approx(10 / 50) and first.traffic == 40
    assert second.expected_cases == 40 and second.audit_probability == pytest.approx(10 / 40)
