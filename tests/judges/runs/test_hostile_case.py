"""One hostile case in a dataset, judged by a real Celery worker: the run finishes, the case fails its check
with the reason, and the rest are judged (before, the worker raised a RecursionError on it at every
sweep and the run stayed `running` for good)."""

import pytest

from judges.configs import services as config_services
from judges.models import Judgment, Run
from judges.runs import services
from labeling.models import Case, case_split, labeled_content_hash
from tests.judges.helpers import make_cases
from tests.judges.workers import broker_url, empty_broker, fresh, kill, queue_run_work, start_worker, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

DEEP_ARGUMENT = "[" * 200_000 + "]" * 200_000  # nested past what Python's own JSON parser can take


def test_a_tool_argument_nested_too_deeply_fails_its_check_and_the_run_finishes(tmp_path, dataset, rubric, lead):
    url = broker_url("redis")
    empty_broker(url)
    make_cases(dataset, 6)
    trace = {"toolCalls": [{"name": "lookup_order", "argument": DEEP_ARGUMENT}]}
    output = "Order ORD-1 shipped yesterday."
    Case.objects.create(
        dataset=dataset, external_id="hostile", input="Where is ORD-1?", output=output, trace=trace,
        expected_tool="lookup_order", expected_tool_argument={"order_id": "ORD-1"}, split=case_split("hostile"),
        content_hash=labeled_content_hash(input="Where is ORD-1?", output=output, trace=trace),
    )
    spec = {"layers": ["contract"], "contract_checks": ["expected_tool", "expected_tool_argument"]}
    config = config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)
    worker = start_worker(tmp_path, "worker", broker=url)
    try:
        run = services.run_start(config=config, dataset=dataset, repeats=2, concurrency=2, spend_cap_usd=None,
                                 by=lead)
        queue_run_work(url, run.pk)
        wait_for(lambda: fresh(lambda: Run.objects.get(pk=run.pk).status) == Run.Status.FINISHED, 60,
                 "the run to finish")
    finally:
        kill(worker)

    run.refresh_from_db()
    assert (run.done, run.total, run.not_evaluated) == (14, 14, 0)
    hostile = Judgment.objects.filter(run=run, case__external_id="hostile")
    assert set(hostile.values_list("outcome", "layer")) == {("fail", "contract")}
    assert "lookup_order called with" in hostile.first().reason
