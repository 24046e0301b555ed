"""Traces in as cases: the OTLP receiver's spans and an OTLP/JSON file (docs/otlp.md).

Cases are written through `cases_import_items`, the ingest API's writer, so the dataset's redaction and every
case rule apply as they do to any other way in. A trace whose root span has not come waits in `OtlpTrace`
(its pieces redacted already) for at most EVALHUB_OTLP_TRACE_WAIT_SECONDS: the wait is enforced when the
dataset's next request comes (before the request's spans are used) and by the periodic task
`labeling.otlp_give_up`, whichever is first.
"""

import hashlib
import hmac
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import IO, Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from labeling.importing import Format, ImportRejected, RowError
from labeling.importing.cases import CaseImportResult, cases_import_items
from labeling.importing.reading import has_nul, read_records, validate_case
from labeling.importing.redaction import Placeholders, Redactor
from labeling.models import Case, Dataset, OtlpTrace
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

log = logging.getLogger(__name__)

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
    with transaction.atomic():
        locked = Dataset.objects.select_for_update().only("pk", "redact").get(pk=dataset.pk)
        _give_up_waited(dataset_id=dataset.pk, now=now)
        outcome.given_up = _report_given_up(dataset_id=dataset.pk, now=now)
        ids = list(by_trace)
        pending = {row.trace_id: row for row in OtlpTrace.objects.filter(dataset=dataset, trace_id__in=ids)}
        existing = set(Case.objects.filter(dataset=dataset, external_id__in=ids).values_list("external_id", flat=True))
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
                    waiting.append(row)
                    continue
            if problem is not None:
                outcome.rejected.append((trace_id, len(new), problem))
            if row is not None and row.pk is not None and row.gave_up_at is None:
                done.append(row.pk)
        outcome.written = _write_cases(dataset=dataset, cases=cases, outcome=outcome, spans=by_trace)
        OtlpTrace.objects.filter(pk__in=done).delete()
        OtlpTrace.objects.bulk_create([row for row in waiting if row.pk is None])
        OtlpTrace.objects.bulk_update([row for row in waiting if row.pk is not None], ["pieces", "placeholders"])
        outcome.waiting = len(waiting)
    return outcome


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


def _give_up_waited(*, dataset_id: int, now: datetime) -> int:
    """Give up the dataset's traces that waited longer than EVALHUB_OTLP_TRACE_WAIT_SECONDS for their root
    span: their pieces go, the row stays as the record of it. Called under the dataset's row lock."""
    wait = settings.EVALHUB_OTLP_TRACE_WAIT_SECONDS
    rows = list(OtlpTrace.objects.filter(dataset_id=dataset_id, gave_up_at__isnull=True,
                                         first_seen_at__lt=now - timedelta(seconds=wait)))
    for row in rows:
        if has_root(row.pieces):  # it waited for the log records of its model calls' messages
            row.problem = (f"has no messages: its model calls' spans carry none and their log records did not "
                           f"come within {wait} s of its first span; no case was written")
        else:
            row.problem = (f"incomplete: its root span did not come within {wait} s of its first span "
                           f"({len(row.pieces)} span(s) came); no case was written")
        row.gave_up_at, row.pieces, row.placeholders = now, [], {}
        log.warning("OTLP trace %s of dataset %s given up: %s", row.trace_id, dataset_id, row.problem)
    OtlpTrace.objects.bulk_update(rows, ["problem", "gave_up_at", "pieces", "placeholders"])
    return len(rows)


def _report_given_up(*, dataset_id: int, now: datetime) -> list[str]:
    """The dataset's given-up traces not yet named in an answer, named now (once)."""
    rows = OtlpTrace.objects.filter(dataset_id=dataset_id, gave_up_at__isnull=False, reported_at__isnull=True)
    named = [f"trace {trace_id} (an earlier request): {problem}" for trace_id, problem in
             rows.order_by("gave_up_at", "trace_id").values_list("trace_id", "problem")]
    rows.update(reported_at=now)
    return named


def otlp_give_up(*, now: datetime | None = None) -> int:
    """The periodic task's work: give up every dataset's traces whose wait ran out, each dataset under its row
    lock, as the receiver takes it; forget given-up traces named a week ago. Returns how many were given up."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.EVALHUB_OTLP_TRACE_WAIT_SECONDS)
    dataset_ids = set(OtlpTrace.objects.filter(gave_up_at__isnull=True, first_seen_at__lt=cutoff)
                      .values_list("dataset_id", flat=True))
    given_up = 0
    for dataset_id in sorted(dataset_ids):
        with transaction.atomic():
            Dataset.objects.select_for_update().only("pk").filter(pk=dataset_id).first()
            given_up += _give_up_waited(dataset_id=dataset_id, now=now)
    OtlpTrace.objects.filter(reported_at__lt=now - timedelta(days=7)).delete()
    return given_up


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
