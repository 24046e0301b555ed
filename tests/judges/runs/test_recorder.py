"""The window's recorder (judges.runs.worker._Recorder): on PostgreSQL, outside a transaction, it records on a
thread of its own with its own connection; a failure there is the window's, raised by run_window, with nothing
half recorded and the chunks left to do."""

import threading

import pytest

from judges.configs import services as config_services
from judges.models import Judgment, Run
from judges.runs import services, worker
from tests.judges.helpers import CONTRACT_SPEC, make_cases

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def run(dataset, rubric, lead, settings, monkeypatch):
    settings.EVALHUB_CHUNK_CASES = 3
    monkeypatch.setattr(services, "queue_run_work", lambda run_id: None)  # no broker: the test works the run
    make_cases(dataset, 9)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    return services.run_start(config=config, dataset=dataset, repeats=2, concurrency=2, spend_cap_usd=None, by=lead)


def test_it_records_every_judgment_from_its_own_thread(run, monkeypatch):
    threads = set()
    record = worker.judgments_record

    def recording(**kwargs):
        threads.add(threading.current_thread())
        return record(**kwargs)

    monkeypatch.setattr(worker, "judgments_record", recording)
    worker.run_work_here(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED and run.done == Judgment.objects.filter(run=run).count() == 18
    assert threads and threading.main_thread() not in threads


def test_a_failure_to_record_is_raised_and_leaves_the_chunks_to_do(run, monkeypatch):
    def failing(**kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(worker, "judgments_record", failing)
    token = worker.run_claim(run_id=run.pk)
    with pytest.raises(RuntimeError, match="went away"):
        worker.run_window(run_id=run.pk, token=token)

    run.refresh_from_db()
    assert run.done == 0 and not Judgment.objects.filter(run=run).exists()
    assert not run.chunks.filter(done_at__isnull=False).exists()
