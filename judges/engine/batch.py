"""Many judgments at once: the one way a batch is judged, by the worker's runs, the CI command and
every caller of the engine.

`judge_many` takes (key, engine, case, repeat) items, as many at a time as it has room for, and yields
lists of (key, judgment) as they complete. An item may carry a fifth value, the case's cache key
(`engine.cache_key(case, repeat)`) when its caller worked it out already (a run's worker keys its cases to read
their cached judgments): the case's content is then not hashed again. An item the judgment cache answers is answered where it is
taken, in the calling thread, and handed back in bulk (up to HITS_PER_YIELD at a time): a drift check
of thousands of unchanged cases costs no thread hop per case (a cached verdict drawn for a second opinion
goes to the pool, since that opinion may need a call). The texts the semantic layer needs are embedded ahead, many
to a call, each call sent as soon as it is full; an item is judged as soon as its texts are in: in the
calling thread when its config is semantic only (the engine's own arithmetic), else on the pool. All
provider calls of the batch, embeddings and judges alike, share one pool of `concurrency` threads, so
the cap holds over every engine in it. Each engine keeps its own caches and spend tracker (callers may
share one tracker between engines, for one cap over all).

The calling thread is the only one that pulls items and receives results, so it may use its own
database connection for both. `poll_s` makes the generator yield an empty list when nothing finished
in that time (the caller's heartbeat). Once `stop` is set, nothing new starts: items not yet started are
dropped (never yielded), calls in flight finish and are yielded. A judgment that raises stops the batch
the same way, and its exception is raised once the calls in flight are in. With `time_limits` (and `poll_s`),
a judgment still running past its engine's `time_limit_s` is yielded not evaluated ("timeout", "exceeded its
time") and no longer waited for: a thread cannot be stopped, but the batch, and whoever holds a lease while it
runs, moves on (its thread's late result is dropped).
"""

import os
import queue
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .cache import Cache
from .chain import RetryPolicy
from .config import JudgeConfig
from .embeddings import EMBED_BATCH, Plan
from .judgment import Judgment
from .runner import Engine
from .spend import Prices, SpendTracker

K = TypeVar("K")


@dataclass(slots=True)
class _Item[K]:
    key: K
    engine: Engine
    case: dict[str, Any]
    repeat: int
    cache_key: str | None = None
    looked_up: bool = True  # False: looking it up in the cache raised; judge() meets it again on the pool
    cached: Judgment | None = None  # its cached primary verdict, when a drawn second opinion is still to come
    plan: Plan | None = None
    missing: int = 0  # embedding calls this item still waits for


@dataclass
class _Open:
    """One engine's embedding call being filled, and the texts already on their way."""

    number: int = 0  # of the call being filled
    texts: list[tuple[str, str]] = field(default_factory=list)  # (key, text)
    on_the_way: dict[str, int] = field(default_factory=dict)  # key -> the call that embeds it
    sent: dict[int, list[str]] = field(default_factory=dict)  # call -> its keys, until it is back


# Cached judgments answered where items are taken, before the caller is handed them: one bulk write of the
# caller's (a worker's recording costs a handful of queries whatever its size: fewer, larger ones are
# cheaper), few enough that the calls in flight are not left waiting long while it records them.
HITS_PER_YIELD = 2000


def _lookahead(engine: Engine, concurrency: int) -> int:
    """How many items the batch holds at once for this engine's config: two per thread keeps every
    thread busy. A semantic layer holds enough for eight rounds of full embedding calls on every thread:
    with no judge to wait for, planning the items (checks, references, keys) is the batch's own work, and
    it must run well ahead of the calls or the calls wait for it."""
    if engine.embeddings is None:
        return 2 * concurrency
    if not engine.calls_judge:
        return 8 * concurrency * EMBED_BATCH
    return max(2 * concurrency, EMBED_BATCH)


def judge_many[K](
    items: Iterable[tuple[K, Engine, dict[str, Any], int] | tuple[K, Engine, dict[str, Any], int, str | None]],
    *,
    concurrency: int,
    stop: threading.Event | None = None,
    poll_s: float | None = None,
    time_limits: bool = False,
) -> Iterator[list[tuple[K, Judgment]]]:
    """Judge (key, engine, case, repeat) items on at most `concurrency` threads; yields lists of (key,
    judgment) as they complete (the module's docstring says how)."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError("concurrency: must be a positive integer")
    return _Batch(items, concurrency=concurrency, stop=stop, poll_s=poll_s, time_limits=time_limits).run()


class _Batch[K]:
    def __init__(
        self,
        items: Iterable[tuple[K, Engine, dict[str, Any], int] | tuple[K, Engine, dict[str, Any], int, str | None]],
        *,
        concurrency: int,
        stop: threading.Event | None,
        poll_s: float | None,
        time_limits: bool = False,
    ) -> None:
        self.items = iter(items)
        self.time_limits = time_limits
        self.started: dict[int, tuple[_Item[K], float]] = {}  # judgments running on the pool, since when
        self.abandoned: set[int] = set()  # past their time: their late message is dropped
        self.concurrency = concurrency
        self.stop = stop
        self.poll_s = poll_s
        self.halt = threading.Event()  # set: no task that has not started will start
        self.messages: queue.SimpleQueue = queue.SimpleQueue()
        self.exhausted = False
        self.lookahead = 1
        self.held = 0  # items taken and neither yielded nor dropped
        self.in_flight = 0  # tasks on the pool whose message has not come back
        self.judging = 0  # of which judgments
        self.open: dict[Engine, _Open] = {}
        self.here: dict[Engine, bool] = {}  # whose items are judged in this thread (_ready)
        self.waiting: dict[tuple[Engine, int], list[_Item[K]]] = defaultdict(list)
        self.ready_here: list[_Item[K]] = []  # judged in this thread: their config is semantic only
        self.ready_pool: deque[_Item[K]] = deque()
        self.out: list[tuple[K, Judgment]] = []
        self.failure: BaseException | None = None

    def run(self) -> Iterator[list[tuple[K, Judgment]]]:
        self.pools = [ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="judge")]
        self.queued: dict[Future, tuple[Callable[..., Any], tuple]] = {}  # submitted, maybe not started yet
        try:
            while True:
                if self.stop is not None and self.stop.is_set():
                    self._halt()
                self._take()
                self._start_ready()
                if self.out:
                    out, self.out = self.out, []
                    yield out
                    continue
                if self.in_flight == 0 and self._finished():
                    break
                try:
                    message = self.messages.get(timeout=self.poll_s)
                except queue.Empty:
                    if self.time_limits:
                        self._give_up_overdue()
                    out, self.out = self.out, []
                    yield out
                    continue
                self._receive(message)
                while True:  # and whatever else has come back meanwhile, before yielding
                    try:
                        self._receive(self.messages.get_nowait())
                    except queue.Empty:
                        break
                # Judged and handed on before more items are taken (taking may wait for a database).
                self._start_ready()
                if self.out:
                    out, self.out = self.out, []
                    yield out
        finally:
            self.halt.set()
            for pool in self.pools:  # a thread past its time is not waited for
                pool.shutdown(wait=not self.abandoned, cancel_futures=True)
        if self.failure is not None:
            raise self.failure

    def _finished(self) -> bool:
        if self.ready_here or self.ready_pool:
            return False
        return self.halt.is_set() or (self.exhausted and not self.waiting)

    def _halt(self) -> None:
        """Nothing new starts: what is held and not started is dropped."""
        self.halt.set()
        waiting = {id(i): i for w in self.waiting.values() for i in w}
        dropped = [*self.ready_here, *self.ready_pool, *waiting.values()]
        self.held -= len(dropped)
        for item in dropped:
            _release(item)
        self.ready_here, self.ready_pool, self.waiting = [], deque(), defaultdict(list)
        for open_ in self.open.values():
            open_.texts = []

    # ---- taking items ----------------------------------------------------------------------------

    def _take(self) -> None:
        while (
            not self.halt.is_set()
            and not self.exhausted
            and self.held < self.lookahead
            and len(self.out) < HITS_PER_YIELD
            # What came back is taken in first: items that come slowly (read from a database as the
            # batch has room) do not hold back the judgments already possible, nor their recording.
            and (self.in_flight == 0 or self.messages.empty())
        ):
            try:
                key, engine, case, repeat, *known = next(self.items)
            except StopIteration:
                self.exhausted = True
                break
            item = _Item(key, engine, case, repeat)
            try:
                item.cache_key, hit, item.cached = engine.lookup(case, repeat, *known)
            except Exception:
                item.looked_up, hit = False, None
            if hit is not None:  # no call, no thread: it does not count against the lookahead
                self.out.append((key, hit))
                continue
            self.held += 1
            if engine not in self.here:  # the engine's first item: what its config asks of the batch
                self.here[engine] = engine.embeddings is not None and not engine.calls_judge
                self.lookahead = max(self.lookahead, _lookahead(engine, self.concurrency))
            self._admit(item)
        if not self.halt.is_set() and (self.exhausted or self.in_flight == 0):
            # No more items come, or nothing in flight could make room for more: a call still being filled
            # goes as it is, or its items would wait for good. Otherwise what comes back makes room, and
            # the call fills up with the items taken then.
            for engine, open_ in self.open.items():
                if open_.texts:
                    self._send(engine, open_)

    def _admit(self, item: _Item[K]) -> None:
        engine = item.engine
        needs_plan = item.looked_up and item.cached is None
        plan = item.plan = engine.plan(item.case, item.repeat, item.cache_key) if needs_plan else None
        if plan is None:
            self._ready(item)
            return
        embeddings = engine.embeddings
        assert embeddings is not None
        embeddings.hold(plan.keys)  # its vectors stay in memory until it is judged (_release)
        open_ = self.open.get(engine)
        if open_ is None:
            open_ = self.open[engine] = _Open()
        on_the_way, waits = open_.on_the_way, set()
        for key, text in zip(plan.keys, plan.texts, strict=True):
            n = on_the_way.get(key)
            if n is None and not embeddings.known(key):
                n = on_the_way[key] = open_.number
                open_.texts.append((key, text))
            if n is not None:
                waits.add(n)
        item.missing = len(waits)
        for n in waits:
            self.waiting[(engine, n)].append(item)
        if not waits:
            self._ready(item)
        if len(open_.texts) >= EMBED_BATCH:
            self._send(engine, open_)

    def _send(self, engine: Engine, open_: _Open) -> None:
        texts, n = open_.texts, open_.number
        open_.sent[n] = [key for key, _ in texts]
        open_.texts, open_.number = [], n + 1
        self.in_flight += 1
        self.submit(self._embed_task, engine, n, texts)

    def _ready(self, item: _Item[K]) -> None:
        # A semantic-only judgment, once its texts are in, is arithmetic: no thread needed. Every other
        # one may call a provider or run contract checks on untrusted text: on the pool, under the cap.
        (self.ready_here if self.here[item.engine] else self.ready_pool).append(item)

    # ---- judging ---------------------------------------------------------------------------------

    def _start_ready(self) -> None:
        if self.halt.is_set():
            return
        if self.ready_here:
            ready, self.ready_here = self.ready_here, []
            self._judge_here(ready)
        # Two per thread in hand, so a thread whose call ends takes the next at once (the pool starts
        # its work in the order it was given: the items' order holds).
        while self.ready_pool and self.judging < 2 * self.concurrency:
            item = self.ready_pool.popleft()
            self.in_flight += 1
            self.judging += 1
            self.submit(self._judge_task, item)

    def _judge_here(self, ready: list[_Item[K]]) -> None:
        planned: dict[Engine, list[_Item[K]]] = defaultdict(list)
        for item in ready:
            if item.plan is None:
                self.out.append((item.key, _judge(item)))
            else:
                planned[item.engine].append(item)
        for engine, items in planned.items():
            judged = engine.judge_planned([(i.case, i.repeat, i.plan) for i in items if i.plan is not None])
            self.out += [(item.key, j) for item, j in zip(items, judged, strict=True)]
            assert engine.embeddings is not None
            engine.embeddings.release([key for i in items if i.plan is not None for key in i.plan.keys])
        self.held -= len(ready)

    # ---- what the threads do, and what comes back ------------------------------------------------

    def _halted(self) -> bool:
        return self.halt.is_set() or (self.stop is not None and self.stop.is_set())

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        future = self.pools[-1].submit(fn, *args)
        self.queued[future] = (fn, args)
        future.add_done_callback(lambda done: self.queued.pop(done, None))

    def _replace_pool(self) -> None:
        """A fresh pool for what has not started: the threads of abandoned judgments stay taken until they return,
        and work queued behind them would never start (nor ever be given up, having no start time)."""
        self.pools.append(ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="judge"))
        for future, (fn, args) in list(self.queued.items()):
            if future.cancel():
                self.queued.pop(future, None)
                self.submit(fn, *args)

    def _give_up_overdue(self) -> None:
        """Judgments running past their engine's time limit: not evaluated, and no longer waited for."""
        now = time.monotonic()
        abandoned = len(self.abandoned)
        for ident, (item, since) in list(self.started.items()):
            limit = item.engine.time_limit_s
            if now - since <= limit or ident in self.abandoned:
                continue
            self.abandoned.add(ident)
            self.started.pop(ident, None)
            self.in_flight -= 1
            self.judging -= 1
            self.held -= 1
            _release(item)
            self.out.append((item.key, Judgment(
                str(item.case.get("external_id", "")), item.repeat, "not_evaluated", error="timeout",
                reason=f"timeout: the judgment exceeded its time ({limit:.0f} s) and was not evaluated",
                latency_ms=int((now - since) * 1000),
            )))
        if len(self.abandoned) > abandoned:
            self._replace_pool()

    def _judge_task(self, item: _Item[K]) -> None:
        if self._halted():
            self.messages.put(("dropped", item, None))
            return
        self.started[id(item)] = (item, time.monotonic())
        try:
            judgment = _judge(item)
        except BaseException as exc:  # raised in the calling thread once the calls in flight are in
            self.messages.put(("failed", item, exc))
        else:
            self.messages.put(("judged", item, judgment))

    def _embed_task(self, engine: Engine, n: int, texts: list[tuple[str, str]]) -> None:
        try:
            if not self._halted():
                assert engine.embeddings is not None
                engine.embeddings.embed(texts)
        except BaseException as exc:
            self.messages.put(("failed", None, exc))
        self.messages.put(("embedded", engine, n))

    def _receive(self, message: tuple[str, Any, Any]) -> None:
        kind, subject, value = message
        if kind == "embedded":
            self.in_flight -= 1
            self._embedded(subject, value)
            return
        if kind == "failed" and subject is None:  # an embedding call's; its own message follows
            self._fail(value)
            return
        if id(subject) in self.abandoned:  # given up on (_give_up_overdue): already yielded
            return
        self.started.pop(id(subject), None)
        self.in_flight -= 1
        self.judging -= 1
        self.held -= 1
        _release(subject)
        if kind == "judged":
            self.out.append((subject.key, value))
        elif kind == "failed":
            self._fail(value)

    def _fail(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc
        self._halt()

    def _embedded(self, engine: Engine, n: int) -> None:
        open_ = self.open[engine]
        for key in open_.sent.pop(n):
            if open_.on_the_way.get(key) == n:
                del open_.on_the_way[key]
        for item in self.waiting.pop((engine, n), []):
            item.missing -= 1
            if not item.missing:
                self._ready(item)


def _release[K](item: _Item[K]) -> None:
    """The item is judged or dropped: its texts' vectors are no longer kept for it (Embeddings.hold)."""
    if item.plan is not None and item.engine.embeddings is not None:
        item.engine.embeddings.release(item.plan.keys)


def _judge[K](item: _Item[K]) -> Judgment:
    if not item.looked_up:
        return item.engine.judge(item.case, item.repeat)
    return item.engine.judge_new(item.case, item.repeat, item.cache_key, item.cached)


def judge_batch(
    items: Iterable[tuple[dict[str, Any], int]],
    config: JudgeConfig | dict[str, Any],
    *,
    concurrency: int,
    cache: Cache | None = None,
    prices: Prices | None = None,
    spend_cap_usd: float | None = None,
    env: Mapping[str, str] = os.environ,
    on_result: Callable[[Judgment], None] | None = None,
    retry: RetryPolicy | None = None,
    allowed_env: Iterable[str] = (),
    embedding_cache: Cache | None = None,
    sampled: Collection[str] | None = None,
) -> list[Judgment]:
    """Judge (case, repeat) pairs under one config on at most `concurrency` threads; results in the
    items' order.

    `on_result` is called in the caller's thread as each judgment finishes (so it may use the
    caller's database connection). Once the spend cap is reached, the items still to call a
    provider come back `not_evaluated` with the error "spend cap". `sampled`: the external ids drawn for a
    second opinion's `sample` mode (Engine).
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError("concurrency: must be a positive integer")
    pairs = list(items)
    engine = Engine(
        config,
        cache=cache,
        prices=prices,
        spend=SpendTracker(spend_cap_usd),
        env=env,
        retry=retry,
        allowed_env=allowed_env,
        embedding_cache=embedding_cache,
        sampled=sampled,
    )
    results: list[Judgment | None] = [None] * len(pairs)
    try:
        work = ((i, engine, case, repeat) for i, (case, repeat) in enumerate(pairs))
        for done in judge_many(work, concurrency=concurrency):
            for i, judgment in done:
                results[i] = judgment
                if on_result is not None:
                    on_result(judgment)
    finally:
        engine.close()
    return results  # type: ignore[return-value]
