import hashlib
import threading

import pytest

from judges.engine import FolderCache, MemoryCache, SpendTracker, judge_batch

from .factories import OPENAI_MODEL, PRICES, contract_config, judge_config, policy_case, tool_case

CACHE_KEY = b"a test cache key, 32 bytes long!!"  # the gate step's secret (FolderCache signs with it)


def cases(n, **overrides):
    return [tool_case(external_id=f"case-{i:03d}", output=f"Answer number {i}.", **overrides) for i in range(n)]


def test_it_never_runs_more_than_the_concurrency_cap(fake, env):
    fake.control(latency_ms=100)
    judgments = judge_batch([(c, 1) for c in cases(20)], judge_config(), concurrency=4, env=env)
    assert all(j.outcome == "pass" for j in judgments)
    # The stand-in counts the calls it holds at once: the cap is reached and never passed.
    assert fake.stats()["max_in_flight"] == 4


def test_it_runs_up_to_the_cap_at_once(fake, env):
    # The stand-in holds each call until eight are in flight (or 10 s pass): however slow the machine,
    # eight calls in flight together is the proof, not how long the batch took.
    fake.control(gather=8)
    judge_batch([(c, 1) for c in cases(8)], judge_config(), concurrency=8, env=env)
    assert fake.stats()["max_in_flight"] == 8
    calls = fake.requests()
    assert len(calls) == 8
    assert max(c["started"] for c in calls) < min(c["ended"] for c in calls)  # every call overlaps every other


def test_results_keep_the_items_order_and_on_result_runs_in_the_callers_thread(fake, env):
    fake.control(rule={"kind": "answer_contains", "text": "number 1"})
    seen = []
    caller = threading.get_ident()
    items = [(c, r) for c in cases(6) for r in (1, 2)]
    judgments = judge_batch(
        items,
        judge_config(),
        concurrency=3,
        env=env,
        on_result=lambda j: seen.append((j.external_id, j.repeat, threading.get_ident())),
    )
    assert [(j.external_id, j.repeat) for j in judgments] == [(c["external_id"], r) for c, r in items]
    assert sorted(s[:2] for s in seen) == sorted((j.external_id, j.repeat) for j in judgments)
    assert {s[2] for s in seen} == {caller}


def test_concurrent_judgments_never_mix_their_cases(fake, env):
    fake.control(latency_ms=20, rule={"kind": "answer_contains", "text": "APPROVED"})
    batch = []
    for i in range(60):
        verdict = "APPROVED" if i % 3 == 0 else "declined"
        batch.append(tool_case(external_id=f"mix-{i}", output=f"Request {i}: {verdict} (ref {i * 7919})."))
    judgments = judge_batch([(c, 1) for c in batch], judge_config(), concurrency=16, env=env)
    for case, j in zip(batch, judgments, strict=True):
        assert j.external_id == case["external_id"]
        assert j.outcome == ("pass" if "APPROVED" in case["output"] else "fail")
        # The fake names the answer it was shown; it must be this case's own answer.
        assert hashlib.sha256(case["output"].encode()).hexdigest()[:12] in j.reason
    assert fake.stats()["max_in_flight"] > 1


def test_the_spend_cap_stops_a_batch_midway(fake, env):
    prices = {OPENAI_MODEL: {"input_per_mtok": 1000.0, "output_per_mtok": 1000.0}}
    items = [(c, 1) for c in cases(20)]
    judgments = judge_batch(items, judge_config(), concurrency=1, env=env, prices=prices, spend_cap_usd=3.0)
    outcomes = [j.outcome for j in judgments]
    evaluated = outcomes.count("pass")
    assert 0 < evaluated < 20
    # One worker judges in order: once the cap is reached, everything after is not evaluated.
    assert outcomes == ["pass"] * evaluated + ["not_evaluated"] * (20 - evaluated)
    stopped = judgments[evaluated:]
    assert {j.error for j in stopped} == {"spend cap"}
    assert all(j.provider_calls == 0 for j in stopped)
    assert "$3" in stopped[0].reason
    assert sum(j.cost_usd for j in judgments) <= 3.0
    assert fake.stats()["total"] == evaluated


def test_the_spend_cap_holds_with_concurrent_calls(fake, env):
    prices = {OPENAI_MODEL: {"input_per_mtok": 1000.0, "output_per_mtok": 1000.0}}
    fake.control(latency_ms=50)
    judgments = judge_batch(
        [(c, 1) for c in cases(40)], judge_config(), concurrency=8, env=env, prices=prices, spend_cap_usd=5.0
    )
    spent = sum(j.cost_usd for j in judgments if j.evaluated)
    assert spent <= 5.0
    assert any(j.evaluated for j in judgments)
    assert sum(j.error == "spend cap" for j in judgments) > 0


def test_a_spend_cap_does_not_stop_the_contract_layer(fake, env):
    config = judge_config(layers=["contract", "behavioral"], contract_checks=["expected_tool"])
    broken = tool_case(external_id="no-call", trace={"toolCalls": []})
    judgments = judge_batch(
        [(tool_case(), 1), (broken, 1)], config, concurrency=1, env=env, prices=PRICES, spend_cap_usd=0.0
    )
    assert [(j.outcome, j.error) for j in judgments] == [("not_evaluated", "spend cap"), ("fail", "")]


def test_the_spend_tracker_allows_up_to_the_cap_exactly_then_stops_for_good():
    spend = SpendTracker(1.0)
    assert spend.reserve(0.25) and spend.reserve(0.75)  # 1.0 in all: on the cap is within it
    assert not spend.reserve(0.01)
    assert spend.reached
    spend.settle(0.75, 0.0)  # room again, but a reached cap stays reached
    assert not spend.reserve(0.0)
    spend.settle(0.25, None)  # an unknown real cost counts as its estimate
    assert spend.spent_usd == 0.25


def test_the_spend_tracker_counts_what_was_spent_and_reserved():
    spend = SpendTracker(1.0)
    assert spend.reserve(0.5)
    spend.settle(0.5, 0.6)
    assert spend.spent_usd == 0.6
    assert spend.reserve(0.4) and not spend.reserve(0.01)  # 0.6 spent + 0.4 reserved = the cap


def test_the_spend_tracker_without_a_cap_never_stops():
    spend = SpendTracker()
    assert all(spend.reserve(1e6) for _ in range(3))
    assert not spend.reached


@pytest.mark.parametrize("cap", [-0.01, -1])
def test_a_negative_spend_cap_is_refused(cap):
    with pytest.raises(ValueError, match="spend cap: must not be negative"):
        SpendTracker(cap)


def test_a_spend_cap_without_a_price_cannot_be_kept(fake, env):
    [j] = judge_batch([(tool_case(), 1)], judge_config(), concurrency=1, env=env, prices={}, spend_cap_usd=10)
    assert (j.outcome, j.error) == ("not_evaluated", "config error")
    assert "has no price" in j.reason
    assert fake.stats()["total"] == 0


def test_an_unchanged_rerun_calls_no_provider(fake, env):
    cache = MemoryCache()
    items = [(c, r) for c in cases(5) for r in (1, 2)]
    first = judge_batch(items, judge_config(), concurrency=4, env=env, cache=cache, prices=PRICES)
    assert fake.stats()["total"] == 10  # repeats are separate work
    assert len(cache) == 10
    second = judge_batch(items, judge_config(), concurrency=4, env=env, cache=cache, prices=PRICES)
    assert fake.stats()["total"] == 10
    assert all(j.cached and j.provider_calls == 0 and j.cost_usd == 0.0 for j in second)
    assert [(j.outcome, j.reason, j.raw_output) for j in second] == [(j.outcome, j.reason, j.raw_output) for j in first]


def test_a_changed_config_or_case_is_judged_again(fake, env):
    cache = MemoryCache()
    judge_batch([(tool_case(), 1)], judge_config(), concurrency=1, env=env, cache=cache)
    judge_batch([(tool_case(), 1)], judge_config(criteria="Stricter."), concurrency=1, env=env, cache=cache)
    judge_batch([(tool_case(output="Changed."), 1)], judge_config(), concurrency=1, env=env, cache=cache)
    assert fake.stats()["total"] == 3
    # The address a variable holds is no part of the work: a moved endpoint still hits.
    moved = {**env, "EVALHUB_JUDGE_OPENAI_URL": env["EVALHUB_JUDGE_OPENAI_URL"].replace("127.0.0.1", "localhost")}
    [j] = judge_batch([(tool_case(), 1)], judge_config(), concurrency=1, env=moved, cache=cache)
    assert j.cached and fake.stats()["total"] == 3
    # The variable's name is (config_hash covers it): another key variable is another config.
    renamed = {**env, "EVALHUB_JUDGE_OTHER_KEY": env["EVALHUB_JUDGE_API_KEY"]}
    config = judge_config(api_key_env="EVALHUB_JUDGE_OTHER_KEY")
    [j] = judge_batch([(tool_case(), 1)], config, concurrency=1, env=renamed, cache=cache)
    assert not j.cached and fake.stats()["total"] == 4


def test_the_same_content_under_another_id_is_a_hit_reported_under_its_own_id(fake, env):
    cache = MemoryCache()
    judge_batch(
        [(tool_case(external_id="a", metadata={"x": 1}), 1)],
        judge_config(),
        concurrency=1,
        env=env,
        cache=cache,
    )
    [j] = judge_batch([(tool_case(external_id="b"), 1)], judge_config(), concurrency=1, env=env, cache=cache)
    assert (j.external_id, j.cached) == ("b", True)


def test_not_evaluated_is_never_cached(fake, env, quick_retry):
    cache = MemoryCache()
    fake.control(fault="500")
    [j] = judge_batch([(tool_case(), 1)], judge_config(), concurrency=1, env=env, cache=cache, retry=quick_retry)
    assert j.outcome == "not_evaluated" and len(cache) == 0
    fake.control(fault=None)
    [j] = judge_batch([(tool_case(), 1)], judge_config(), concurrency=1, env=env, cache=cache)
    assert (j.outcome, j.cached, j.provider_calls) == ("pass", False, 1)


def test_a_folder_cache_serves_a_later_process(fake, env, tmp_path):
    items = [(policy_case(external_id=f"p{i}", output=f"Yes, within 30 days ({i})."), 1) for i in range(4)]
    judge_batch(items, judge_config(), concurrency=2, env=env, cache=FolderCache(tmp_path / "cache", key=CACHE_KEY))
    again = judge_batch(items, judge_config(), concurrency=2, env=env,
                        cache=FolderCache(tmp_path / "cache", key=CACHE_KEY))
    assert all(j.cached for j in again)
    assert fake.stats()["total"] == 4


def test_contract_only_batches_need_no_provider():
    items = [(tool_case(), 1), (tool_case(external_id="x", trace={"toolCalls": []}), 1)]
    judgments = judge_batch(items, contract_config("expected_tool"), concurrency=2, env={})
    assert [j.outcome for j in judgments] == ["pass", "fail"]


@pytest.mark.parametrize("concurrency", [0, -1, 1.5, True])
def test_concurrency_must_be_a_positive_integer(concurrency):
    with pytest.raises(ValueError, match="concurrency"):
        judge_batch([], contract_config("answer_present"), concurrency=concurrency)


def test_once_the_cap_is_reached_a_smaller_call_does_not_squeeze_in():
    spend = SpendTracker(1.0)
    assert spend.reserve(0.6)
    spend.settle(0.6, 0.5)
    assert not spend.reserve(0.6)  # 0.5 spent + 0.6 > 1.0
    assert not spend.reserve(0.1)  # would fit, but the cap has been reached
    assert spend.spent_usd == 0.5


def test_the_spend_cap_counts_calls_in_flight():
    spend = SpendTracker(1.0)
    assert spend.reserve(0.4) and spend.reserve(0.4)
    assert not spend.reserve(0.4)
    spend.settle(0.4, None)  # no usage reported: the estimate is taken as spent
    assert spend.spent_usd == 0.4


def test_a_batch_stops_for_good_at_the_cap(fake, env):
    prices = {OPENAI_MODEL: {"input_per_mtok": 1000.0, "output_per_mtok": 1000.0}}
    long = tool_case(external_id="long", output="x" * 6000)  # its estimate alone breaks the cap
    items = [(tool_case(external_id="first"), 1), (long, 1), (tool_case(external_id="small"), 1)]
    judgments = judge_batch(items, judge_config(), concurrency=1, env=env, prices=prices, spend_cap_usd=2.5)
    assert [(j.outcome, j.error) for j in judgments] == [
        ("pass", ""),
        ("not_evaluated", "spend cap"),
        ("not_evaluated", "spend cap"),
    ]
