"""Cases in: the file import and the ingest API, checked by `reading`, then written all or nothing.

After every row is read and checked (labeling.importing.reading), the dataset is checked in bulk
(existing external_ids) inside the transaction, then the cases are written with COPY on PostgreSQL
(bulk_create/bulk_update elsewhere) in that one transaction. Any error raises `ImportRejected` with the
full list, and nothing is written. Rows are never written one query at a time, which keeps 100,000
cases to seconds (benchmarks/bench_import.py).
"""

import json
from dataclasses import dataclass
from typing import IO, Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import BooleanField, ExpressionWrapper, F, JSONNull, Q
from django.utils import timezone

from labeling.importing.reading import (
    CASE_ALIASES,
    CASE_FIELDS,
    CASE_REQUIRED,
    CASE_ROW_FIELDS,
    HUMAN_VERDICT_REFUSED,
    JUDGED_FIELDS,
    LOOKUP_CHUNK,
    CaseData,
    Format,
    ImportRejected,
    RowError,
    case_from_csv,
    chunks,
    normalize_case_fields,
    read_records,
    validated_cases,
)
from labeling.importing.redaction import Redactor
from labeling.models import Case, Dataset, Label, Rubric

BATCH_SIZE = 2_000  # rows per INSERT (off PostgreSQL's COPY path): 16 parameters each, far below 65,535


@dataclass(frozen=True)
class CaseImportResult:
    created: int
    updated: int
    unchanged: int
    # Labels from the rows' humanVerdict, by the person importing.
    labeled: int = 0

    def __str__(self) -> str:
        text = f"{self.created} created, {self.updated} updated, {self.unchanged} unchanged"
        return text + (f"; {self.labeled} human verdict(s) imported as labels" if self.labeled else "")


def cases_import(*, dataset: Dataset, stream: IO[bytes], fmt: Format, update: bool = False,
                 max_bytes: int | None = None, rubric: Rubric | None = None, by=None) -> CaseImportResult:
    """Import a JSONL or CSV file of cases into `dataset`, all or nothing (raises ImportRejected).

    Rows with a humanVerdict also become labels of `rubric` (of the dataset's project) by `by`, the signed-in
    person importing (the import page, `import_cases --by`): a file with such rows and no rubric is refused.
    """
    errors: list[RowError] = []
    records = list(read_records(
        # With --update a row may name only an existing case and what changes ({id, answer}): input is then
        # the stored case's, so only the id is required of a CSV header.
        stream, fmt, errors, known=CASE_ROW_FIELDS, required=("external_id",) if update else CASE_REQUIRED,
        aliases=CASE_ALIASES, from_csv=case_from_csv,
        max_bytes=settings.EVALHUB_IMPORT_MAX_BYTES if max_bytes is None else max_bytes,
    ))
    file_names = _file_field_names(records)
    if update:
        records = _with_stored_fields(dataset=dataset, records=records)
    try:
        return _cases_import_rows(dataset=dataset, records=records, errors=errors, update=update, rubric=rubric, by=by)
    except ImportRejected as rejected:
        # Each error names the field as the file did (id, question), not as evalhub stores it.
        raise ImportRejected([RowError(e.row, file_names.get(e.field or "", e.field), e.message)
                              for e in rejected.errors]) from None


def _file_field_names(records: list[tuple[int, Any]]) -> dict[str, str]:
    """{stored name: the file's name} for the aliases the file used (id for external_id, question for input)."""
    names: dict[str, str] = {}
    for _, obj in records:
        if isinstance(obj, dict):
            names.update((CASE_ALIASES[key], key) for key in obj if key in CASE_ALIASES)
    return names


def _with_stored_fields(*, dataset: Dataset, records: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
    """Rows that name an existing case and leave out its input ({id, answer}: answers attached to a golden set)
    completed with the stored case's fields; the row's own fields win. Other rows are left as they are."""
    partial: dict[int, dict] = {}  # by row
    for row, obj in records:
        try:
            fields = normalize_case_fields(obj) if isinstance(obj, dict) else None
        except ValueError:
            continue  # validation reports it
        if fields is not None and "input" not in fields and isinstance(fields.get("external_id"), str):
            partial[row] = fields
    if not partial:
        return records
    stored = _existing_cases(dataset=dataset, external_ids=[fields["external_id"] for fields in partial.values()])
    completed = []
    for row, obj in records:
        fields = partial.get(row)
        if fields is not None and fields["external_id"] in stored:
            data = stored[fields["external_id"]][1]
            kept = {name: getattr(data, name) for name in CASE_FIELDS if getattr(data, name) is not None}
            if not data.checks_tool_argument:
                kept.pop("expected_tool_argument", None)
            obj = {**kept, **fields}
        completed.append((row, obj))
    return completed


def _cases_import_rows(*, dataset: Dataset, records: list[tuple[int, Any]], errors: list[RowError], update: bool,
                       rubric: Rubric | None, by) -> CaseImportResult:
    rows = validated_cases(records, errors)
    if not rows and not errors:
        errors.append(RowError(None, None, "the file has no cases"))
    verdicts = [row for row, data in rows if data.human_verdict is not None]
    if verdicts and (rubric is None or by is None):
        errors.append(RowError(None, "rubric", f"{len(verdicts)} row(s) carry a humanVerdict (first at line "
                                               f"{verdicts[0]}): name the rubric they answer (on the import page; "
                                               "import_cases --rubric RUBRIC --by USER)"))
    if rubric is not None and rubric.project_id != dataset.project_id:
        errors.append(RowError(None, "rubric", f"the rubric {rubric.slug} is not of this dataset's project: name one "
                                               "of its own"))
    return _cases_write(dataset=dataset, rows=rows, errors=errors, update=update, rubric=rubric, by=by)


def cases_import_objects(*, dataset: Dataset, objects: list, update: bool = False) -> CaseImportResult:
    """Import parsed case objects: the same rules, with each error at its item's index in the list."""
    return cases_import_items(dataset=dataset, items=list(enumerate(objects)), errors=[], update=update)


def cases_import_items(*, dataset: Dataset, items: list[tuple[int, Any]], errors: list[RowError],
                       update: bool = False) -> CaseImportResult:
    """The ingest API's import: (index, object) items, after `errors` the body's reading found (by index).

    A token never writes human verdicts: an item with a humanVerdict is an error."""
    rows = validated_cases(items, errors)
    errors.extend(RowError(row, "humanVerdict", HUMAN_VERDICT_REFUSED) for row, data in rows
                  if data.human_verdict is not None)
    if not items and not errors:
        errors.append(RowError(None, None, "the batch has no cases"))
    return _cases_write(dataset=dataset, rows=rows, errors=errors, update=update)


def _model_values(data: CaseData) -> dict:
    """Model field values; a checked JSON-null argument is stored as JSON null, not SQL NULL."""
    argument = data.expected_tool_argument if data.checks_tool_argument else None
    if data.checks_tool_argument and argument is None:
        argument = JSONNull()
    return {
        "external_id": data.external_id, "input": data.input, "output": data.output, "trace": data.trace,
        "golden_answer": data.golden_answer, "expected_behaviour": data.expected_behaviour,
        "expected_tool": data.expected_tool, "expected_tool_argument": argument,
        "expected_source": data.expected_source, "category": data.category, "kind": data.kind,
        "metadata": data.metadata,
    }


def _cases_write(*, dataset: Dataset, rows: list[tuple[int, CaseData]], errors: list[RowError],
                 update: bool, rubric: Rubric | None = None, by=None) -> CaseImportResult:
    """Redact, check the rows against the dataset, then create, update or leave each case, and write the rows'
    human verdicts as `by`'s labels of `rubric`.

    Every way cases come in ends here, so the dataset's redaction (docs/security.md, "Redaction") is
    applied here, before anything is compared, hashed or stored, and to the error messages too (a
    message may quote a line). One transaction: either every row is written or none. The dataset row is
    locked so two imports into the same dataset cannot both create the same external_id, and so the
    redaction read is the one in force.
    """
    with transaction.atomic():
        locked = Dataset.objects.select_for_update().only("pk", "redact").get(pk=dataset.pk)
        redactor = Redactor(locked.redact_kinds)
        if redactor:
            rows = [(row, redactor.case(data)) for row, data in rows]
            # Redacted whole, then clipped (RowError.redacted): a clipped value would hide its kind.
            errors = [e.redacted(redactor.text_alone) for e in errors]
        ids = [data.external_id for _, data in rows]
        existing: dict[str, tuple[int, CaseData]] = {}
        if update:
            existing = _existing_cases(dataset=dataset, external_ids=ids)
        else:
            taken = set()
            for chunk in chunks(ids, LOOKUP_CHUNK):
                taken.update(Case.objects.filter(dataset=dataset, external_id__in=chunk)
                             .values_list("external_id", flat=True))
            errors.extend(
                RowError(row, "external_id", f"{data.external_id!r} already exists in this dataset; "
                                             "import with update on to change it")
                for row, data in rows if data.external_id in taken
            )
        if errors:
            raise ImportRejected(errors)

        now = timezone.now()
        new: list[CaseData] = []
        changed: list[tuple[int, CaseData, bool]] = []  # (pk, new content, whether a judge sees a change)
        for _, data in rows:
            if data.external_id not in existing:
                new.append(data)
                continue
            pk, old = existing[data.external_id]
            if old.signature(CASE_FIELDS) != data.signature(CASE_FIELDS):
                changed.append((pk, data, old.signature(JUDGED_FIELDS) != data.signature(JUDGED_FIELDS)))
        _insert_cases(dataset=dataset, cases=new, now=now)
        _update_cases(dataset=dataset, cases=changed, now=now)
        labeled = _verdict_labels_write(dataset=dataset, rows=rows, rubric=rubric, by=by, now=now)
    return CaseImportResult(created=len(new), updated=len(changed), unchanged=len(existing) - len(changed),
                            labeled=labeled)


def _verdict_labels_write(*, dataset: Dataset, rows: list[tuple[int, CaseData]], rubric: Rubric | None, by,
                          now) -> int:
    """`by`'s label of `rubric` on each case whose row carries a humanVerdict, against the case's content as
    just written; an existing label of theirs is revised. How many rows carried one."""
    verdicts = {data.external_id: data.human_verdict for _, data in rows if data.human_verdict is not None}
    if not verdicts or rubric is None or by is None:
        return 0
    cases: dict[str, tuple[int, str]] = {}
    for chunk in chunks(list(verdicts), LOOKUP_CHUNK):
        found = Case.objects.filter(dataset=dataset, external_id__in=chunk)
        rows = found.values_list("pk", "external_id", "content_hash")
        cases.update((external_id, (pk, content)) for pk, external_id, content in rows)
    current = {
        label.case_id: label
        for chunk in chunks([pk for pk, _ in cases.values()], LOOKUP_CHUNK)
        for label in Label.objects.filter(rubric=rubric, reviewer=by, case_id__in=chunk)
    }
    new = []
    for external_id, verdict in verdicts.items():
        case_id, content_hash = cases[external_id]
        label = current.get(case_id)
        if label is None:
            new.append(Label(case_id=case_id, rubric=rubric, reviewer=by, verdict=verdict, content_hash=content_hash,
                             created_at=now, updated_at=now))
        elif (label.verdict, label.content_hash) != (verdict, content_hash):
            label.revise(verdict=verdict, note=label.note, content_hash=content_hash)
    Label.objects.bulk_create(new, batch_size=BATCH_SIZE)
    return len(verdicts)


def cases_apply_redaction(*, dataset: Dataset) -> int:
    """Redact the cases `dataset` already holds with its redaction kinds; returns how many changed.

    A changed case is written like a re-import: its content hash moves, so its labels stop counting, and
    runs that judged it become stale. One transaction, read and written in chunks.
    """
    changed_count = 0
    with transaction.atomic():
        locked = Dataset.objects.select_for_update().only("pk", "redact").get(pk=dataset.pk)
        redactor = Redactor(locked.redact_kinds)
        if not redactor:
            return 0
        now = timezone.now()
        ids = list(Case.objects.filter(dataset=dataset).order_by("pk").values_list("external_id", flat=True))
        for chunk in chunks(ids, LOOKUP_CHUNK):
            changed = []
            for pk, old in _existing_cases(dataset=dataset, external_ids=chunk).values():
                new = redactor.case(old)
                if new.signature(CASE_FIELDS) != old.signature(CASE_FIELDS):
                    changed.append((pk, new, new.signature(JUDGED_FIELDS) != old.signature(JUDGED_FIELDS)))
            _update_cases(dataset=dataset, cases=changed, now=now)
            changed_count += len(changed)
    return changed_count


def _existing_cases(*, dataset: Dataset, external_ids: list[str]) -> dict[str, tuple[int, CaseData]]:
    """{external_id: (pk, content)} of the dataset's cases among external_ids, in a few bulk queries."""
    found = {}
    columns = ("pk", *CASE_FIELDS, "checks_tool_argument")
    for chunk in chunks(external_ids, LOOKUP_CHUNK):
        rows = Case.objects.filter(dataset=dataset, external_id__in=chunk).annotate(
            # SQL NULL = the argument is not checked; a JSON null is checked. Both load as None.
            checks_tool_argument=ExpressionWrapper(Q(expected_tool_argument__isnull=False), output_field=BooleanField())
        ).values_list(*columns)
        for pk, *values, checks in rows:
            data = CaseData(**dict(zip(CASE_FIELDS, values, strict=True)), checks_tool_argument=checks)
            found[data.external_id] = (pk, data)
    return found


# The PostgreSQL fast path writes these columns with COPY, which skips Django's per-row SQL building
# (several times faster: 100k cases in seconds). A Case column not listed here switches imports to
# bulk_create/bulk_update, slower but still correct, until it is added (a test notices).
COPY_INSERT_COLUMNS = (
    "dataset_id", "external_id", "input", "output", "trace", "golden_answer", "expected_behaviour",
    "expected_tool", "expected_tool_argument", "expected_source", "category", "metadata", "kind", "split",
    "content_hash", "created_at", "content_changed_at",
)
COPY_UPDATE_COLUMNS = (
    "input", "output", "trace", "golden_answer", "expected_behaviour", "expected_tool", "expected_tool_argument",
    "expected_source", "category", "metadata", "kind", "content_hash", "content_changed_at",
)


def copy_path_available() -> bool:
    if connection.vendor != "postgresql":
        return False
    columns = {f.column for f in Case._meta.concrete_fields if not f.primary_key}
    return columns == set(COPY_INSERT_COLUMNS)


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _content_cells(data: CaseData) -> tuple:
    """The COPY_UPDATE_COLUMNS values up to kind, as COPY text: JSON as text, None as SQL NULL."""
    argument = _json_text(data.expected_tool_argument) if data.checks_tool_argument else None
    return (data.input, data.output, _json_text(data.trace), data.golden_answer, data.expected_behaviour,
            data.expected_tool, argument, data.expected_source, data.category, _json_text(data.metadata),
            data.kind)


def _insert_cases(*, dataset: Dataset, cases: list[CaseData], now) -> None:
    if not cases:
        return
    if not copy_path_available():
        Case.objects.bulk_create(
            [Case(dataset=dataset, split=data.split, content_hash=data.content_hash,
                  created_at=now, content_changed_at=now, **_model_values(data)) for data in cases],
            batch_size=BATCH_SIZE,
        )
        return
    quote = connection.ops.quote_name
    sql = f"COPY {quote(Case._meta.db_table)} ({', '.join(map(quote, COPY_INSERT_COLUMNS))}) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        for data in cases:
            copy.write_row((dataset.pk, data.external_id, *_content_cells(data), data.split,
                            data.content_hash, now, now))


def _update_cases(*, dataset: Dataset, cases: list[tuple[int, CaseData, bool]], now) -> None:
    """Write changed cases. Labels keep the hash they were given against, so they stop counting when
    content_hash changes; content_changed_at moves only when something a judge sees changed."""
    if not cases:
        return
    if not copy_path_available():
        objects = []
        for pk, data, judged_change in cases:
            case = Case(pk=pk, dataset=dataset, content_hash=data.content_hash, **_model_values(data))
            case.content_changed_at = now if judged_change else F("content_changed_at")
            objects.append(case)
        # Small batches: bulk_update's CASE WHEN per column grows with the square of the batch.
        Case.objects.bulk_update(objects, [*CASE_FIELDS[1:], "content_hash", "content_changed_at"], batch_size=100)
        return
    quote = connection.ops.quote_name
    table = quote(Case._meta.db_table)
    with connection.cursor() as cursor:
        # A scratch table for this transaction: COPY the new values in, then one UPDATE ... FROM.
        cursor.execute(
            "CREATE TEMP TABLE evalhub_case_update (id bigint PRIMARY KEY, input text, output text, trace jsonb, "
            "golden_answer text, expected_behaviour text, expected_tool text, expected_tool_argument jsonb, "
            "expected_source text, category text, metadata jsonb, kind text, content_hash text, content_changed_at "
            "timestamptz) ON COMMIT DROP"
        )
        with cursor.cursor.copy(
            f"COPY evalhub_case_update (id, {', '.join(COPY_UPDATE_COLUMNS)}) FROM STDIN"
        ) as copy:
            for pk, data, judged_change in cases:
                copy.write_row((pk, *_content_cells(data), data.content_hash, now if judged_change else None))
        assignments = ", ".join(f"{quote(c)} = u.{c}" for c in COPY_UPDATE_COLUMNS if c != "content_changed_at")
        cursor.execute(
            f"UPDATE {table} AS c SET {assignments}, "
            "content_changed_at = COALESCE(u.content_changed_at, c.content_changed_at) "
            "FROM evalhub_case_update AS u WHERE c.id = u.id"
        )
        cursor.execute("DROP TABLE evalhub_case_update")
