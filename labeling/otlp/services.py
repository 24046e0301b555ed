"""Traces in as cases: the OTLP receiver's spans and an OTLP/JSON file (docs/otlp.md).

Cases are written through `cases_import_items`, the ingest API's writer, so the dataset's redaction and every
case rule apply as they do to any other way in. A trace whose root span has not come waits in `OtlpTrace`
(its pieces redacted already) for at most EVALHUB_OTLP_TRACE_WAIT_SECONDS: the wait is enforced when the
dataset's next request comes (before the request's spans are used) and by the periodic task
`labeling.otlp_give_up`, whichever is first, a bounded batch at a time (EVALHUB_OTLP_GIVE_UP_BATCH) so no
give-up holds the dataset's lock for long. What may wait is bounded per request and per dataset
(EVALHUB_OTLP_MAX_REQUEST_WAITING, EVALHUB_OTLP_MAX_WAITING): over them a request is refused as a whole, with
nothing of it used. Every refusal is counted in `OtlpRefusal` (a row a dataset, day and reason) for the lead's page.
"""

import fcntl
import hashlib
import hmac
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import IO, Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from labeling.importing import Format, ImportRejected, RowError
from labeling.importing.cases import CaseImportResult, cases_import_items
from labeling.importing.reading import has_nul, read_records, validate_case
from labeling.importing.redaction import Placeholders, Redactor
from labeling.models import Case, Dataset, OtlpRefusal, OtlpTrace
from labeling.otlp.traces import (
    OtlpBodyError,
    Span,
    TraceProblem,
    has_root,
    merged_pieces,
    request_from_json_value,
    span_pieces,
    spans_of,
    trace_case,
    waits_for_messages,
)

MAX_MESSAGE_CHARS = 2_000  # the partial-success message names the traces; an exporter logs it whole
# Pieces that are the span's own bookkeeping, not content: never redacted (a span id of digits is no card).
_BOOKKEEPING = ("span", "parent", "start", "end")


@dataclass
class OtlpOutcome:
    """What one request's spans became: cases written, traces waiting for their root span, traces refused."""

    written: int = 0
    waiting: int = 0
    rejected: list[tuple[str, int, str]] = field(default_factory=list)  # (trace id, its spans here, why)
    given_up: list[str] = field(default_factory=list)  # traces of earlier requests given up since
    # The request refused as a whole (nothing of it used): (HTTP status, why, seconds to wait before a retry).
    refused: tuple[int, str, int] | None = None
    # What to count on the lead's page, once the transaction is over (record_refusal: never under the lock).
    refusals: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rejected_spans(self) -> int:
        return sum(spans for _, spans, _ in self.rejected)

    def message(self) -> str:
        """The partial-success message: each refused trace by id and why, then the traces given up since."""
        lines = [f"trace {trace_id}: {why}" for trace_id, _, why in self.rejected] + self.given_up
        text = "; ".join(lines)
        return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS - 1] + "…"


def otlp_receive(*, dataset: Dataset, spans: Sequence[Span] = (), logs: dict[str, list[dict[str, Any]]] | None = None,
                 now: datetime | None = None) -> OtlpOutcome:
    """Use one request's spans (or its log records' pieces by trace, labeling/otlp/logs.py): each trace whose
    root span is here (now or with what was kept from earlier requests) becomes a case, unless its model calls'
    messages are still to come as log records (traces.waits_for_messages); the others wait; a trace that cannot
    be a case is refused, named with why, and nothing of it is kept. One transaction under the dataset's row
    lock (as every case write takes), so two requests with spans of one trace join them one after the other."""
    now = now or timezone.now()
    outcome = OtlpOutcome()
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span_pieces(span))
    for trace_id, pieces in (logs or {}).items():
        by_trace.setdefault(trace_id, []).extend(pieces)
    rooted = {span.trace_id for span in spans if not span.parent_span_id}
    ids = list(by_trace)

    def refused(pending: set[str] | dict[str, OtlpTrace], existing: set[str]) -> bool:
        outcome.refused = _over_waiting(dataset_id=dataset.pk, now=now, new=[
            trace_id for trace_id in ids if trace_id not in rooted and trace_id not in pending
            and trace_id not in existing])
        if outcome.refused is not None:
            status, why, _ = outcome.refused
            outcome.refusals.append({"why": WAITING_WHY[status], "detail": why, "status": status,
                                     "traces": len(ids), "spans": len(spans)})
        return outcome.refused is not None

    # First without the dataset's lock, so a request over a bound is refused at once rather than after the
    # requests ahead of it; then again under the lock, where it counts.
    if not refused(set(OtlpTrace.objects.filter(dataset=dataset, trace_id__in=ids).values_list("trace_id", flat=True)),
                   _existing(dataset, ids)):
        _receive_locked(dataset=dataset, by_trace=by_trace, ids=ids, now=now, outcome=outcome, refused=refused)
    for refusal in outcome.refusals:
        record_refusal(dataset=dataset, now=now, **refusal)
    return outcome


def _receive_locked(*, dataset: Dataset, by_trace: dict[str, list[dict[str, Any]]], ids: list[str], now: datetime,
                    outcome: OtlpOutcome, refused: Callable[[dict[str, OtlpTrace], set[str]], bool]) -> None:
    with transaction.atomic():
        locked = Dataset.objects.select_for_update(no_key=True).only("pk", "redact").get(pk=dataset.pk)
        # One batch; the periodic task gives up the rest.
        _give_up_batch(dataset_id=dataset.pk, now=now, refusals=outcome.refusals)
        pending = {row.trace_id: row for row in OtlpTrace.objects.filter(dataset=dataset, trace_id__in=ids)}
        existing = _existing(dataset, ids)
        if refused(pending, existing):
            return
        outcome.given_up = _report_given_up(dataset_id=dataset.pk, now=now)
        redactor = Redactor(locked.redact_kinds)
        cases: dict[str, dict[str, Any]] = {}
        done: list[int] = []  # waiting rows whose trace is now a case or refused
        waiting: list[OtlpTrace] = []
        for trace_id, new in by_trace.items():
            row = pending.get(trace_id)
            problem = _refusal(trace_id, row, existing)
            if problem is None:
                if row is not None:
                    new = _redacted(redactor, new, row)
                pieces = merged_pieces(row.pieces if row else [], new)
                if has_root(pieces) and not waits_for_messages(pieces):
                    try:
                        # Checked as a case by the writer, which names what is wrong (_write_cases).
                        cases[trace_id] = trace_case(trace_id, pieces)
                    except TraceProblem as exc:
                        problem = str(exc)
                elif has_nul(new):  # the writer's check comes too late for what waits in a jsonb column
                    problem = "contains a NUL character, which evalhub cannot store"
                else:
                    if row is None:
                        row = OtlpTrace(dataset=dataset, trace_id=trace_id, first_seen_at=now)
                        pieces = _redacted(redactor, new, row)
                    row.pieces = pieces
                    # What it waits for, kept where its problem goes once given up (the give-up reads no pieces).
                    row.problem = AWAITS_MESSAGES if has_root(pieces) else ""
                    waiting.append(row)
                    continue
            if problem is not None:
                outcome.rejected.append((trace_id, len(new), problem))
            if row is not None and row.pk is not None and row.gave_up_at is None:
                done.append(row.pk)
        outcome.written = _write_cases(dataset=dataset, cases=cases, outcome=outcome, spans=by_trace)
        OtlpTrace.objects.filter(pk__in=done).delete()
        # Split before inserting: bulk_create gives the new rows their pk, and they were once updated again here
        # (a CASE of as many branches as rows: 23 of the 32 s of a request of 20,000 traces).
        new_rows = [row for row in waiting if row.pk is None]
        joined = [row for row in waiting if row.pk is not None]
        OtlpTrace.objects.bulk_create(new_rows, batch_size=500)
        OtlpTrace.objects.bulk_update(joined, ["pieces", "placeholders", "problem"], batch_size=100)
        outcome.waiting = len(waiting)
        _count_rejected(outcome)


def _existing(dataset: Dataset, ids: list[str]) -> set[str]:
    return set(Case.objects.filter(dataset=dataset, external_id__in=ids).values_list("external_id", flat=True))


def _over_waiting(*, dataset_id: int, now: datetime, new: list[str]) -> tuple[int, str, int] | None:
    """Whether the request's traces that would start waiting pass a bound: one request's (413: it can never be
    taken) or the dataset's (429: retry once the oldest waiting trace's wait has run out)."""
    if not new:
        return None
    per_request, per_dataset = settings.EVALHUB_OTLP_MAX_REQUEST_WAITING, settings.EVALHUB_OTLP_MAX_WAITING
    if len(new) > per_request:
        return 413, (f"{len(new):,} traces of the request have no root span here, over the limit of {per_request:,} "
                     "a request may leave waiting (EVALHUB_OTLP_MAX_REQUEST_WAITING): export smaller batches"), 0
    waiting = OtlpTrace.objects.filter(dataset_id=dataset_id, gave_up_at__isnull=True)
    held = waiting.count()
    if held + len(new) <= per_dataset:
        return None
    oldest = waiting.order_by("first_seen_at").values_list("first_seen_at", flat=True).first() or now
    wait = settings.EVALHUB_OTLP_TRACE_WAIT_SECONDS
    retry = max(1, min(wait, int((oldest + timedelta(seconds=wait) - now).total_seconds()) + 1))
    return 429, (f"the dataset holds {held:,} traces waiting for their root span and this request would add "
                 f"{len(new):,}, over the limit of {per_dataset:,} (EVALHUB_OTLP_MAX_WAITING): retry after "
                 f"{retry} s, when the oldest are given up"), retry


def _count_rejected(outcome: OtlpOutcome) -> None:
    """The request's refused traces for the lead's page, by reason: what the message says before its first colon
    (`has no messages`, `makes no valid case`), the whole message of the last one as the detail."""
    by_why: dict[str, list[tuple[str, int, str]]] = {}
    for trace_id, spans, why in outcome.rejected:
        if why.startswith("was given up at "):
            reason = "came after its trace was given up (its root span came too late)"
        else:
            reason = why.split(":", 1)[0]
        by_why.setdefault(reason, []).append((trace_id, spans, why))
    for reason, traces in by_why.items():
        outcome.refusals.append({"why": reason, "detail": traces[-1][2], "traces": len(traces),
                                 "spans": sum(n for _, n, _ in traces), "example": traces[-1][0]})


# A waiting trace whose root span has come waits for its model calls' messages as log records (traces.py).
AWAITS_MESSAGES = "awaits its messages as log records"
WAITING_WHY = {413: "more traces without their root span than one request may leave waiting "
                    "(EVALHUB_OTLP_MAX_REQUEST_WAITING)",
               429: "the dataset held as many traces waiting for their root span as it may (EVALHUB_OTLP_MAX_WAITING)"}


def record_refusal(*, dataset: Dataset, why: str, now: datetime, detail: str = "", status: int = 200, traces: int = 0,
                   spans: int = 0, requests: int = 1, example: str = "") -> None:
    """Count what the receiver refused in the dataset's row for this day and reason `why` (a few words that do not
    vary, so the rows stay few; created the first time), with `detail` (the last message in full). Called
    outside the dataset's lock: a row inserted under it could wait on a request that waits on the lock."""
    why, detail = _clipped(why), _clipped(detail or why)
    day = now.date()
    counts = {"traces": F("traces") + traces, "spans": F("spans") + spans, "requests": F("requests") + requests,
              "last_at": now, "status": status, "detail": detail}
    if example:
        counts["example_trace_id"] = example
    rows = OtlpRefusal.objects.filter(dataset=dataset, day=day, why=why)
    if rows.update(**counts):
        return
    try:
        with transaction.atomic():
            OtlpRefusal.objects.create(dataset=dataset, day=day, why=why, detail=detail, status=status, traces=traces,
                                       spans=spans, requests=requests, example_trace_id=example, first_at=now,
                                       last_at=now)
    except IntegrityError:  # another request made the row first
        rows.update(**counts)


def _clipped(text: str) -> str:
    return text if len(text) <= 300 else text[:299] + "…"


def _refusal(trace_id: str, row: OtlpTrace | None, existing: set[str]) -> str | None:
    if not trace_id or set(trace_id) == {"0"}:
        return "has no trace id"
    if trace_id in existing:
        return "is a case of this dataset already: its root span came before, and later spans are not added"
    if row is not None and row.gave_up_at is not None:
        return f"was given up at {row.gave_up_at:%Y-%m-%d %H:%M:%S} UTC: {row.problem}"
    return None


def _checked_case(trace_id: str, pieces: list[dict[str, Any]]) -> dict[str, Any]:
    """The trace's case, checked as any case is (TraceProblem naming what is wrong)."""
    case = trace_case(trace_id, pieces)
    _, problems = validate_case(case)
    if problems:
        raise TraceProblem("makes no valid case: " + "; ".join(f"{name}: {message}" if name else message
                                                            for name, message in problems))
    return case


def _write_cases(*, dataset: Dataset, cases: dict[str, dict[str, Any]], outcome: OtlpOutcome,
                 spans: dict[str, list]) -> int:
    """Write the cases through the ingest API's writer; a case it refuses is a refused trace (the others are
    written all the same, in a second try)."""
    for _ in range(2):
        if not cases:
            return 0
        ids = list(cases)
        try:
            return cases_import_items(dataset=dataset, items=list(enumerate(cases.values())), errors=[]).created
        except ImportRejected as rejected:
            refused = {ids[error.row]: error for error in rejected.errors if error.row is not None}
            if len(refused) < len(rejected.errors):  # an error of the batch as a whole: refuse every trace
                refused = {trace_id: rejected.errors[0] for trace_id in ids}
            for trace_id, error in refused.items():
                why = "makes no valid case: " + str(error).removeprefix(f"line {error.row}: ")
                outcome.rejected.append((trace_id, len(spans[trace_id]), why))
                del cases[trace_id]
    return 0


class _KeyedPlaceholders(Placeholders):
    """A waiting trace's value → placeholder map, kept in its row by an HMAC of each value, never the value."""

    def __init__(self, state: dict[str, Any]) -> None:
        super().__init__()
        self.keys: dict[str, str] = dict(state.get("keys", {}))
        self.counts = dict(state.get("counts", {}))

    def of(self, kind: str, value: str) -> str:
        key = hmac.new(settings.SECRET_KEY.encode(), f"{kind}\0{value}".encode(), hashlib.sha256).hexdigest()
        if key not in self.keys:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.keys[key] = f"[{kind.upper()}_{self.counts[kind]}]"
        return self.keys[key]

    def state(self) -> dict[str, Any]:
        return {"keys": self.keys, "counts": self.counts}


def _redacted(redactor: Redactor, pieces: list[dict[str, Any]], row: OtlpTrace) -> list[dict[str, Any]]:
    """A waiting trace's pieces redacted before they are stored, numbered on from what the trace had."""
    if not redactor:
        return pieces
    placeholders = _KeyedPlaceholders(row.placeholders)
    content = {"pieces": [{k: v for k, v in p.items() if k not in _BOOKKEEPING} for p in pieces]}
    redacted = redactor.fields(content, placeholders)["pieces"]
    row.placeholders = placeholders.state()
    return [{**{k: p[k] for k in _BOOKKEEPING if k in p}, **r} for p, r in zip(pieces, redacted, strict=True)]


def _give_up_batch(*, dataset_id: int, now: datetime, refusals: list[dict[str, Any]]) -> int:
    """Give up at most EVALHUB_OTLP_GIVE_UP_BATCH of the dataset's traces that waited longer than
    EVALHUB_OTLP_TRACE_WAIT_SECONDS for their root span, oldest first, in one UPDATE: their pieces go, the row
    stays as the record of it. Called under the dataset's row lock; returns how many were given up, and adds
    their count to `refusals` (recorded once the lock is let go)."""
    wait = settings.EVALHUB_OTLP_TRACE_WAIT_SECONDS
    waited = OtlpTrace.objects.filter(dataset_id=dataset_id, gave_up_at__isnull=True,
                                      first_seen_at__lt=now - timedelta(seconds=wait)).order_by("first_seen_at")
    # Never the pieces: a batch of them may be large, and only the ids (and what each waits for) are needed.
    rows = list(waited.values_list("pk", "trace_id", "problem")[:settings.EVALHUB_OTLP_GIVE_UP_BATCH])
    if not rows:
        return 0
    whys = {AWAITS_MESSAGES: (f"has no messages: its model calls' spans carry none and their log records did not "
                              f"come within {wait} s of its first span; no case was written"),
            "": f"incomplete: its root span did not come within {wait} s of its first span; no case was written"}
    for awaits, why in whys.items():
        group = [(pk, trace_id) for pk, trace_id, problem in rows if (problem == AWAITS_MESSAGES) == bool(awaits)]
        if group:
            OtlpTrace.objects.filter(pk__in=[pk for pk, _ in group]).update(problem=why, gave_up_at=now, pieces=[],
                                                                            placeholders={})
            refusals.append({"why": why, "traces": len(group), "requests": 0, "example": group[0][1]})
    return len(rows)


REFUSALS_DAYS = 30  # how long the counts of refusals are kept (the lead's page shows them all)
NAMED_GIVEN_UP = 20  # given-up traces an answer names by id; it counts the others


def _report_given_up(*, dataset_id: int, now: datetime) -> list[str]:
    """The dataset's given-up traces not yet named in an answer, named now (once): the first NAMED_GIVEN_UP by
    id, the others counted."""
    rows = OtlpTrace.objects.filter(dataset_id=dataset_id, gave_up_at__isnull=False, reported_at__isnull=True)
    first = list(rows.order_by("gave_up_at", "trace_id").values_list("trace_id", "problem")[:NAMED_GIVEN_UP + 1])
    if not first:
        return []
    named = [f"trace {trace_id} (an earlier request): {problem}" for trace_id, problem in first[:NAMED_GIVEN_UP]]
    reported = rows.update(reported_at=now)
    if reported > NAMED_GIVEN_UP:
        named.append(f"and {reported - NAMED_GIVEN_UP:,} more traces of earlier requests given up as incomplete")
    return named


GIVE_UP_BUDGET_SECONDS = 40  # under the task's soft time limit (labeling/otlp/tasks.py), with room to spare


def otlp_give_up(*, now: datetime | None = None, budget_seconds: float = GIVE_UP_BUDGET_SECONDS) -> int | None:
    """The periodic task's work: give up every dataset's traces whose wait ran out, a batch a transaction, each
    under the dataset's row lock taken without waiting (a dataset a request holds is left for the next run), for
    at most `budget_seconds`; forget given-up traces named a week ago. Returns how many were given up, or None
    when another run still holds the give-up (this one does nothing: runs never pile up). Counts of refusals
    older than REFUSALS_DAYS go too."""
    now = now or timezone.now()
    began = time.monotonic()
    cutoff = now - timedelta(seconds=settings.EVALHUB_OTLP_TRACE_WAIT_SECONDS)
    with _only_one_give_up() as alone:
        if not alone:
            return None
        given_up = 0
        dataset_ids = set(OtlpTrace.objects.filter(gave_up_at__isnull=True, first_seen_at__lt=cutoff)
                          .values_list("dataset_id", flat=True))
        for dataset_id in sorted(dataset_ids):
            while time.monotonic() - began < budget_seconds:
                refusals: list[dict[str, Any]] = []
                with transaction.atomic():
                    dataset = (Dataset.objects.select_for_update(skip_locked=True, no_key=True).only("pk")
                               .filter(pk=dataset_id).first())
                    if dataset is None:
                        break  # a request holds it (or it was deleted): the next run comes back to it
                    batch = _give_up_batch(dataset_id=dataset_id, now=now, refusals=refusals)
                for refusal in refusals:
                    record_refusal(dataset=dataset, now=now, **refusal)
                given_up += batch
                if batch < settings.EVALHUB_OTLP_GIVE_UP_BATCH:
                    break
        OtlpTrace.objects.filter(reported_at__lt=now - timedelta(days=7)).delete()
        OtlpRefusal.objects.filter(day__lt=now.date() - timedelta(days=REFUSALS_DAYS)).delete()
    return given_up


_GIVE_UP_LOCK = 0x6F746C70  # "otlp": the PostgreSQL advisory lock the give-up runs hold


@contextmanager
def _only_one_give_up() -> Iterator[bool]:
    """Whether this process may give up now: a PostgreSQL advisory lock (any worker on any machine), or on
    SQLite a lock on a file beside the database (SQLite is one machine's); released when the run ends or its
    process dies."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [_GIVE_UP_LOCK])
            alone = cursor.fetchone()[0]
        try:
            yield alone
        finally:
            if alone:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [_GIVE_UP_LOCK])
        return
    with open(settings.DATA_DIR / "otlp-give-up.lock", "a") as lock_file:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def otlp_file_import(*, dataset: Dataset, stream: IO[bytes], update: bool = False) -> CaseImportResult:
    """Import a file of OTLP/JSON lines (one traces request a line, as the Collector's file exporter writes
    them): one case a trace, all or nothing like every import. A trace without its root span in the file, or
    without what a case needs, is an error at the line of its first span, naming the trace."""
    errors: list[RowError] = []
    records = read_records(stream, Format.JSONL, errors, known=(), required=(), aliases={},
                           max_bytes=settings.EVALHUB_IMPORT_MAX_BYTES)
    pieces: dict[str, list[dict[str, Any]]] = {}
    first_line: dict[str, int] = {}
    for line, value in records:
        try:
            spans = spans_of(request_from_json_value(value))
        except OtlpBodyError as exc:
            errors.append(RowError(line, None, str(exc)))
            continue
        for span in spans:
            pieces.setdefault(span.trace_id, []).append(span_pieces(span))
            first_line.setdefault(span.trace_id, line)
    items = []
    for trace_id, found in pieces.items():
        line, found = first_line[trace_id], merged_pieces(found)
        if not has_root(found):
            errors.append(RowError(line, None, f"trace {trace_id} has no root span in the file ({len(found)} "
                                               "span(s)): its case cannot be made"))
            continue
        try:
            items.append((line, _checked_case(trace_id, found)))
        except TraceProblem as exc:
            errors.append(RowError(line, None, f"trace {trace_id} {exc}"))
    if not pieces and not errors:
        errors.append(RowError(None, None, "the file has no spans"))
    return cases_import_items(dataset=dataset, items=items, errors=errors, update=update)
