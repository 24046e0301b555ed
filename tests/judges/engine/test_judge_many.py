"""judge_many, the one batch path: it takes items only as it has room, stops cleanly, keeps its caller
awake, and a judgment that raises stops the batch without losing what finished.

Contract-only configs with a cache that can hold or fail a write stand in for a slow or broken
judgment: the engine writes a new judgment to the cache on the thread that judged it (its lookup is
the calling thread's, where a hit is answered at once).
"""

import threading
import time

import pytest

from judges.engine import Engine, MemoryCache, judge_many
from judges.engine.batch import HITS_PER_YIELD

from .factories import contract_config, tool_case


class HeldCache(MemoryCache):
    """Each write waits until `release` is set; with `fail`, the first write raises."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.written = 0
        self.fail = False
        self._lock = threading.Lock()

    def put(self, key, judgment):
        with self._lock:
            self.written += 1
            fail = self.fail and self.written == 1
        if fail:
            raise RuntimeError("a judgment that breaks")
        assert self.release.wait(10)
        super().put(key, judgment)


def engine(cache=None) -> Engine:
    return Engine(contract_config("expected_tool"), cache=cache)


def items(n: int, engine_: Engine, pulled: list[int] | None = None):
    for i in range(n):
        if pulled is not None:
            pulled.append(i)
        yield i, engine_, tool_case(external_id=f"case-{i:03d}"), 1


def test_it_judges_every_item_once_and_yields_them_by_key():
    judged = {key: j for done in judge_many(items(50, engine()), concurrency=4) for key, j in done}
    assert sorted(judged) == list(range(50))
    assert all(j.outcome == "pass" and j.external_id == f"case-{key:03d}" for key, j in judged.items())


def test_it_takes_items_only_as_it_has_room_for_them():
    cache = HeldCache()
    pulled: list[int] = []
    batches = judge_many(items(100, engine(cache), pulled), concurrency=2, poll_s=0.05)
    assert next(batches) == []  # nothing finished while every write is held
    # Two items a thread in hand, no more: the rest of the dataset is not read ahead.
    assert len(pulled) == 4
    cache.release.set()
    rest = [key for done in batches for key, _ in done]
    assert sorted(rest) == list(range(100)) and len(pulled) == 100


def test_an_empty_list_keeps_the_caller_awake_while_nothing_finishes():
    cache = HeldCache()
    batches = judge_many(items(3, engine(cache)), concurrency=3, poll_s=0.05)
    started = time.monotonic()
    assert next(batches) == [] and next(batches) == []
    assert time.monotonic() - started < 5
    cache.release.set()
    assert sorted(key for done in batches for key, _ in done) == [0, 1, 2]


def test_once_stopped_nothing_new_starts_and_what_is_in_flight_is_yielded():
    cache = HeldCache()
    stop = threading.Event()
    pulled: list[int] = []
    batches = judge_many(items(100, engine(cache), pulled), concurrency=2, stop=stop, poll_s=0.05)
    assert next(batches) == []  # two lookups under way, two more waiting for a thread
    stop.set()
    cache.release.set()
    yielded = [key for done in batches for key, _ in done]
    # The two that had started finish and come back; the two waiting and the rest never start.
    assert sorted(yielded) == [0, 1]
    assert len(pulled) == 4
    assert cache.written == 2


def test_a_judgment_that_raises_stops_the_batch_after_what_was_in_flight():
    cache = HeldCache()
    cache.fail = True
    cache.release.set()
    yielded: list[int] = []
    with pytest.raises(RuntimeError, match="a judgment that breaks"):
        for done in judge_many(items(100, engine(cache)), concurrency=2):
            yielded += [key for key, _ in done]
    # The batch stopped near where it broke: far from all of it was judged, and nothing twice.
    assert len(yielded) < 10 and len(set(yielded)) == len(yielded)


class ThreadNoting(MemoryCache):
    def __init__(self) -> None:
        super().__init__()
        self.lookup_threads: set[str] = set()

    def get(self, key):
        self.lookup_threads.add(threading.current_thread().name)
        return super().get(key)


def test_cached_judgments_are_answered_in_the_calling_thread_and_handed_back_in_bulk():
    cache = ThreadNoting()
    batches = judge_many(items(HITS_PER_YIELD + 100, engine(cache)), concurrency=2)
    first = {key: j for done in batches for key, j in done}
    cache.lookup_threads.clear()

    batches = judge_many(items(HITS_PER_YIELD + 100, engine(cache)), concurrency=2)
    bulk = next(batches)
    rest = [pair for done in batches for pair in done]

    assert len(bulk) == HITS_PER_YIELD  # one hand-over, not one per thread's result
    assert cache.lookup_threads == {threading.current_thread().name}
    again = dict(bulk + rest)
    assert sorted(again) == sorted(first) and all(j.cached for j in again.values())
    assert [(j.outcome, j.reason) for j in again.values()] == [(first[k].outcome, first[k].reason) for k in again]


def test_one_pool_serves_several_engines_in_the_order_given():
    first, second = engine(), Engine(contract_config("answer_present"))
    work = [(("a", i), first, tool_case(external_id=f"a{i}"), 1) for i in range(5)]
    work += [(("b", i), second, tool_case(external_id=f"b{i}"), 1) for i in range(5)]
    judged = dict(pair for done in judge_many(work, concurrency=1) for pair in done)
    assert sorted(judged) == sorted(key for key, *_ in work)
    assert {j.reason for (name, _), j in judged.items() if name == "b"} == {"all 1 contract checks passed"}


@pytest.mark.parametrize("concurrency", [0, -1, True, 1.5])
def test_the_concurrency_must_be_a_positive_whole_number(concurrency):
    with pytest.raises(ValueError, match="concurrency"):
        judge_many([], concurrency=concurrency)


def test_an_item_carrying_its_cache_key_is_looked_up_and_stored_under_that_key():
    cache = MemoryCache()
    judge = engine(cache)
    case = tool_case(external_id="keyed")
    [[(_, made)]] = [done for done in judge_many([(0, judge, case, 1, "a-key-of-its-own")], concurrency=1) if done]
    assert cache.get("a-key-of-its-own") is not None and cache.get(judge.cache_key(case, 1)) is None
    [[(_, again)]] = [done for done in judge_many([(0, judge, case, 1, "a-key-of-its-own")], concurrency=1) if done]
    assert again.cached and not made.cached and again.outcome == made.outcome


class QuickLimit(Engine):
    """An engine whose judgments may take 0.3 s: the limit a run's batch gives up at (Engine.time_limit_s is
    minutes for a real config)."""

    time_limit_s = 0.3  # type: ignore[assignment]


@pytest.mark.parametrize("cancel", [False, True], ids=["left running", "cancelled"])
def test_with_time_limits_a_judgment_past_its_time_is_not_evaluated_and_not_waited_for(cancel):
    held = HeldCache()  # the first judgment's write never returns: a judgment stuck in its thread
    engine = QuickLimit(contract_config("expected_tool"), cache=held)
    stop = threading.Event()
    items = ((n, engine, tool_case(external_id=f"c{n}"), 1) for n in range(3))
    batches = judge_many(items, concurrency=3, stop=stop, poll_s=0.05, time_limits=True)

    got: dict[int, object] = {}
    for done in batches:
        got.update(done)
        if cancel:
            stop.set()  # nothing new starts; what is stuck is still given up on

    held.release.set()  # the stuck threads may end now: their late results are dropped
    assert sorted(got) == [0, 1, 2]
    for judgment in got.values():
        assert (judgment.outcome, judgment.error) == ("not_evaluated", "timeout")
        assert "the judgment exceeded its time" in judgment.reason


def test_a_real_configs_time_limit_covers_every_attempt_of_every_judge():
    from .factories import judge_config

    engine = Engine(judge_config(timeout_s=10, max_attempts=3))
    assert engine.time_limit_s == 3 * (10 + engine.retry.max_retry_after_s) + 60
