"""Writes of the judges app: config versions, runs and the work that fills them.

A run's work is split into chunks of cases. A worker claims one chunk at a time per run (so the run's
concurrency cap holds across workers) with a lease that it keeps extending while it works; a worker
killed mid-chunk lets the lease run out, and the next claim takes the chunk again and judges only
what has no judgment yet. Judgments are unique on (run, case, repeat), so redelivery never doubles.
"""

import queue
import threading
from datetime import timedelta
from decimal import Decimal

from celery import signature
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from judges.configs.services import engine_prices
from judges.engine import JudgeConfig as EngineConfig
from judges.engine import Judgment as EngineJudgment
from judges.engine import MemoryCache, judge_batch
from judges.models import CachedJudgment, JudgeConfig, Judgment, Run, RunChunk
from judges.probes.variants import make_variant
from judges.runs.embeddings import embeddings_save, stored_embeddings
from labeling.models import Case, Dataset

RUN_WORK_TASK = "judges.run_work"  # judges.runs.tasks.run_work


class RunError(Exception):
    """A run cannot be started or changed as asked; the message says why."""


def engine_case(case: Case) -> dict:
    """A case as the engine reads it (DESIGN's case fields)."""
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






def run_start(
    *, config: JudgeConfig, dataset: Dataset, repeats: int, concurrency: int, spend_cap_usd: Decimal | None, by
) -> Run:
    """Create a run with its chunks and queue its work once the rows are committed."""
    if config.external:
        raise RunError("An imported (external) config holds verdicts of another tool; it cannot run.")
    if not 1 <= repeats <= 20:
        raise RunError("Repeats must be between 1 and 20.")
    if not 1 <= concurrency <= 64:
        raise RunError("Concurrency must be between 1 and 64.")
    with transaction.atomic():
        case_ids = list(dataset.cases.order_by("id").values_list("id", flat=True))
        if not case_ids:
            raise RunError(f"The dataset {dataset.slug} has no cases.")
        run = Run.objects.create(
            config=config, dataset=dataset, repeats=repeats, concurrency=concurrency,
            spend_cap_usd=spend_cap_usd, created_by=by, total=len(case_ids) * repeats,
        )
        size = settings.EVALHUB_CHUNK_CASES
        RunChunk.objects.bulk_create(
            RunChunk(run=run, index=i, case_ids=case_ids[start : start + size])
            for i, start in enumerate(range(0, len(case_ids), size))
        )
        queue_run_work(run.pk)
    return run


def run_cancel(*, run: Run) -> None:
    """Stop a run: no further chunk is claimed; the chunk in hand finishes its few judgments."""
    Run.objects.filter(pk=run.pk, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]).update(
        status=Run.Status.CANCELLED, finished_at=timezone.now()
    )


def run_retry_not_evaluated(*, run: Run) -> int:
    """Judge again only a finished or cancelled run's not-evaluated judgments; returns how many.

    Their rows go (tokens and cost already spent stay counted) and the chunks holding their cases
    are claimable again.
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
        if run.status == Run.Status.CANCELLED:
            chunk_ids = list(run.chunks.filter(done_at__isnull=True).values_list("pk", flat=True)) + chunk_ids
        RunChunk.objects.filter(pk__in=chunk_ids).update(done_at=None, claimed_until=None)
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
    return timedelta(seconds=settings.EVALHUB_CHUNK_LEASE_SECONDS)


def chunk_claim(*, run_id: int) -> RunChunk | None:
    """Claim the run's next chunk with a lease, or None when there is nothing to do now.

    Nothing is claimed while another chunk of the run holds a live lease: one chunk at a time keeps
    the run's concurrency cap. A run with every chunk done is marked finished here.
    """
    now = timezone.now()
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.status in {Run.Status.FINISHED, Run.Status.CANCELLED}:
            return None
        pending = run.chunks.filter(done_at__isnull=True)
        if pending.filter(claimed_until__gt=now).exists():
            return None
        chunk = pending.order_by("index").first()
        if chunk is None:
            Run.objects.filter(pk=run.pk).update(status=Run.Status.FINISHED, finished_at=now)
            return None
        RunChunk.objects.filter(pk=chunk.pk).update(claimed_until=now + _lease(), attempts=F("attempts") + 1)
        if run.status == Run.Status.QUEUED:
            Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, started_at=run.started_at or now)
        chunk.refresh_from_db()
        return chunk


class _RecordingCache(MemoryCache):
    """The app's cache for one chunk: preloaded from the database, remembering what is new."""

    def __init__(self, stored: dict[str, dict]) -> None:
        super().__init__()
        for key, value in stored.items():
            super().put(key, value)
        self.new: dict[str, dict] = {}

    def put(self, key: str, judgment: dict) -> None:
        super().put(key, judgment)
        self.new[key] = judgment


_DONE = object()
RECORD_BATCH = 200


def chunk_judge(*, chunk: RunChunk) -> int:
    """Judge what the chunk still lacks and record it; returns how many judgments were recorded.

    The engine works in a thread of its own (it makes no database call); this thread records what
    has arrived, a batch per transaction, and keeps the lease alive, so progress shows live.
    """
    from judges.engine import cache_key

    run = Run.objects.select_related("config").get(pk=chunk.run_id)
    config = EngineConfig.from_dict(run.config.spec)
    cases = {c.external_id: c for c in Case.objects.filter(pk__in=chunk.case_ids)}
    done = set(run.judgments.filter(case_id__in=chunk.case_ids).values_list("case_id", "repeat"))
    judged = {case.pk: _judged_case(run, chunk, case) for case in cases.values()}
    items = [
        (judged[case.pk], repeat)
        for case in cases.values()
        for repeat in range(1, run.repeats + 1)
        if (case.pk, repeat) not in done and judged[case.pk] is not None
    ]
    keys = [cache_key(case, config.config_hash, repeat) for case, repeat in items]
    cache = _RecordingCache(dict(CachedJudgment.objects.filter(key__in=keys).values_list("key", "judgment")))
    embeddings = stored_embeddings(config=config, cases=[case for case, _ in items])
    spend_left = None
    if run.spend_cap_usd is not None:
        spend_left = max(float(run.spend_cap_usd - run.cost_usd), 0.0)

    prices = engine_prices()  # read here: the engine's thread must make no database call
    results: queue.Queue = queue.Queue()
    failure: list[BaseException] = []

    def work() -> None:
        try:
            judge_batch(
                items, config, concurrency=run.concurrency, cache=cache, prices=prices,
                spend_cap_usd=spend_left, on_result=results.put,
                # The names were checked when the config was saved; checked again before any call,
                # against today's allow-list: a refused name is not evaluated ("config error").
                allowed_env=settings.EVALHUB_JUDGE_ENV_ALLOW,
                embedding_cache=embeddings,
            )
        except BaseException as exc:  # handed to the recording thread, which raises it
            failure.append(exc)
        finally:
            results.put(_DONE)

    engine_thread = threading.Thread(target=work, name=f"run-{run.pk}-chunk-{chunk.index}", daemon=True)
    engine_thread.start()
    recorded, finished = 0, False
    heartbeat = settings.EVALHUB_CHUNK_LEASE_SECONDS / 3
    while not finished:
        _extend_lease(chunk)
        try:
            batch = [results.get(timeout=heartbeat)]
        except queue.Empty:
            continue
        # Record whatever has arrived in one transaction: a fast layer yields many at once.
        while len(batch) < RECORD_BATCH and not results.empty():
            batch.append(results.get_nowait())
        if batch[-1] is _DONE:
            finished = True
            batch.pop()
        recorded += judgments_record(
            run=run, results=[(cases[r.external_id], r) for r in batch], variants=judged if run.probe else None
        )
    engine_thread.join()
    if failure:
        # Not marked done: the lease runs out and the chunk is claimed again, keeping what was recorded.
        raise failure[0]
    CachedJudgment.objects.bulk_create(
        [CachedJudgment(key=k, judgment=v) for k, v in cache.new.items()], ignore_conflicts=True
    )
    embeddings_save(embeddings=embeddings)
    RunChunk.objects.filter(pk=chunk.pk, done_at__isnull=True).update(done_at=timezone.now(), claimed_until=None)
    return recorded


def _judged_case(run: Run, chunk: RunChunk, case: Case) -> dict | None:
    """What the engine judges: the case, or for a bias probe its variant (judges.probes.variants), made from the
    human verdict the chunk stored when the probe started. None (judged not at all) cannot happen for
    the cases a probe chose, since the same verdicts chose them."""
    if not run.probe:
        return engine_case(case)
    return make_variant(run.probe, engine_case(case), (chunk.human_verdicts or {}).get(str(case.pk)))


def _extend_lease(chunk: RunChunk) -> None:
    RunChunk.objects.filter(pk=chunk.pk, done_at__isnull=True).update(claimed_until=timezone.now() + _lease())


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
    """Queued or running runs with a chunk left and none under a live lease: their worker is gone."""
    now = timezone.now()
    live = RunChunk.objects.filter(done_at__isnull=True, claimed_until__gt=now).values("run_id")
    return list(
        Run.objects.filter(status__in=[Run.Status.QUEUED, Run.Status.RUNNING])
        .exclude(pk__in=live)
        .filter(Q(chunks__done_at__isnull=True) | Q(status=Run.Status.RUNNING))
        .distinct()
        .values_list("pk", flat=True)
    )
