"""Cache hits recorded in bulk (judges.runs.cached): a run's judgments, tallies and counts are those the batch
records when it answers the same cache entries one by one, whatever the entries hold, well formed or not.

Runs are worked in this process (judges.runs.worker.run_work_here) through the real SDK over HTTP against the
stand-in, once with the bulk record and once without it, from the same cache.
"""

import threading

import pytest
from django.forms.models import model_to_dict

from judges.configs import services as config_services
from judges.configs.cases import engine_case
from judges.engine import Engine, JudgeConfig
from judges.engine import Judgment as EngineJudgment
from judges.models import CachedJudgment, Run
from judges.runs import cached, worker
from judges.runs.services import run_start
from judges.runs.worker import run_work_here
from tests.judges.helpers import behavioral_spec, make_cases, recounted_tallies, stored_tallies
from tests.judges.runs.test_escalation import SECOND, judge_of

REPEATS = 2


def entry(**fields) -> dict:
    """A cache entry as a run stores one (Judgment.to_dict), with `fields` changed."""
    return EngineJudgment(external_id="x", repeat=1, outcome="pass", reason="Ships as promised.", layer="behavioral",
                          input_tokens=120, output_tokens=30, cost_usd=0.0004, latency_ms=850, provider_calls=1,
                          model="gpt-4o-mini", calls_by_judge={"primary": 1}, cost_by_judge={"primary": 0.0004},
                          ).to_dict() | fields


def without(*names) -> dict:
    stored = entry()
    for name in names:
        del stored[name]
    return stored


# What each case's cache entry holds (the same for its repeats); cases past the list have none. Hits and misses
# alternate, so each group of cases the worker reads holds both (the calls of one, the hits of the next recorded
# while they are in flight).
HITS = [
    entry(),
    # A second opinion's traces, which a cache hit does not keep; a score, a similarity, checks, odd text.
    entry(outcome="fail", contested=True, secondary_outcome="pass", opinions={"primary": {"outcome": "fail"}},
          scores={"accuracy": 2, "tone": 5}, similarity=0.873451298765, reason="Naïve ✓ \"quoted\" \\ reason",
          checks=[{"name": "answer_present", "passed": True, "detail": None}], raw_output='{"verdict": "fail"}'),
    without("opinions", "calls_by_judge", "cost_by_judge"),  # stored before those fields existed
    entry(similarity=1, cost_usd=None, unknown="kept out"),  # an int fits a float; unknown keys are ignored
]
MISSES = [
    entry(outcome="not_evaluated", error="timeout"),  # never a hit: asked again
    entry(reason=5),  # mistyped, as every one below: a miss, asked again
    entry(repeat=1.0),
    entry(scores={"accuracy": 1.5}),
    entry(calls_by_judge={"primary": True}),
    entry(checks=[["not", "an", "object"]]),
    entry(outcome="maybe"),
    without("layer"),
    ["pass"],
    "pass",
]
ENTRIES = [e for pair in zip(HITS, MISSES[:len(HITS)], strict=True) for e in pair] + MISSES[len(HITS):]


def judgments(run: Run) -> dict:
    """Each judgment's fields but its row's own and, for a call, its time (the stand-in's, which varies)."""
    return {(j.case_id, j.repeat): {k: v for k, v in model_to_dict(j).items()
                                    if k not in ("id", "run", "created_at") and (j.cached or k != "latency_ms")}
            for j in run.judgments.all()}


def tallies(run: Run) -> dict:
    """Each case's tally but, for a case with calls, its slowest time (the stand-in's)."""
    called = set(run.judgments.filter(cached=False).values_list("case_id", flat=True))
    return {t.case_id: {k: v for k, v in model_to_dict(t).items()
                        if k not in ("id", "run") and (t.case_id not in called or k != "slowest_ms")}
            for t in run.case_tallies.all()}


COUNTS = ("total", "done", "not_evaluated", "provider_calls", "cache_hits", "input_tokens", "output_tokens",
          "cost_usd", "unknown_cost_judgments", "status")


@pytest.mark.django_db(transaction=True)
def test_it_records_what_the_batch_records_from_the_same_cache(dataset, rubric, lead, fake_provider, monkeypatch,
                                                               settings):
    fake_provider.control(rule={"kind": "answer_contains", "text": "shipped"})
    # Groups of four cases in chunks of two, one call at a time: the hits of the next group are recorded a case at a
    # time from the third pull of a group on (worker._Window._cached_ahead), the rest when the group is read.
    settings.EVALHUB_CHUNK_CASES = 2
    monkeypatch.setattr(worker, "READ_AHEAD_CASES", 4)
    monkeypatch.setattr(worker, "CACHED_AHEAD_CASES", 1)
    cases = make_cases(dataset, len(ENTRIES) + 3)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    engine = Engine(JudgeConfig.from_dict(config.spec), cache={})
    CachedJudgment.objects.bulk_create(
        CachedJudgment(project=dataset.project, key=engine.cache_key(engine_case(case), repeat), judgment=stored)
        for case, stored in zip(cases, ENTRIES, strict=False) for repeat in range(1, REPEATS + 1)
    )
    cache = list(CachedJudgment.objects.values_list("key", "judgment"))
    recorded_in_bulk = []
    record = cached.cached_judgments_record

    def recorded_and_counted(**kw) -> tuple[int, set[int]]:
        recorded_in_bulk.append((len(kw["case_ids"]), (result := record(**kw))[0]))
        return result

    monkeypatch.setattr(worker, "cached_judgments_record", recorded_and_counted)

    def judged(*, in_bulk: bool) -> Run:
        CachedJudgment.objects.all().delete()  # the cache as it was: no entry the other run's calls added
        CachedJudgment.objects.bulk_create(CachedJudgment(project=dataset.project, key=key, judgment=value)
                                           for key, value in cache)
        monkeypatch.setattr(worker, "cached_in_bulk", lambda **kw: in_bulk)
        run = run_start(config=config, dataset=dataset, repeats=REPEATS, concurrency=1, spend_cap_usd=None, by=lead)
        run_work_here(run_id=run.pk)
        run.refresh_from_db()
        return run

    one_by_one, in_bulk = judged(in_bulk=False), judged(in_bulk=True)

    assert sum(n for _, n in recorded_in_bulk) == in_bulk.cache_hits == len(HITS) * REPEATS
    assert (1, REPEATS) in recorded_in_bulk  # a hit recorded ahead, while calls were in flight
    assert in_bulk.provider_calls == (len(cases) - len(HITS)) * REPEATS > 0
    assert judgments(in_bulk) == judgments(one_by_one)
    assert tallies(in_bulk) == tallies(one_by_one)
    assert [getattr(in_bulk, name) for name in COUNTS] == [getattr(one_by_one, name) for name in COUNTS]


@pytest.mark.django_db(transaction=True)
def test_the_hits_after_a_group_of_calls_are_recorded_ahead_while_the_calls_are_in_flight(
    dataset, rubric, lead, fake_provider, monkeypatch, settings
):
    # A first group of four cases with no entry (their calls, as a drift run's new cases first), then three groups of
    # hits: every hit is handed to the writer threads a case at a time, group after group, not one group ahead only
    # (the rest recorded when each group is read, by the thread feeding the calls).
    settings.EVALHUB_CHUNK_CASES = 2
    monkeypatch.setattr(worker, "READ_AHEAD_CASES", 4)
    monkeypatch.setattr(worker, "CACHED_AHEAD_CASES", 1)
    cases = make_cases(dataset, 16)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    engine = Engine(JudgeConfig.from_dict(config.spec), cache={})
    CachedJudgment.objects.bulk_create(
        CachedJudgment(project=dataset.project, key=engine.cache_key(engine_case(case), repeat), judgment=entry())
        for case in cases[4:] for repeat in range(1, REPEATS + 1)
    )
    by_thread: dict[str, int] = {}
    record = cached.cached_judgments_record

    def recorded(**kw) -> tuple[int, set[int]]:
        n, unanswered = record(**kw)
        by = "ahead" if "-cached_" in threading.current_thread().name else "group read"  # a writer thread's name
        by_thread[by] = by_thread.get(by, 0) + n
        return n, unanswered

    monkeypatch.setattr(worker, "cached_judgments_record", recorded)
    run = run_start(config=config, dataset=dataset, repeats=REPEATS, concurrency=1, spend_cap_usd=None, by=lead)
    run_work_here(run_id=run.pk)
    run.refresh_from_db()

    assert (run.cache_hits, run.provider_calls) == (12 * REPEATS, 4 * REPEATS)
    assert by_thread == {"ahead": 12 * REPEATS, "group read": 0}


@pytest.mark.django_db
def test_only_where_the_cache_alone_decides_a_hit(dataset, rubric, lead):
    def bulk(spec: dict, **run) -> bool:
        config = config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)
        engine = Engine(JudgeConfig.from_dict(config.spec), cache={})
        return cached.cached_in_bulk(run=Run(config=config, dataset=dataset, **run), engine=engine)

    assert bulk(behavioral_spec())
    assert not bulk(behavioral_spec(), fresh=True)  # its keys are its own
    assert not bulk(behavioral_spec(), probe=Run.Probe.VERBOSITY)  # it judges variants
    assert not bulk(behavioral_spec(second_opinion=judge_of(SECOND)))  # a cached verdict may draw a second opinion


@pytest.mark.django_db
def test_a_case_judged_in_part_before_keeps_its_tally_equal_to_its_judgments(dataset, rubric, lead):
    cases = make_cases(dataset, 2)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    engine = Engine(JudgeConfig.from_dict(config.spec), cache={})
    run = Run.objects.create(config=config, dataset=dataset, repeats=3, created_by=lead, status=Run.Status.RUNNING)
    CachedJudgment.objects.bulk_create(
        CachedJudgment(project=dataset.project, key=engine.cache_key(engine_case(case), repeat),
                       judgment=entry(outcome="pass" if repeat > 1 else "fail", similarity=0.5 + repeat / 10))
        for case in cases for repeat in (1, 2, 3)
    )
    # The first case's first repeat was judged (a call, slower and less similar than any cached one) before.
    worker.judgments_record(run=run, results=[(cases[0].pk, EngineJudgment(
        cases[0].external_id, 1, "not_evaluated", error="timeout", similarity=0.2, latency_ms=900))])

    assert cached.cached_judgments_record(run=run, engine=engine, case_ids=[c.pk for c in cases]) == (5, set())
    assert stored_tallies(run) == recounted_tallies(run)
    assert stored_tallies(run)[cases[0].pk] == (3, 2, 0, 1, 0.2, 900)
    run.refresh_from_db()
    assert (run.done, run.cache_hits, run.not_evaluated) == (6, 5, 1)


@pytest.mark.django_db
def test_another_projects_entries_are_no_hits_in_bulk(dataset, rubric, lead, other_project):
    """The bulk record reads the run's project's cache only (docs/projects.md): entries of the same keys kept by
    another project answer nothing, and every pair is left to the batch."""
    cases = make_cases(dataset, 2)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    engine = Engine(JudgeConfig.from_dict(config.spec), cache={})
    run = Run.objects.create(config=config, dataset=dataset, repeats=1, created_by=lead, status=Run.Status.RUNNING)
    keys = [engine.cache_key(engine_case(case), 1) for case in cases]
    CachedJudgment.objects.bulk_create(CachedJudgment(project=other_project, key=key, judgment=entry()) for key in keys)

    assert cached.cached_judgments_record(run=run, engine=engine, case_ids=[c.pk for c in cases]) == (
        0, {c.pk for c in cases})
    # The same entries kept by the run's own project are hits; the SQL joins on (project, key).
    CachedJudgment.objects.create(project=dataset.project, key=keys[0], judgment=entry())
    assert cached.cached_judgments_record(run=run, engine=engine, case_ids=[c.pk for c in cases]) == (
        1, {cases[1].pk})
    assert not run.judgments.filter(case=cases[1]).exists()
