"""The run machinery: chunks, leases, the cache, cancel and re-run, all through the real engine.

Behavioral configs call the fake provider over HTTP; work runs eagerly in-process here (the worker
tests run it in real Celery workers).
"""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from judges.configs import services as config_services
from judges.models import Judgment, ModelPrice, Run
from judges.runs import services, worker
from labeling.models import Case, case_split, labeled_content_hash

CONTRACT_SPEC = {"layers": ["contract"], "contract_checks": ["answer_present", "expected_tool"]}


def behavioral_spec(**extra) -> dict:
    return {
        "layers": ["behavioral"], "provider": "openai", "model": "gpt-4o-mini-2024-07-18",
        "base_url_env": "EVALHUB_JUDGE_OPENAI_URL",
        "api_key_env": "EVALHUB_JUDGE_API_KEY", "timeout_s": 5, "max_attempts": 1,
        **extra,
    }


def make_cases(dataset, count: int) -> list[Case]:
    cases = []
    for i in range(count):
        # Distinct content per case: identical cases would share cached judgments.
        question = f"Can I return order {i}?"
        output = "Returns are accepted within 30 days." if i % 3 else ""
        cases.append(Case(
            dataset=dataset, external_id=f"c{i:03}", input=question, output=output,
            trace={"toolCalls": [{"name": "lookup_order", "argument": {"order_id": "ORD-101"}, "result": "ok"}]},
            expected_tool="lookup_order", split=case_split(f"c{i:03}"),
            content_hash=labeled_content_hash(input=question, output=output, trace={}),
        ))
    return Case.objects.bulk_create(cases)


@pytest.fixture
def eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.EVALHUB_CHUNK_CASES = 4


def start(django_capture_on_commit_callbacks, **kwargs) -> Run:
    with django_capture_on_commit_callbacks(execute=True):
        run = services.run_start(**{"repeats": 2, "concurrency": 3, "spend_cap_usd": None, **kwargs})
    run.refresh_from_db()
    return run


def test_it_runs_a_contract_config_to_one_judgment_per_case_and_repeat(
    eager, dataset, rubric, lead, django_capture_on_commit_callbacks
):
    make_cases(dataset, 10)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    run = start(django_capture_on_commit_callbacks, config=config, dataset=dataset, by=lead)

    assert run.status == Run.Status.FINISHED
    assert run.chunks.count() == 3  # 10 cases in chunks of 4
    assert Judgment.objects.filter(run=run).count() == run.total == run.done == 20
    # c000, c003, c006, c009 have an empty answer: the contract fails them without a model.
    failed = set(run.judgments.filter(outcome="fail").values_list("case__external_id", flat=True))
    assert failed == {"c000", "c003", "c006", "c009"}
    assert run.provider_calls == 0


def test_it_calls_no_provider_when_an_unchanged_config_runs_again(
    eager, dataset, rubric, lead, fake_provider, django_capture_on_commit_callbacks
):
    make_cases(dataset, 6)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    first = start(django_capture_on_commit_callbacks, config=config, dataset=dataset, by=lead)
    calls_after_first = fake_provider.stats()["total"]
    second = start(django_capture_on_commit_callbacks, config=config, dataset=dataset, by=lead)

    assert first.provider_calls == calls_after_first == 12
    assert fake_provider.stats()["total"] == calls_after_first
    assert (second.provider_calls, second.cache_hits, second.done) == (0, 12, 12)
    assert list(second.judgments.order_by("case_id", "repeat").values_list("outcome", flat=True)) == list(
        first.judgments.order_by("case_id", "repeat").values_list("outcome", flat=True)
    )


def test_it_reruns_only_the_not_evaluated_judgments(
    eager, dataset, rubric, lead, fake_provider, django_capture_on_commit_callbacks
):
    make_cases(dataset, 5)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    fake_provider.control(fault="500", fault_count=3)
    run = start(django_capture_on_commit_callbacks, config=config, dataset=dataset, by=lead, concurrency=1)
    assert (run.done, run.not_evaluated) == (10, 3)
    assert set(run.judgments.filter(outcome="not_evaluated").values_list("error", flat=True)) == {"server error"}
    kept = set(run.judgments.exclude(outcome="not_evaluated").values_list("pk", flat=True))

    with django_capture_on_commit_callbacks(execute=True):
        assert services.run_retry_not_evaluated(run=run) == 3
    run.refresh_from_db()

    assert (run.status, run.done, run.not_evaluated) == (Run.Status.FINISHED, 10, 0)
    assert kept <= set(run.judgments.values_list("pk", flat=True))
    assert run.judgments.count() == 10
    assert fake_provider.stats()["total"] == 13  # 10 first, 3 again


def test_it_records_a_judgment_only_once(eager, dataset, rubric, lead, django_capture_on_commit_callbacks):
    from judges.engine import Judgment as EngineJudgment

    (case,) = make_cases(dataset, 1)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    run = Run.objects.create(config=config, dataset=dataset, repeats=1, created_by=lead, total=1)
    result = EngineJudgment(external_id=case.external_id, repeat=1, outcome="pass", input_tokens=7)

    assert worker.judgments_record(run=run, results=[(case.pk, result), (case.pk, result)]) == 1
    assert worker.judgments_record(run=run, results=[(case.pk, result)]) == 0
    run.refresh_from_db()
    assert (run.done, run.input_tokens, run.judgments.count()) == (1, 7, 1)


def test_it_leases_a_run_to_one_task_at_a_time_and_takes_back_an_expired_lease(dataset, rubric, lead):
    make_cases(dataset, 4)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    run = services.run_start(config=config, dataset=dataset, repeats=1, concurrency=1, spend_cap_usd=None, by=lead)

    token = worker.run_claim(run_id=run.pk)
    run.refresh_from_db()
    assert token and run.lease_token == token and run.status == Run.Status.RUNNING
    assert worker.run_claim(run_id=run.pk) is None  # a live lease: the run's cap holds across workers
    assert worker.runs_needing_work() == []

    Run.objects.filter(pk=run.pk).update(lease_until=timezone.now() - timedelta(seconds=1))  # its worker died
    assert worker.runs_needing_work() == [run.pk]
    again = worker.run_claim(run_id=run.pk)
    assert again and again != token
    # The task that lost its lease does not release the new holder's, nor queue the run again.
    assert worker._window_end(run_id=run.pk, token=token) is False
    run.refresh_from_db()
    assert run.lease_token == again


def test_it_works_a_bounded_window_then_leaves_the_rest_to_the_next_task(dataset, rubric, lead, settings):
    settings.EVALHUB_CHUNK_CASES = 2
    settings.EVALHUB_RUN_WINDOW_SECONDS = 0  # a window takes what it reads ahead at its start, no more
    make_cases(dataset, 12)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    run = services.run_start(config=config, dataset=dataset, repeats=1, concurrency=1, spend_cap_usd=None, by=lead)

    token = worker.run_claim(run_id=run.pk)
    assert worker.run_window(run_id=run.pk, token=token) is True  # work is left: the task queues the run
    run.refresh_from_db()
    assert 0 < run.done < 12 and run.status == Run.Status.RUNNING
    assert (run.lease_token, run.lease_until) == ("", None)  # released: the next task takes it at once
    assert run.chunks.filter(done_at__isnull=False).count() == run.done // 2

    worker.run_work_here(run_id=run.pk)
    run.refresh_from_db()
    assert (run.status, run.done, run.judgments.count()) == (Run.Status.FINISHED, 12, 12)
    assert run.lease_until is None


def test_it_claims_nothing_once_cancelled(dataset, rubric, lead):
    make_cases(dataset, 3)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    run = services.run_start(config=config, dataset=dataset, repeats=1, concurrency=1, spend_cap_usd=None, by=lead)
    services.run_cancel(run=run)
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and run.finished_at is not None
    assert worker.run_claim(run_id=run.pk) is None
    assert worker.runs_needing_work() == []


def test_it_stops_calling_at_the_spend_cap(
    eager, dataset, rubric, lead, fake_provider, django_capture_on_commit_callbacks
):
    make_cases(dataset, 8)
    ModelPrice.objects.create(
        model="gpt-4o-mini-2024-07-18", input_per_mtok=Decimal("1"), output_per_mtok=Decimal("1000"),
        updated_by=lead,
    )
    # Each call reserves about $0.10 (100 output tokens at $1000 a million) and costs about $0.03.
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(params={"max_tokens": 100}), by=lead)
    run = start(
        django_capture_on_commit_callbacks, config=config, dataset=dataset, by=lead, repeats=1, concurrency=1,
        spend_cap_usd=Decimal("0.20"),
    )
    assert run.cost_usd <= Decimal("0.20")
    spend_capped = run.judgments.filter(outcome="not_evaluated", error="spend cap").count()
    assert 0 < spend_capped < 8
    assert run.done == 8
    assert fake_provider.stats()["total"] == 8 - spend_capped


def test_it_saves_a_new_version_only_when_the_config_changes(rubric, lead):
    first = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    same = config_services.judge_config_save(rubric=rubric, spec=dict(CONTRACT_SPEC), by=lead)
    changed = config_services.judge_config_save(
        rubric=rubric, spec={**CONTRACT_SPEC, "contract_checks": ["answer_present"]}, by=lead
    )
    first.refresh_from_db()
    assert same.pk == first.pk and first.version == 1
    assert changed.version == 2 and changed.config_hash != first.config_hash
    assert first.spec["contract_checks"] == ["answer_present", "expected_tool"]
    assert first.spec["criteria"] == rubric.criteria


def test_it_refuses_a_spec_the_engine_refuses(rubric, lead):
    with pytest.raises(ValueError, match="provider"):
        config_services.judge_config_save(rubric=rubric, spec={"layers": ["behavioral"]}, by=lead)
