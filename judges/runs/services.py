"""Writes of runs: starting, cancelling and re-running them, and the work that fills them.

One task at a time works a run, holding the run's lease (`Run.lease_token`, `lease_until`) and extending it
every second: one holder keeps the run's concurrency cap across workers, and a worker killed mid-run lets
the lease run out, so the next task takes the run over and judges only what has no judgment yet. The
holder keeps `concurrency` calls in flight from its first call to its last (a sliding window over the
run's chunks, read ahead, results recorded in batches as they come), for a bounded window of time, then
releases the lease and queues the run again. Judgments are unique on (run, case, repeat), so work redone
after a kill never doubles.
"""

import queue
import threading
import time
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from decimal import Decimal

from celery import signature
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from judges.configs.services import engine_prices
from judges.engine import Engine, MemoryCache, SpendTracker, cache_key
from judges.engine import JudgeConfig as EngineConfig
from judges.engine import Judgment as EngineJudgment
from judges.models import CachedJudgment, JudgeConfig, Judgment, Run, RunChunk
from judges.probes.variants import make_variant
from judges.runs.embeddings import StoredEmbeddings, embeddings_save, stored_vectors
from labeling.models import Case, Dataset

RUN_WORK_TASK = "judges.run_work"  # judges.runs.tasks.run_work


class RunError(Exception):
    """A run cannot be started or changed as asked; the message says why."""


def engine_case(case: Case) -> dict:
    """A case as the engine reads it (the case fields of docs/cases.md)."""
    return {
        "external_id": case.external_id,
        "input": case.input,
        "output": case.output,
        "trace": case.trace,
        "golden_answer": case.golden_answer,
        "expected_behaviour": case.expected_behaviour,
        "expected_tool": case.expected_tool,
        "expected_tool_argument": case.expected_tool_argument,
        "expected_source": case.expected_source,
        "category": case.category,
        "metadata": case.metadata,
    }

UNFINISHED = (Run.Status.QUEUED, Run.Status.RUNNING)


def run_start(
    *, config: JudgeConfig, dataset: Dataset, repeats: int, concurrency: int, spend_cap_usd: Decimal | None, by,
    start_token: uuid.UUID | None = None,
) -> Run:
    """Create a run with its chunks and queue its work once the rows are committed.

    A `start_token` (the start form's) that already started a run gives back that run, unchanged: a double
    click or a resubmitted form starts one run. Two requests at once meet at the token's unique constraint,
    where the second waits for the first to commit and then gives back the first's run.
    """
    if config.external:
        raise RunError("An imported (external) config holds verdicts of another tool; it cannot run.")
    if not 1 <= repeats <= 20:
        raise RunError("Repeats must be between 1 and 20.")
    if not 1 <= concurrency <= 64:
        raise RunError("Concurrency must be between 1 and 64.")
    if start_token is not None and (started := Run.objects.filter(start_token=start_token).first()) is not None:
        return started
    try:
        with transaction.atomic():
            case_ids = list(dataset.cases.order_by("id").values_list("id", flat=True))
            if not case_ids:
                raise RunError(f"The dataset {dataset.slug} has no cases.")
            run = Run.objects.create(
                config=config, dataset=dataset, repeats=repeats, concurrency=concurrency,
                spend_cap_usd=spend_cap_usd, created_by=by, total=len(case_ids) * repeats, start_token=start_token,
            )
            size = settings.EVALHUB_CHUNK_CASES
            RunChunk.objects.bulk_create(
                RunChunk(run=run, index=i, case_ids=case_ids[start : start + size])
                for i, start in enumerate(range(0, len(case_ids), size))
            )
            queue_run_work(run.pk)
    except IntegrityError:
        started = Run.objects.filter(start_token=start_token).first() if start_token is not None else None
        if started is None:
            raise
        return started
    return run


def run_cancel(*, run: Run) -> None:
    """Stop a run. The task at work on it sees this at its next heartbeat (about a second): no new call
    starts, the calls in flight finish and are recorded."""
    Run.objects.filter(pk=run.pk, status__in=UNFINISHED).update(
        status=Run.Status.CANCELLED, finished_at=timezone.now()
    )


def run_retry_not_evaluated(*, run: Run) -> int:
    """Judge again only a finished or cancelled run's not-evaluated judgments; returns how many.

    Their rows go (tokens and cost already spent stay counted) and the chunks holding their cases
    are to do again.
    """
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status not in {Run.Status.FINISHED, Run.Status.CANCELLED}:
            raise RunError("Only a finished or cancelled run can re-run its not-evaluated judgments.")
        retry = run.judgments.filter(outcome="not_evaluated")
        case_ids = set(retry.values_list("case_id", flat=True))
        count = retry.count()
        retry.delete()
        chunk_ids = [c.pk for c in run.chunks.all() if case_ids.intersection(c.case_ids)]
        RunChunk.objects.filter(pk__in=chunk_ids).update(done_at=None)
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.QUEUED, finished_at=None, done=F("done") - count,
            not_evaluated=F("not_evaluated") - count,
        )
        queue_run_work(run.pk)
    return count


def queue_run_work(run_id: int) -> None:
    """Queue the run's work once the transaction commits (by task name: tasks import this module)."""
    transaction.on_commit(lambda: signature(RUN_WORK_TASK, args=(run_id,)).delay())


def _lease() -> timedelta:
    return timedelta(seconds=settings.EVALHUB_RUN_LEASE_SECONDS)


def run_claim(*, run_id: int) -> str | None:
    """Take the run's lease for one window of work: its token, or None when there is nothing to do now.

    None while another task holds a live lease (one holder at a time keeps the run's concurrency cap
    across workers), and for a finished or cancelled run. A run with every chunk done is marked finished.
    """
    now = timezone.now()
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.status not in UNFINISHED:
            return None
        if run.lease_until is not None and run.lease_until > now:
            return None
        if not run.chunks.filter(done_at__isnull=True).exists():
            Run.objects.filter(pk=run.pk).update(
                status=Run.Status.FINISHED, finished_at=now, lease_token="", lease_until=None
            )
            return None
        token = uuid.uuid4().hex
        Run.objects.filter(pk=run.pk).update(
            lease_token=token, lease_until=now + _lease(), status=Run.Status.RUNNING,
            started_at=run.started_at or now,
        )
    return token


def run_window(*, run_id: int, token: str) -> bool:
    """Work the run under the lease `token` for one window; True when work is left for the next.

    The run's `concurrency` calls stay in flight from the window's first call to its last: the cases are
    read ahead a chunk at a time and each thread takes the next (case, repeat) as soon as its call ends, so
    no chunk boundary waits. Results are recorded in batches as they arrive (live progress) and the lease
    is extended every heartbeat. Once EVALHUB_RUN_WINDOW_SECONDS are up, no more cases are taken; on a
    cancel, or a lease lost, no new call starts. Either way the calls in flight finish and are recorded,
    the lease is released and the caller re-queues the run if work is left: a task never holds a whole
    dataset's work.
    """
    window = _Window(run_id=run_id, token=token)
    try:
        window.work()
    finally:
        window.close()
    if window.failure is not None:
        # The lease stays until it runs out: the sweep queues the run again later rather than at once.
        raise window.failure
    return _window_end(run_id=run_id, token=token)


def run_work_here(*, run_id: int) -> None:
    """Do a run's whole work in this process, window after window, as workers would (the demo, benchmarks)."""
    while (token := run_claim(run_id=run_id)) is not None:
        run_window(run_id=run_id, token=token)


class _RecordingCache(MemoryCache):
    """A window's engine cache: entries read from the database ahead of their cases, and what is new."""

    def __init__(self) -> None:
        super().__init__()
        self._new: dict[str, dict] = {}
        self._new_lock = threading.Lock()

    def preload(self, entries: Iterable[tuple[str, dict]]) -> None:
        for key, value in entries:
            super().put(key, value)

    def put(self, key: str, judgment: dict) -> None:
        super().put(key, judgment)
        with self._new_lock:
            self._new[key] = judgment

    def take_new(self) -> dict[str, dict]:
        with self._new_lock:
            new, self._new = self._new, {}
        return new


# How often the window extends its lease and looks for a cancel, and records what has arrived.
HEARTBEAT_SECONDS = 1.0
RECORD_EVERY_SECONDS = 0.5
RECORD_BATCH = 500


class _Window:
    """One task's window of a run's work (run_window). Only this thread touches the database; the engine's
    threads judge and hand their results over a queue."""

    def __init__(self, *, run_id: int, token: str) -> None:
        self.run = Run.objects.select_related("config").get(pk=run_id)
        self.token = token
        config = EngineConfig.from_dict(self.run.config.spec)
        self.config_hash = config.config_hash
        self.config = config
        self.cache = _RecordingCache()
        self.embeddings = StoredEmbeddings() if config.semantic is not None else None
        self.engine = Engine(
            config, cache=self.cache, prices=engine_prices(), spend=SpendTracker(self._spend_left()),
            # The names were checked when the config was saved; checked again before any call, against
            # today's allow-list: a refused name is not evaluated ("config error").
            allowed_env=settings.EVALHUB_JUDGE_ENV_ALLOW, embedding_cache=self.embeddings,
        )
        self.pool = ThreadPoolExecutor(max_workers=self.run.concurrency, thread_name_prefix=f"run-{run_id}")
        self.results: queue.SimpleQueue = queue.SimpleQueue()
        self.stop = threading.Event()  # set: no call starts any more
        self.unrecorded: dict[int, int] = {}  # chunk pk: its (case, repeat) pairs taken and not yet recorded
        self.outstanding = 0  # pairs handed to the threads whose result has not come back
        self.last_index = -1
        self.chunks_left = True
        self.failure: BaseException | None = None

    def _spend_left(self) -> float | None:
        run = self.run
        if run.spend_cap_usd is None:
            return None
        if run.judgments.filter(error="spend cap").exists():
            return 0.0  # reached in an earlier window: it stays reached (engine.SpendTracker)
        return max(float(run.spend_cap_usd - run.cost_usd), 0.0)

    def work(self) -> None:
        ends_at = time.monotonic() + settings.EVALHUB_RUN_WINDOW_SECONDS
        heartbeat = min(HEARTBEAT_SECONDS, settings.EVALHUB_RUN_LEASE_SECONDS / 3)
        last_beat = last_record = time.monotonic()
        arrived: list[tuple] = []
        while True:
            # The first chunk is taken however short the window: every window moves the run on.
            if not self.stop.is_set() and (self.last_index < 0 or time.monotonic() < ends_at):
                self._feed()
            if self.outstanding == 0:
                break
            wait = min(last_beat + heartbeat, last_record + RECORD_EVERY_SECONDS) - time.monotonic()
            try:
                item = self.results.get(timeout=max(wait, 0.0))
                while True:
                    arrived.append(item)
                    self.outstanding -= 1
                    if len(arrived) >= RECORD_BATCH:
                        break
                    item = self.results.get_nowait()
            except queue.Empty:
                pass
            now = time.monotonic()
            if arrived and (len(arrived) >= RECORD_BATCH or now - last_record >= RECORD_EVERY_SECONDS):
                self._record(arrived)
                arrived, last_record = [], now
            if now >= last_beat + heartbeat:
                if not self._extend_lease():
                    self.stop.set()  # cancelled, or the lease was lost to another task
                last_beat = now
        self._record(arrived)

    def close(self) -> None:
        self.stop.set()
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.engine.close()

    def _feed(self) -> None:
        # Two rounds of pairs per thread in hand: a thread whose call ends takes the next at once.
        while self.chunks_left and self.outstanding < 2 * self.run.concurrency:
            self._take_next_chunk()

    def _take_next_chunk(self) -> None:
        run = self.run
        chunk = run.chunks.filter(done_at__isnull=True, index__gt=self.last_index).order_by("index").first()
        if chunk is None:
            self.chunks_left = False
            return
        self.last_index = chunk.index
        RunChunk.objects.filter(pk=chunk.pk).update(attempts=F("attempts") + 1)
        done = set(run.judgments.filter(case_id__in=chunk.case_ids).values_list("case_id", "repeat"))
        pairs = []
        for case in Case.objects.filter(pk__in=chunk.case_ids).order_by("pk"):
            judged = _judged_case(run, chunk, case)
            if judged is None:
                continue
            pairs += [(case, judged, r) for r in range(1, run.repeats + 1) if (case.pk, r) not in done]
        if not pairs:
            RunChunk.objects.filter(pk=chunk.pk).update(done_at=timezone.now())
            return
        keys = [cache_key(judged, self.config_hash, repeat) for _, judged, repeat in pairs]
        self.cache.preload(CachedJudgment.objects.filter(key__in=keys).values_list("key", "judgment"))
        if self.embeddings is not None:
            self.embeddings.preload(stored_vectors(config=self.config, cases=[judged for _, judged, _ in pairs]))
            # The chunk's missing texts, many to a call (as judge_batch does), before its cases are judged.
            self.engine.embed_ahead([(judged, repeat) for _, judged, repeat in pairs], self.pool)
        self.unrecorded[chunk.pk] = len(pairs)
        for case, judged, repeat in pairs:
            self.pool.submit(self._judge, chunk.pk, case, judged, repeat)
            self.outstanding += 1

    def _judge(self, chunk_pk: int, case: Case, judged: dict, repeat: int) -> None:
        """In an engine thread: no database call here."""
        result = None
        if not self.stop.is_set():
            try:
                result = self.engine.judge(judged, repeat)
            except BaseException as exc:  # raised by run_window once the window has wound down
                self.failure = exc
                self.stop.set()
        self.results.put((chunk_pk, case, judged, result))

    def _record(self, arrived: list[tuple]) -> None:
        if not arrived:
            return
        judged = [(chunk_pk, case, judged, result) for chunk_pk, case, judged, result in arrived if result is not None]
        judgments_record(
            run=self.run, results=[(case, result) for _, case, _, result in judged],
            variants={case.pk: variant for _, case, variant, _ in judged} if self.run.probe else None,
        )
        new = self.cache.take_new()
        if new:
            CachedJudgment.objects.bulk_create(
                [CachedJudgment(key=k, judgment=v) for k, v in new.items()], ignore_conflicts=True
            )
        embeddings_save(embeddings=self.embeddings)
        finished = []
        for chunk_pk, *_ in judged:
            self.unrecorded[chunk_pk] -= 1
            if self.unrecorded[chunk_pk] == 0:
                finished.append(chunk_pk)
        if finished:
            RunChunk.objects.filter(pk__in=finished, done_at__isnull=True).update(done_at=timezone.now())

    def _extend_lease(self) -> bool:
        return bool(
            Run.objects.filter(pk=self.run.pk, lease_token=self.token, status=Run.Status.RUNNING).update(
                lease_until=timezone.now() + _lease()
            )
        )


def _window_end(*, run_id: int, token: str) -> bool:
    """Release the lease; finish the run when nothing is left. True when the run still needs work."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.lease_token != token:
            return False  # our lease ran out and another task took the run: it carries on
        left = run.chunks.filter(done_at__isnull=True).exists()
        fields: dict = {"lease_token": "", "lease_until": None}
        if run.status == Run.Status.RUNNING and not left:
            fields |= {"status": Run.Status.FINISHED, "finished_at": timezone.now()}
        Run.objects.filter(pk=run_id).update(**fields)
    return run.status in UNFINISHED and left


def _judged_case(run: Run, chunk: RunChunk, case: Case) -> dict | None:
    """What the engine judges: the case, or for a bias probe its variant (judges.probes.variants), made from the
    human verdict the chunk stored when the probe started. None (judged not at all) cannot happen for
    the cases a probe chose, since the same verdicts chose them."""
    if not run.probe:
        return engine_case(case)
    return make_variant(run.probe, engine_case(case), (chunk.human_verdicts or {}).get(str(case.pk)))


def judgments_record(
    *, run: Run, results: list[tuple[Case, EngineJudgment]], variants: dict[int, dict] | None = None
) -> int:
    """Store engine judgments and count them on the run, together; returns how many were new.

    `variants` ({case_id: the case as judged}) is a probe's: each judgment keeps the variant it judged.

    The run's row is locked first, so two workers holding the same chunk (a lease that ran out under
    a slow but living worker) cannot both count a (case, repeat): what exists already is skipped.
    """
    if not results:
        return 0
    with transaction.atomic():
        Run.objects.select_for_update().filter(pk=run.pk).first()
        existing = set(
            Judgment.objects.filter(run=run, case__in=[case for case, _ in results]).values_list("case_id", "repeat")
        )
        fresh: dict[tuple[int, int], EngineJudgment] = {}
        for case, result in results:
            if (case.pk, result.repeat) not in existing:
                fresh[(case.pk, result.repeat)] = result
        variants = variants or {}
        rows = [_judgment_row(run, case_id, result, variants.get(case_id)) for (case_id, _), result in fresh.items()]
        Judgment.objects.bulk_create(rows)
        counted = fresh.values()
        Run.objects.filter(pk=run.pk).update(
            done=F("done") + len(rows),
            not_evaluated=F("not_evaluated") + sum(not r.evaluated for r in counted),
            provider_calls=F("provider_calls") + sum(r.provider_calls for r in counted),
            cache_hits=F("cache_hits") + sum(r.cached for r in counted),
            input_tokens=F("input_tokens") + sum(r.input_tokens for r in counted),
            output_tokens=F("output_tokens") + sum(r.output_tokens for r in counted),
            cost_usd=F("cost_usd") + sum((row.cost_usd or Decimal(0) for row in rows), Decimal(0)),
        )
    return len(rows)


def _judgment_row(run: Run, case_id: int, result: EngineJudgment, variant: dict | None = None) -> Judgment:
    return Judgment(
        run=run, case_id=case_id, repeat=result.repeat, outcome=result.outcome, scores=result.scores,
        reason=result.reason, raw_output=result.raw_output, error=result.error, layer=result.layer,
        judge=result.judge, checks=result.checks, input_tokens=result.input_tokens,
        output_tokens=result.output_tokens,
        cost_usd=None if result.cost_usd is None else Decimal(str(result.cost_usd)),
        latency_ms=result.latency_ms, cached=result.cached, contested=result.contested,
        secondary_outcome=result.secondary_outcome or "", variant=variant, similarity=result.similarity,
    )


def runs_needing_work() -> list[int]:
    """Queued or running runs under no live lease: their worker is gone, or their message was lost."""
    return list(
        Run.objects.filter(status__in=UNFINISHED)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lte=timezone.now()))
        .order_by("pk")
        .values_list("pk", flat=True)
    )
