"""The worker's side of a run: the lease, the heartbeat, the window of work and recording what comes back.

One task at a time works a run, holding the run's lease (`Run.lease_token`, `lease_until`) and extending it
every second: one holder keeps the run's concurrency cap across workers, and a worker killed mid-run lets
the lease run out, so the next task takes the run over and judges only what has no judgment yet. The
holder hands the run's (case, repeat) pairs to the engine's batch (judges.engine.judge_many), which keeps
`concurrency` calls in flight from the first call to the last, and records results in batches as they
come, for a bounded window of time; then it releases the lease and the task queues the run again.
Judgments are unique on (run, case, repeat), so work redone after a kill never doubles.
"""

import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from judges.configs.cases import engine_cases
from judges.configs.services import engine_prices
from judges.engine import Engine, MemoryCache, SpendTracker, judge_cache_key, judge_many
from judges.engine import JudgeConfig as EngineConfig
from judges.engine import Judgment as EngineJudgment
from judges.export.tasks import export_later
from judges.models import CachedJudgment, Judgment, Run, RunChunk
from judges.runs.bulk import copy_rows, jsonb
from judges.runs.cached import cached_in_bulk, cached_judgments_record
from judges.runs.embeddings import StoredEmbeddings, embeddings_save, stored_vectors
from judges.runs.selectors import second_opinion_sample
from judges.runs.services import UNFINISHED
from judges.runs.tallies import case_tallies_add, case_tallies_refresh
from judges.runs.variants import make_variant


def fresh_salt(run: Run) -> str:
    """A fresh run's cache salt (judges.engine.cache_key): its own id, so it meets no other run's entries."""
    return f"run:{run.pk}" if run.fresh else ""


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
        # A lease that ran out unreleased: its holder was killed with calls made and not recorded.
        lost = {"calls_not_recorded": F("calls_not_recorded") + _lost_calls(run), "calls_expected": run.provider_calls}
        if not run.chunks.filter(done_at__isnull=True).exists():
            Run.objects.filter(pk=run.pk).update(
                status=Run.Status.FINISHED, finished_at=now, lease_token="", lease_until=None, **lost
            )
            return None
        token = uuid.uuid4().hex
        Run.objects.filter(pk=run.pk).update(
            lease_token=token, lease_until=now + _lease(), status=Run.Status.RUNNING,
            started_at=run.started_at or now, **lost
        )
    return token


def _lost_calls(run: Run) -> int:
    """(The run locked, its lease run out.) The calls its last lease holder made and never recorded, at least:
    those it had started by its last heartbeat (calls_expected) beyond what the run counts. None when the lease
    was released: a holder records every call it made before it lets go."""
    if not run.lease_token:
        return 0
    return max(run.calls_expected - run.provider_calls, 0)


def lost_leases_settle() -> list[int]:
    """Runs cancelled (or finished) under a lease that ran out unreleased, a worker killed after the cancel: the
    calls it made and never recorded are counted, as run_claim counts them for a run it takes over, and the lease
    cleared. Returns their ids."""
    now = timezone.now()
    settled = []
    expired = Run.objects.exclude(status__in=UNFINISHED).exclude(lease_token="").filter(lease_until__lte=now)
    for run_id in expired.values_list("pk", flat=True):
        with transaction.atomic():
            run = Run.objects.select_for_update().get(pk=run_id)
            if not run.lease_token or run.lease_until is None or run.lease_until > now:
                continue
            Run.objects.filter(pk=run_id).update(
                lease_token="", lease_until=None, calls_expected=run.provider_calls,
                calls_not_recorded=F("calls_not_recorded") + _lost_calls(run),
            )
            settled.append(run_id)
    return settled


def run_window(*, run_id: int, token: str) -> bool:
    """Work the run under the lease `token` for one window; True when work is left for the next.

    The run's `concurrency` calls stay in flight from the window's first call to its last: the engine's batch
    (judge_many) reads the cases a chunk at a time as it has room and each thread takes the next (case, repeat)
    as soon as its call ends, so no chunk boundary waits. Results are recorded in batches as they arrive (live
    progress) and the lease is extended every heartbeat. Once EVALHUB_RUN_WINDOW_SECONDS are up, no more cases
    are taken; on a cancel, or a lease lost, no new call starts. Either way the calls in flight finish and are
    recorded, the lease is released and the caller re-queues the run if work is left: a task never holds a whole
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
        # Shared, not copied: entries come from the database or from Judgment.to_dict (a fresh dict), and a
        # judgment made from one changes only its own scalar fields. Copying 60,000 cached judgments of a
        # drift check would cost more than recording them.
        super().__init__(copies=False)
        self._new: dict[str, dict] = {}
        self._new_lock = threading.Lock()

    def preload(self, entries: Iterable[tuple[str, dict]]) -> None:
        for key, value in entries:
            super().put(key, value)

    def get(self, key: str) -> dict | None:
        with self._new_lock:
            new = self._new.get(key)
        return new if new is not None else super().get(key)

    def put(self, key: str, judgment: dict) -> None:
        # Kept only until recorded (take_new), then the database has it: a window's memory does not grow
        # with every judgment it makes.
        with self._new_lock:
            self._new[key] = judgment

    def take_new(self) -> dict[str, dict]:
        with self._new_lock:
            new, self._new = self._new, {}
        return new


# How often the window extends its lease and looks for a cancel, and records what has arrived.
HEARTBEAT_SECONDS = 1.0
RECORD_EVERY_SECONDS = 0.5
RECORD_BATCH = 2000
# Cases read from the database at once, several chunks together: a handful of queries per group rather
# than per chunk of EVALHUB_CHUNK_CASES, and a bound on what a window holds whatever the run's size.
READ_AHEAD_CASES = 1000
# The cases ahead whose cached judgments are recorded at each pull of the batch (_Window._cached_ahead): a piece
# short enough that the calls in flight do not run out meanwhile.
CACHED_AHEAD_CASES = 250
# Threads writing those pieces, each with its own connection: one keys a piece (Python) while the other's is written
# (PostgreSQL), the two cores at work at once. Pieces handed to them and not written yet: one waiting for each, few
# enough that what a window hands them is soon written when the window ends.
CACHED_AHEAD_WRITERS = 2
CACHED_AHEAD_QUEUED = 2 * CACHED_AHEAD_WRITERS


class _Window:
    """One task's window of a run's work (run_window). The engine's threads make no database call: the
    calling thread reads the chunks as the engine's batch asks for more (judge_many pulls in it), and
    what comes back is recorded by the window's _Recorder."""

    def __init__(self, *, run_id: int, token: str) -> None:
        self.run = Run.objects.select_related("config", "dataset").get(pk=run_id)
        # Every cache read and write of the window is the project's own (docs/projects.md): a hit never tells one
        # project what another's judge said.
        self.project_id = self.run.dataset.project_id
        self.token = token
        config = EngineConfig.from_dict(self.run.config.spec)
        self.config_hash = config.config_hash
        self.config = config
        self.cache = _RecordingCache()
        self.embeddings = StoredEmbeddings() if config.semantic is not None else None
        # Judges whose verdicts are cached under their own keys (read ahead with the primary's).
        self.other_judges = [
            role
            for role, judge in (("second_opinion", config.second_opinion_judge), ("adjudicator", config.adjudicator))
            if judge is not None
        ]
        self.engine = Engine(
            config, cache=self.cache, prices=engine_prices(), spend=SpendTracker(self._spend_left()),
            # The names were checked when the config was saved; checked again before any call, against
            # today's allow-list: a refused name is not evaluated ("config error").
            allowed_env=settings.EVALHUB_JUDGE_ENV_ALLOW, embedding_cache=self.embeddings,
            cache_salt=fresh_salt(self.run), sampled=second_opinion_sample(self.run),
        )
        # The cache hits of each group of cases recorded in bulk before the batch takes the rest (judges.runs.cached).
        self.cached_in_bulk = cached_in_bulk(run=self.run, engine=self.engine)
        # The cases of the chunks after the group being judged whose cached judgments are still to record, each with
        # its chunk's index; the last chunk read into it (None: none is left); the cases handed on to be recorded.
        self.ahead: list[tuple[int, int]] = []
        self.ahead_index: int | None = -1
        self.recorded_ahead: set[int] = set()
        # Cases read ahead (to record their cached judgments) with their cache keys, for the group that takes
        # them: each case read, and its content hashed, once.
        self.keyed: dict[int, tuple[dict, list[str | None]]] = {}
        # On PostgreSQL outside a transaction (as the _Recorder), the pieces recorded ahead are written by threads
        # of their own with their own connections, so the thread feeding the calls never waits for them: each piece's
        # first chunk index and its future, in the run's order.
        self.ahead_writer: ThreadPoolExecutor | None = None
        self.ahead_written: list[tuple[int, Future]] = []
        # What the run counted when this lease was taken: each heartbeat says how many calls it will count once this
        # window records every call started so far (Run.calls_expected).
        self.calls_before = self.run.provider_calls
        self.stop = threading.Event()  # set: no call starts any more
        self.unrecorded: dict[int, int] = {}  # chunk pk: its (case, repeat) pairs taken and not yet recorded
        self.last_index = -1
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
        recorder = _Recorder(self)
        batches = judge_many(
            self._pairs(ends_at), concurrency=self.run.concurrency, stop=self.stop,
            poll_s=min(recorder.heartbeat, RECORD_EVERY_SECONDS),
            # A judgment past its time is recorded not evaluated, so the window ends and its lease is released
            # (a cancel too), whatever a stuck thread does.
            time_limits=True,
        )
        recorder.start()
        if self.cached_in_bulk and recorder.threaded:
            self.ahead_writer = ThreadPoolExecutor(max_workers=CACHED_AHEAD_WRITERS,
                                                   thread_name_prefix=f"run-{self.run.pk}-cached")
        try:
            while True:
                try:
                    done = next(batches)
                except StopIteration:
                    break
                except BaseException as exc:  # raised by run_window once what came back is recorded
                    self.failure = exc
                    break
                recorder.hand(done)
        finally:
            try:
                self._ahead_written()
            except BaseException as exc:
                self.failure = self.failure or exc
            if self.ahead_writer is not None:
                # Each writer thread closes its own connection: the barrier holds a thread until every one has its task.
                barrier = threading.Barrier(CACHED_AHEAD_WRITERS)
                closing = [self.ahead_writer.submit(lambda: (barrier.wait(), connection.close()))
                           for _ in range(CACHED_AHEAD_WRITERS)]
                for future in closing:
                    future.result()
                self.ahead_writer.shutdown()
            recorder.finish()

    def close(self) -> None:
        self.stop.set()
        self.engine.close()

    def _pairs(self, ends_at: float) -> Iterator[tuple[tuple, Engine, dict, int, str | None]]:
        """The run's (case, repeat) pairs still to judge, read a group of chunks at a time as the batch has
        room for them; once the window's time is up no further chunk is handed on (but the first, however
        short the window: every window moves the run on). A chunk read and not handed on stays to do."""
        handed = False
        while True:
            group = self._take_next_chunks()
            if group is None:
                return
            pulled = 0
            for chunk_pairs in group:
                if handed and time.monotonic() >= ends_at:
                    return
                handed = True
                for chunk_pk, case_id, judged, repeat, key in chunk_pairs:
                    # Past the batch's first pull of the group (it fills two a thread at once), it pulls a pair
                    # each time a call ends: a piece of what is ahead recorded then leaves the calls in flight.
                    if (pulled := pulled + 1) > 2 * self.run.concurrency:
                        self._cached_ahead()
                    yield (chunk_pk, case_id, judged), self.engine, judged, repeat, key

    def _cached_ahead(self) -> None:
        """Record a piece of the cached judgments of the cases after the group being judged (judges.runs.cached) while
        its calls are in flight, so their groups' reads find them done rather than leaving the threads waiting. As
        far ahead as the writers keep up, group after group: the calls of a group of new cases overlap the recording
        of the cached ones after it (a drift run's new cases come first: judges.drift.services)."""
        if not self.cached_in_bulk:
            return
        if self.ahead_writer is not None and sum(not f.done() for _, f in self.ahead_written) >= CACHED_AHEAD_QUEUED:
            return  # the writers are busy: the next pull looks again
        if len(self.keyed) >= READ_AHEAD_CASES:
            return  # a group's worth of cases read ahead wait to be judged: what a window holds stays bounded
        if not self.ahead:
            if self.ahead_index is None:
                return  # every chunk is read or recorded ahead
            if self.ahead_writer is None and self.ahead_index > self.last_index:
                return  # written by the thread feeding the calls: no further than the next group
            chunks = self._next_chunks(after=max(self.ahead_index, self.last_index))
            self.ahead_index = chunks[-1].index if chunks else None
            self.ahead = [(chunk.index, pk) for chunk in chunks for pk in chunk.case_ids]
            if not self.ahead:
                return
        piece, self.ahead = self.ahead[:CACHED_AHEAD_CASES], self.ahead[CACHED_AHEAD_CASES:]
        case_ids = [pk for _, pk in piece]
        if self.ahead_writer is None:
            self._record_cached(case_ids)
        else:
            self.ahead_written.append((piece[0][0], self.ahead_writer.submit(self._record_cached, case_ids)))
        self.recorded_ahead.update(case_ids)

    def _record_cached(self, case_ids: list[int]) -> None:
        """Record the cached judgments of these cases, read and keyed here; those the cache did not answer whole are
        kept for the group that takes them (a writer thread's keys are its cases' own: dict updates of distinct keys
        are safe across threads)."""
        keyed = self._read_keyed(case_ids)
        _, unanswered = cached_judgments_record(run=self.run, engine=self.engine, case_ids=case_ids, keyed=keyed)
        self.keyed.update((pk, keyed[pk]) for pk in unanswered)

    def _read_keyed(self, case_ids: list[int]) -> dict[int, tuple[dict, list[str | None]]]:
        """{case id: (the case as the engine reads it, its cache keys by repeat)} of those that exist, read as
        plain values (no model instance a case) in one query, each case's content hashed once."""
        repeats = range(1, self.run.repeats + 1)
        return {pk: (case, self.engine.cache_keys(case, repeats)) for pk, case in engine_cases(case_ids).items()}

    def _ahead_written(self, *, through: int | None = None) -> None:
        """Wait for the pieces handed to the writer threads (those starting at chunk `through` or before: they are
        handed on in the run's order), handing them the next meanwhile (no call may be in flight to pull them: a
        group with nothing to ask); a failure to record one is raised here."""
        while self.ahead_written and (through is None or self.ahead_written[0][0] <= through):
            _, future = self.ahead_written.pop(0)
            future.result()
            if through is not None:
                self._cached_ahead()

    def _next_chunks(self, *, after: int) -> list[RunChunk]:
        """The group of chunks to take after chunk index `after` (READ_AHEAD_CASES cases, at least one chunk)."""
        count = max(1, READ_AHEAD_CASES // max(1, settings.EVALHUB_CHUNK_CASES))
        return list(self.run.chunks.filter(done_at__isnull=True, index__gt=after).order_by("index")[:count])

    def _take_next_chunks(self) -> list[list[tuple[int, int, dict, int, str | None]]] | None:
        """The next group of chunks (READ_AHEAD_CASES cases, at least one chunk), each chunk's (chunk, case id,
        case as judged, repeat, cache key) pairs with no judgment yet, their cached judgments and stored embeddings
        read ahead; None when no chunk is left. A chunk with nothing left to judge is marked done here."""
        run = self.run
        chunks = self._next_chunks(after=self.last_index)
        if not chunks:
            return None
        self.last_index = chunks[-1].index
        RunChunk.objects.filter(pk__in=[c.pk for c in chunks]).update(attempts=F("attempts") + 1)
        case_ids = [pk for chunk in chunks for pk in chunk.case_ids]
        repeats = range(1, run.repeats + 1)
        if self.cached_in_bulk:
            self._ahead_written(through=self.last_index)  # what is read next must see them
            self._record_cached([pk for pk in case_ids if pk not in self.recorded_ahead])
            self.recorded_ahead.difference_update(case_ids)
            self.ahead = [(index, pk) for index, pk in self.ahead if index > self.last_index]
        # This group's cases read ahead, taken out (the writers may be adding later groups' meanwhile).
        keyed = {pk: self.keyed.pop(pk) for pk in case_ids if pk in self.keyed}
        done = set(run.judgments.filter(case_id__among=case_ids).values_list("case_id", "repeat"))
        # Only the cases with a pair left are read (after a bulk record, the new and changed ones), once: those read
        # ahead are not read again.
        left = [pk for pk in case_ids if any((pk, r) not in done for r in repeats)]
        keyed.update(self._read_keyed([pk for pk in left if pk not in keyed]))
        group, finished = [], []
        for chunk in chunks:
            pairs = []
            for case_id in sorted(chunk.case_ids):
                if case_id not in keyed:  # gone since the run started, or judged already: nothing to judge
                    continue
                case, keys = keyed[case_id]
                judged = _judged_case(run, chunk, case_id, case)
                if judged is None:
                    continue
                if judged is not case:  # a bias probe's variant: keyed by its own content
                    keys = self.engine.cache_keys(judged, repeats)
                pairs += [(chunk.pk, case_id, judged, r, keys[r - 1]) for r in repeats if (case_id, r) not in done]
            if pairs:
                self.unrecorded[chunk.pk] = len(pairs)
                group.append(pairs)
            else:
                finished.append(chunk.pk)
        if finished:
            RunChunk.objects.filter(pk__in=finished).update(done_at=timezone.now())
        everything = [pair for pairs in group for pair in pairs]
        keys = [key for *_, key in everything if key is not None]
        keys += [judge_cache_key(key, role) for key in keys for role in self.other_judges]
        self.cache.preload(
            CachedJudgment.objects.filter(project_id=self.project_id, key__among=keys).values_list("key", "judgment")
        )
        if self.embeddings is not None:
            self.embeddings.preload(stored_vectors(
                config=self.config, cases=[judged for _, _, judged, _, _ in everything], project_id=self.project_id,
            ))
        return group

    def _record(self, arrived: list[tuple]) -> None:
        if not arrived:
            return
        judgments_record(
            run=self.run, results=[(case_id, result) for (_, case_id, _), result in arrived],
            variants={case_id: variant for (_, case_id, variant), _ in arrived} if self.run.probe else None,
        )
        new = self.cache.take_new()
        if new:
            now = timezone.now()
            copy_rows(CachedJudgment, ("project_id", "key", "judgment", "created_at"),
                      ((self.project_id, key, jsonb(value), now) for key, value in new.items()), ignore_conflicts=True)
        embeddings_save(embeddings=self.embeddings, project_id=self.project_id)
        finished = []
        for (chunk_pk, _, _), _ in arrived:
            self.unrecorded[chunk_pk] -= 1
            if self.unrecorded[chunk_pk] == 0:
                finished.append(chunk_pk)
        if finished:
            RunChunk.objects.filter(pk__in=finished, done_at__isnull=True).update(done_at=timezone.now())

    def _extend_lease(self) -> bool:
        return bool(
            Run.objects.filter(pk=self.run.pk, lease_token=self.token, status=Run.Status.RUNNING).update(
                lease_until=timezone.now() + _lease(),
                calls_expected=self.calls_before + self.engine.spend.calls_started,
            )
        )


class _Recorder:
    """What a window's calls bring back, recorded in batches as it arrives (live progress), and the lease
    extended every heartbeat (a cancel, or a lease lost, stops the window).

    On PostgreSQL this is a thread with its own database connection (closed when the window ends): the
    thread feeding the calls never waits for a write, and the run's row, locked while judgments are counted
    on it, is written by this thread alone. Inside a transaction (a test's: another connection would not see
    its rows) or on SQLite (one writer at a time) the feeding thread records as results arrive instead.
    Either way a judgment is recorded with its counts in judgments_record's transaction, and a chunk is marked
    done only once all its judgments are: a worker killed mid-window loses only what was not recorded yet, its
    chunks stay to do, and a redelivered chunk skips what was recorded.
    """

    def __init__(self, window: "_Window") -> None:
        self.window = window
        self.heartbeat = min(HEARTBEAT_SECONDS, settings.EVALHUB_RUN_LEASE_SECONDS / 3)
        self.threaded = connection.vendor == "postgresql" and not connection.in_atomic_block
        self._arrived: list[tuple] = []  # what came back and is not recorded yet
        self._last_record = self._last_beat = time.monotonic()
        self._handed: list[tuple] = []  # handed over by the feeding thread, not taken by the recorder yet
        self._closing = False
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.threaded:
            name = f"run-{self.window.run.pk}-recorder"
            self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
            self._thread.start()

    def hand(self, done: list[tuple]) -> None:
        """Called by the feeding thread with each batch that came back (empty when nothing did in a poll)."""
        if self._thread is None:
            self._tick(done)
            return
        if done:
            with self._wake:
                first = not self._handed
                self._handed += done
                if first or len(self._handed) >= RECORD_BATCH:
                    self._wake.notify()  # something to record: the recorder works out when it is due

    def finish(self) -> None:
        """Record what is left, once the window's calls are in. A failure to record is the window's."""
        if self._thread is None:
            self._tick([], at_once=True)
            return
        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join()

    def _loop(self) -> None:
        try:
            while True:
                with self._wake:
                    if not self._closing:
                        self._wake.wait(timeout=self._until_due())
                    handed, self._handed, closing = self._handed, [], self._closing
                self._tick(handed, at_once=closing)
                if closing:
                    return
        except BaseException as exc:  # nothing more is recorded: the window stops, run_window raises it
            self.window.failure = self.window.failure or exc
            self.window.stop.set()
        finally:
            connection.close()

    def _until_due(self) -> float:
        """Seconds until the recorder has work: the next heartbeat, or recording what is waiting (as often
        as the feeding thread would record it: fewer, larger writes cost less than many small ones)."""
        if len(self._arrived) + len(self._handed) >= RECORD_BATCH:
            return 0.0
        due = self._last_beat + self.heartbeat
        if self._arrived or self._handed:
            due = min(due, self._last_record + RECORD_EVERY_SECONDS)
        return max(0.0, due - time.monotonic())

    def _tick(self, handed: list[tuple], *, at_once: bool = False) -> None:
        self._arrived += handed
        now = time.monotonic()
        due = at_once or len(self._arrived) >= RECORD_BATCH or now - self._last_record >= RECORD_EVERY_SECONDS
        if self._arrived and due:
            arrived, self._arrived = self._arrived, []
            self.window._record(arrived)
            self._last_record = now
        if now >= self._last_beat + self.heartbeat:
            if not self.window._extend_lease():
                self.window.stop.set()  # cancelled, or the lease was lost to another task
            self._last_beat = now


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


def _judged_case(run: Run, chunk: RunChunk, case_id: int, case: dict) -> dict | None:
    """What the engine judges: the case (as the engine reads it), or for a bias probe its variant
    (judges.runs.variants), made from the human verdict the chunk stored when the probe started. None (judged
    not at all) cannot happen for the cases a probe chose, since the same verdicts chose them."""
    if not run.probe:
        return case
    return make_variant(run.probe, case, (chunk.human_verdicts or {}).get(str(case_id)))


def judgments_record(
    *, run: Run, results: list[tuple[int, EngineJudgment]], variants: dict[int, dict] | None = None
) -> int:
    """Store engine judgments, (case id, judgment) pairs, and count them on the run, together; returns how many
    were new.

    `variants` ({case_id: the case as judged}) is a probe's: each judgment keeps the variant it judged.

    The run's row is locked first, so two workers holding the same chunk (a lease that ran out under
    a slow but living worker) cannot both count a (case, repeat): what exists already is skipped.
    """
    if not results:
        return 0
    with transaction.atomic():
        Run.objects.select_for_update().filter(pk=run.pk).first()
        existing = set(
            Judgment.objects.filter(run=run, case_id__among={case_id for case_id, _ in results})
            .values_list("case_id", "repeat")
        )
        fresh: dict[tuple[int, int], EngineJudgment] = {}
        for case_id, result in results:
            if (case_id, result.repeat) not in existing:
                fresh[(case_id, result.repeat)] = result
        variants = variants or {}
        now = timezone.now()
        rows = [_judgment_row(run, case_id, result, variants.get(case_id), now)
                for (case_id, _), result in fresh.items()]
        copy_rows(Judgment, JUDGMENT_FIELDS, rows)
        costs = [row[JUDGMENT_FIELDS.index("cost_usd")] for row in rows]
        judged_before = {case_id for case_id, _ in existing}
        case_tallies_refresh(run_id=run.pk, case_ids={case_id for case_id, _ in fresh} & judged_before)
        case_tallies_add(run_id=run.pk, judgments=(
            (case_id, result.outcome, result.similarity, result.latency_ms)
            for (case_id, _), result in fresh.items() if case_id not in judged_before
        ))
        counted = fresh.values()
        Run.objects.filter(pk=run.pk).update(
            done=F("done") + len(rows),
            not_evaluated=F("not_evaluated") + sum(not r.evaluated for r in counted),
            provider_calls=F("provider_calls") + sum(r.provider_calls for r in counted),
            cache_hits=F("cache_hits") + sum(r.cached for r in counted),
            input_tokens=F("input_tokens") + sum(r.input_tokens for r in counted),
            output_tokens=F("output_tokens") + sum(r.output_tokens for r in counted),
            cost_usd=F("cost_usd") + sum((cost or Decimal(0) for cost in costs), Decimal(0)),
            unknown_cost_judgments=F("unknown_cost_judgments") + sum(cost is None for cost in costs),
        )
        export_later(run=run, keys=list(fresh))  # sent once committed, where the project exports verdicts
    return len(rows)


JUDGMENT_FIELDS = (
    "run_id", "case_id", "repeat", "outcome", "scores", "reason", "raw_output", "error", "layer", "judge", "checks",
    "input_tokens", "output_tokens", "cost_usd", "latency_ms", "cached", "contested", "secondary_outcome", "variant",
    "similarity", "opinions", "calls_by_judge", "cost_by_judge", "created_at", "stand_in",
)


def _judgment_row(run: Run, case_id: int, result: EngineJudgment, variant: dict | None, now) -> tuple:
    """A Judgment row's values in JUDGMENT_FIELDS' order."""
    return (
        run.pk, case_id, result.repeat, result.outcome, jsonb(result.scores), result.reason, result.raw_output,
        result.error, result.layer, result.judge, jsonb(result.checks), result.input_tokens, result.output_tokens,
        None if result.cost_usd is None else Decimal(str(result.cost_usd)), result.latency_ms, result.cached,
        result.contested, result.secondary_outcome or "", jsonb(variant), result.similarity,
        jsonb(result.opinions), jsonb(result.calls_by_judge), jsonb(result.cost_by_judge), now, result.stand_in,
    )


def runs_needing_work() -> list[int]:
    """Queued or running runs under no live lease: their worker is gone, or their message was lost."""
    return list(
        Run.objects.filter(status__in=UNFINISHED)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lte=timezone.now()))
        .order_by("pk")
        .values_list("pk", flat=True)
    )
