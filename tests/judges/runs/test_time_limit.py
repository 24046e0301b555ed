"""A judgment that exceeds its time is not evaluated (judges.engine.batch, `time_limits`): the run's window moves
on, records it, releases its lease and the run finishes, or a cancel ends it, whatever the stuck thread does.
A judgment stuck in its thread stands for any that never returns (a pattern on a backtracking engine did):
the engine's class is swapped for one whose judgment of one case waits until the test lets it go."""

import threading

import pytest

from judges.configs import services as config_services
from judges.engine import Engine
from judges.models import Judgment, Run
from judges.runs import services, worker
from tests.judges.helpers import CONTRACT_SPEC, make_cases

pytestmark = pytest.mark.django_db(transaction=True)

STUCK = "c004"
LET_GO = threading.Event()


class StuckOnOneCase(Engine):
    """The run's engine, its judgment of STUCK never returning (until LET_GO), its time limit a second."""

    time_limit_s = 1.0  # type: ignore[assignment]

    def judge_new(self, case, repeat, key, cached=None):
        if case.get("external_id") == STUCK:
            LET_GO.wait(120)
        return super().judge_new(case, repeat, key, cached)


@pytest.fixture
def run(dataset, rubric, lead, settings, monkeypatch):
    settings.EVALHUB_CHUNK_CASES = 3
    monkeypatch.setattr(services, "queue_run_work", lambda run_id: None)  # no broker: the test works the run
    monkeypatch.setattr(worker, "Engine", StuckOnOneCase)
    LET_GO.clear()
    make_cases(dataset, 9)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    yield services.run_start(config=config, dataset=dataset, repeats=2, concurrency=2, spend_cap_usd=None, by=lead)
    LET_GO.set()


def test_a_judgment_past_its_time_is_not_evaluated_and_the_run_finishes_with_its_lease_released(run):
    worker.run_work_here(run_id=run.pk)  # before: waited for the stuck judgment for ever, the lease extended

    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED and (run.lease_token, run.lease_until) == ("", None)
    stuck = Judgment.objects.filter(run=run, case__external_id=STUCK)
    assert sorted(stuck.values_list("repeat", "outcome", "error")) == [(1, "not_evaluated", "timeout"),
                                                                         (2, "not_evaluated", "timeout")]
    assert "exceeded its time" in stuck.first().reason
    assert Judgment.objects.filter(run=run).count() == 18 and run.done == 18


def test_a_cancelled_run_with_a_stuck_judgment_ends_its_window(run):
    token = worker.run_claim(run_id=run.pk)
    assert token is not None
    timer = threading.Timer(0.5, lambda: services.run_cancel(run=Run.objects.get(pk=run.pk)))
    timer.start()

    more = worker.run_window(run_id=run.pk, token=token)  # before: never returned

    timer.join()
    run.refresh_from_db()
    assert (more, run.status, run.lease_token) == (False, Run.Status.CANCELLED, "")
