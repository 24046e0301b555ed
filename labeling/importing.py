"""Cases and labels in from JSONL, CSV and the ingest API: validate every row, then write all or nothing.

One validator per kind (`validate_case`, `validate_label`) serves the command, the upload page and the
API, so all three accept exactly the same rows. An import runs in three steps:
1. read and validate every row, collecting every error with its line number (index for the API);
2. check the database in bulk (existing or unknown `external_id`s) inside the transaction;
3. write with bulk_create/bulk_update in batches, in that one transaction.
Any error in steps 1–2 raises `ImportRejected` with the full list, and nothing is written. Rows are
never written one query at a time, which keeps 100,000 cases to seconds (benchmarks/bench_import.py).
"""

import csv
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import connection, transaction
from django.db.models import BooleanField, ExpressionWrapper, F, JSONNull, Q
from django.utils import timezone

from evalhub.models import Role
from labeling.models import Case, Dataset, Label, Rubric, Verdict, case_split, labeled_content_hash

# A single text field beyond this is almost surely a mistake (a whole log pasted into `output`), and it
# would make pages and judge prompts unusable. Files as a whole are bounded by EVALHUB_IMPORT_MAX_BYTES.
MAX_TEXT_CHARS = 1_000_000
BATCH_SIZE = 2_000  # rows per INSERT (off PostgreSQL's COPY path): 16 parameters each, far below 65,535
LOOKUP_CHUNK = 5_000  # external_ids per `IN (...)` lookup
READ_CHUNK = 1 << 20

CASE_FIELDS = (
    "external_id", "input", "output", "trace", "golden_answer", "expected_behaviour", "expected_tool",
    "expected_tool_argument", "expected_source", "category", "metadata",
)
CASE_REQUIRED = ("external_id", "input", "output")
CASE_JSON_CSV_COLUMNS = ("trace", "metadata", "expected_tool_argument")  # JSON text in their CSV cells
# What a judge sees: a change to any of these makes earlier runs stale (content_changed_at).
# category and metadata only group and describe a case, so changing them does not.
JUDGED_FIELDS = (
    "input", "output", "trace", "golden_answer", "expected_behaviour", "expected_tool",
    "expected_tool_argument", "expected_source",
)

LABEL_FIELDS = ("external_id", "reviewer", "verdict", "note")
LABEL_REQUIRED = ("external_id", "reviewer", "verdict")


class Format(StrEnum):
    JSONL = "jsonl"
    CSV = "csv"


_EXTENSIONS = {".jsonl": Format.JSONL, ".ndjson": Format.JSONL, ".csv": Format.CSV}


def format_for(filename: str, explicit: str | None = None) -> Format:
    """The explicit format if given, else the one the file's extension names."""
    if explicit:
        return Format(explicit)
    try:
        return _EXTENSIONS[Path(filename).suffix.lower()]
    except KeyError:
        raise ValueError(
            f"Cannot tell the format of {Path(filename).name!r} from its extension: "
            "name it .jsonl or .csv, or choose the format."
        ) from None


@dataclass(frozen=True, order=True)
class RowError:
    # The line number in a file, the index in an API batch; None for the file as a whole.
    row: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = "file" if self.row is None else f"line {self.row}"
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"

    def as_api(self) -> dict:
        return {"index": self.row, "field": self.field, "message": self.message}


class ImportRejected(Exception):
    """The rows had errors: nothing was written. `errors` lists every one, in row order."""

    def __init__(self, errors: list[RowError]) -> None:
        self.errors = sorted(errors, key=lambda e: (e.row is not None, e.row or 0))
        super().__init__(f"{len(self.errors)} error(s); nothing was written.")


@dataclass
class CaseData:
    """One validated case, normalised: absent optional fields take their empty values."""

    external_id: str
    input: str
    output: str
    trace: dict
    golden_answer: str = ""
    expected_behaviour: str = ""
    expected_tool: str | None = None
    # Absent means "the argument is not checked" (SQL NULL); present, any JSON value (null included).
    checks_tool_argument: bool = False
    expected_tool_argument: Any = None
    expected_source: str | None = None
    category: str = ""
    metadata: dict = field(default_factory=dict)

    @property
    def content_hash(self) -> str:
        return labeled_content_hash(input=self.input, output=self.output, trace=self.trace)

    def values(self) -> dict:
        """Model field values; a checked JSON-null argument is stored as JSON null, not SQL NULL."""
        argument = self.expected_tool_argument if self.checks_tool_argument else None
        if self.checks_tool_argument and argument is None:
            argument = JSONNull()
        return {
            "external_id": self.external_id, "input": self.input, "output": self.output, "trace": self.trace,
            "golden_answer": self.golden_answer, "expected_behaviour": self.expected_behaviour,
            "expected_tool": self.expected_tool, "expected_tool_argument": argument,
            "expected_source": self.expected_source, "category": self.category, "metadata": self.metadata,
        }

    def signature(self, names: Iterable[str]) -> str:
        # Canonical JSON, so that 1 vs true or reordered keys compare as JSON does, not as Python does.
        data = {name: getattr(self, name) for name in names}
        data["checks_tool_argument"] = self.checks_tool_argument
        return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class CaseImportResult:
    created: int
    updated: int
    unchanged: int

    def __str__(self) -> str:
        return f"{self.created} created, {self.updated} updated, {self.unchanged} unchanged"


@dataclass(frozen=True)
class LabelData:
    external_id: str
    reviewer: str
    verdict: str
    note: str


@dataclass(frozen=True)
class LabelImportResult:
    created: int
    revised: int
    unchanged: int
    new_reviewers: list[str]
    rubric_created: bool

    def __str__(self) -> str:
        text = f"{self.created} created, {self.revised} revised, {self.unchanged} unchanged"
        if self.new_reviewers:
            text += f"; new reviewer accounts: {', '.join(self.new_reviewers)}"
        if self.rubric_created:
            text += "; the rubric was created as a draft"
        return text


# ---------------------------------------------------------------------------------------------------
# Validation: one function per kind, shared by files and the API. Each returns (data, [(field, message)]).


# json.dumps writes a NUL character as \u0000; a literal backslash before "u0000" is written doubled.
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def _has_nul(value: Any) -> bool:
    """PostgreSQL stores no NUL character, neither in text nor in jsonb (keys included)."""
    if isinstance(value, str):
        return "\x00" in value
    if value is None or isinstance(value, bool | int | float):
        return False
    return _NUL_ESCAPE.search(json.dumps(value)) is not None  # C-fast, unlike walking the value


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _text(obj: dict, name: str, problems: list, *, required=False, max_chars: int | None = None,
          nullable=False) -> str | None:
    max_chars = max_chars or MAX_TEXT_CHARS
    if name not in obj or obj[name] is None:
        if required:
            problems.append((name, "is required" if name not in obj else "must be a string, not null"))
        return None if nullable else ""
    value = obj[name]
    if not isinstance(value, str):
        problems.append((name, f"must be a string, not {_type_name(value)}"))
        return None
    if len(value) > max_chars:
        problems.append((name, f"is {len(value):,} characters long; the limit is {max_chars:,}"))
    elif "\x00" in value:
        problems.append((name, "contains a NUL character"))
    if nullable and value == "":
        return None  # an empty tool or source name means none is expected
    return value


def _validate_trace(trace: Any, problems: list) -> dict:
    if trace is None:
        return {}
    if not isinstance(trace, dict):
        problems.append(("trace", f"must be an object, not {_type_name(trace)}"))
        return {}
    sources = trace.get("retrievedSources")
    if sources is not None and not (isinstance(sources, list) and all(isinstance(s, str) for s in sources)):
        problems.append(("trace.retrievedSources", "must be a list of strings (document ids)"))
    calls = trace.get("toolCalls")
    if calls is not None:
        if not isinstance(calls, list):
            problems.append(("trace.toolCalls", f"must be a list of objects, not {_type_name(calls)}"))
        else:
            for i, call in enumerate(calls):
                if not isinstance(call, dict):
                    problems.append((f"trace.toolCalls[{i}]", f"must be an object, not {_type_name(call)}"))
                elif not isinstance(call.get("name"), str) or not call["name"]:
                    problems.append((f"trace.toolCalls[{i}].name", "is required: the tool's name, a string"))
    context = trace.get("context")
    if context is not None and not isinstance(context, str):
        problems.append(("trace.context", f"must be a string, not {_type_name(context)}"))
    if _has_nul(trace):
        problems.append(("trace", "contains a NUL character"))
    return trace


def validate_case(obj: Any) -> tuple[CaseData | None, list[tuple[str | None, str]]]:
    """Check one case as DESIGN defines it; returns the normalised case or the problems found."""
    if not isinstance(obj, dict):
        return None, [(None, f"must be a JSON object, not {_type_name(obj)}")]
    problems: list[tuple[str | None, str]] = []
    unknown = [key for key in obj if key not in CASE_FIELDS]
    for key in unknown:
        problems.append((str(key), f"is not a case field (known fields: {', '.join(CASE_FIELDS)})"))
    external_id = _text(obj, "external_id", problems, required=True, max_chars=200)
    if isinstance(obj.get("external_id"), str) and not obj["external_id"].strip():
        problems.append(("external_id", "must not be empty"))
    data = CaseData(
        external_id=external_id or "",
        input=_text(obj, "input", problems, required=True) or "",
        output=_text(obj, "output", problems, required=True) or "",
        trace=_validate_trace(obj.get("trace"), problems),
        golden_answer=_text(obj, "golden_answer", problems) or "",
        expected_behaviour=_text(obj, "expected_behaviour", problems) or "",
        expected_tool=_text(obj, "expected_tool", problems, max_chars=200, nullable=True),
        checks_tool_argument="expected_tool_argument" in obj,
        expected_tool_argument=obj.get("expected_tool_argument"),
        expected_source=_text(obj, "expected_source", problems, max_chars=500, nullable=True),
        category=_text(obj, "category", problems, max_chars=100) or "",
    )
    if _has_nul(data.expected_tool_argument):
        problems.append(("expected_tool_argument", "contains a NUL character"))
    metadata = obj.get("metadata")
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, dict):
        problems.append(("metadata", f"must be an object, not {_type_name(metadata)}"))
    elif _has_nul(metadata):
        problems.append(("metadata", "contains a NUL character"))
    data.metadata = metadata if isinstance(metadata, dict) else {}
    return (None, problems) if problems else (data, [])


_username_validator = get_user_model().username_validator


def validate_label(obj: Any) -> tuple[LabelData | None, list[tuple[str | None, str]]]:
    if not isinstance(obj, dict):
        return None, [(None, f"must be a JSON object, not {_type_name(obj)}")]
    problems: list[tuple[str | None, str]] = []
    for key in obj:
        if key not in LABEL_FIELDS:
            problems.append((str(key), f"is not a label field (known fields: {', '.join(LABEL_FIELDS)})"))
    external_id = _text(obj, "external_id", problems, required=True, max_chars=200) or ""
    if isinstance(obj.get("external_id"), str) and not external_id.strip():
        problems.append(("external_id", "must not be empty"))
    reviewer = (_text(obj, "reviewer", problems, required=True, max_chars=150) or "").strip()
    if "reviewer" in obj and isinstance(obj["reviewer"], str):
        try:
            _username_validator(reviewer)
        except ValidationError:
            problems.append(("reviewer", f"{reviewer!r} is not a valid username (letters, digits and @.+-_)"))
    verdict = (_text(obj, "verdict", problems, required=True, max_chars=20) or "").strip().lower()
    if isinstance(obj.get("verdict"), str) and verdict not in Verdict.values:
        problems.append(("verdict", f"must be pass or fail, not {obj['verdict']!r}"))
    note = _text(obj, "note", problems) or ""
    if problems:
        return None, problems
    return LabelData(external_id=external_id, reviewer=reviewer, verdict=verdict, note=note), []


# ---------------------------------------------------------------------------------------------------
# Reading files: line by line from any binary stream, with the size limit and UTF-8 checked per line.


class _TooLarge(Exception):
    pass


def _raw_lines(stream: IO[bytes], max_bytes: int) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes with their line ending) for each line; stops past max_bytes."""
    total, number, pending = 0, 0, b""
    while chunk := stream.read(READ_CHUNK):
        total += len(chunk)
        if total > max_bytes:
            raise _TooLarge
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for raw in complete:
            number += 1
            yield number, raw + b"\n"
    if pending:
        yield number + 1, pending


def _text_lines(stream: IO[bytes], max_bytes: int, errors: list[RowError],
                bad_lines: set[int]) -> Iterator[tuple[int, str]]:
    for number, raw in _raw_lines(stream, max_bytes):
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]  # a byte-order mark, as spreadsheets write
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            errors.append(RowError(number, None, f"is not UTF-8 text (byte {raw[exc.start]:#04x} at column "
                                                 f"{exc.start + 1}); save the file as UTF-8"))
            bad_lines.add(number)
            yield number, raw.decode("utf-8", "replace")


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")  # NaN and Infinity: PostgreSQL's jsonb refuses them


def parse_json(text: str) -> Any:
    """json.loads without NaN or Infinity, which PostgreSQL's jsonb refuses (the API parses with it too)."""
    if "NaN" in text or "Infinity" in text:  # parse_constant costs a third more: only when it can matter
        return json.loads(text, parse_constant=_reject_constant)
    return json.loads(text)


def _jsonl_records(stream, max_bytes, errors) -> Iterator[tuple[int, Any]]:
    bad_lines: set[int] = set()
    for number, text in _text_lines(stream, max_bytes, errors, bad_lines):
        if number in bad_lines or not text.strip():
            continue  # blank lines are allowed; a badly encoded line has its error already
        try:
            yield number, parse_json(text)
        except json.JSONDecodeError as exc:
            errors.append(RowError(number, None, f"is not valid JSON: {exc.msg} at column {exc.colno}"))
        except (ValueError, RecursionError) as exc:
            errors.append(RowError(number, None, f"is not valid JSON: {exc}"))


def _csv_records(stream, max_bytes, errors, *, known: tuple[str, ...],
                 required: tuple[str, ...]) -> Iterator[tuple[int, dict]]:
    """Rows as {column: cell}; header problems are one error on line 1 instead of one per row."""
    # A cell may be as long as the whole file allows (csv's default limit is 128 KiB).
    csv.field_size_limit(max(csv.field_size_limit(), max_bytes))
    lines = (text for _, text in _text_lines(stream, max_bytes, errors, set()))
    reader = csv.reader(lines)
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as exc:
        errors.append(RowError(1, None, f"is not valid CSV: {exc}"))
        return
    header = [name.strip() for name in header]
    problems = []
    if duplicated := sorted({n for n in header if header.count(n) > 1}):
        problems.append(f"repeats the column(s) {', '.join(duplicated)}")
    if unknown := [n for n in header if n not in known]:
        problems.append(f"has unknown column(s) {', '.join(unknown)} (known: {', '.join(known)})")
    if missing := [n for n in required if n not in header]:
        problems.append(f"lacks the required column(s) {', '.join(missing)}")
    if problems:
        errors.append(RowError(1, None, "the header row " + "; ".join(problems)))
        return
    start = reader.line_num + 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            errors.append(RowError(start, None, f"is not valid CSV: {exc}"))
            return  # the reader cannot find the next row reliably after this
        number, start = start, reader.line_num + 1
        if not cells or (len(cells) == 1 and not cells[0].strip()):
            continue  # a blank line
        if len(cells) != len(header):
            errors.append(RowError(number, None, f"has {len(cells)} cells; the header has {len(header)}"))
            continue
        yield number, dict(zip(header, cells, strict=True))


def _case_from_csv(cells: dict, number: int, errors: list[RowError]) -> dict | None:
    """CSV cells to the JSON shape: JSON columns parsed, empty optional cells left out."""
    obj: dict = {}
    ok = True
    for name, cell in cells.items():
        if name in CASE_JSON_CSV_COLUMNS:
            if not cell.strip():
                continue  # empty trace/metadata: {}; empty argument: not checked
            try:
                obj[name] = parse_json(cell)
            except (ValueError, RecursionError) as exc:
                errors.append(RowError(number, name, f"must be JSON text in its CSV cell: {exc}"))
                ok = False
        elif name in ("expected_tool", "expected_source") and cell == "":
            continue
        else:
            obj[name] = cell
    return obj if ok else None


def _read(stream: IO[bytes], fmt: Format, errors: list[RowError], *, known, required,
          max_bytes: int | None, from_csv: Callable | None = None) -> Iterator[tuple[int, Any]]:
    """(line number, JSON-shaped record) for each row; `from_csv` turns a CSV row into that shape."""
    max_bytes = settings.EVALHUB_IMPORT_MAX_BYTES if max_bytes is None else max_bytes
    try:
        if fmt == Format.JSONL:
            yield from _jsonl_records(stream, max_bytes, errors)
            return
        for number, cells in _csv_records(stream, max_bytes, errors, known=known, required=required):
            obj = from_csv(cells, number, errors) if from_csv else cells
            if obj is not None:
                yield number, obj
    except _TooLarge:
        errors.append(RowError(None, None, f"the file is larger than the limit of {max_bytes:,} bytes "
                                           "(EVALHUB_IMPORT_MAX_BYTES); split it"))


# ---------------------------------------------------------------------------------------------------
# Cases


def validated_rows(
    records: Iterable[tuple[int, Any]], errors: list[RowError], *, validate: Callable, key: Callable,
    duplicate: Callable[[Any, int], tuple[str, str]],
) -> list[tuple[int, Any]]:
    """(line, data) for each record that validates; every problem goes to `errors` by line.

    A second record with the same `key(data)` is an error too: `duplicate(data, first_line)` gives its
    field and message. Cases, labels and judgments all import through this.
    """
    rows: list[tuple[int, Any]] = []
    first_row: dict[Any, int] = {}
    for row, obj in records:
        data, problems = validate(obj)
        errors.extend(RowError(row, name, message) for name, message in problems)
        if data is None:
            continue
        if (k := key(data)) in first_row:
            errors.append(RowError(row, *duplicate(data, first_row[k])))
            continue
        first_row[k] = row
        rows.append((row, data))
    return rows


def _validate_cases(records: Iterable[tuple[int, Any]], errors: list[RowError]) -> list[tuple[int, CaseData]]:
    return validated_rows(
        records, errors, validate=validate_case, key=lambda data: data.external_id,
        duplicate=lambda data, first: (
            "external_id", f"{data.external_id!r} appears twice in this import (first at {first})"
        ),
    )


def cases_import(*, dataset: Dataset, stream: IO[bytes], fmt: Format, update: bool = False,
                 max_bytes: int | None = None) -> CaseImportResult:
    """Import a JSONL or CSV file of cases into `dataset`, all or nothing (raises ImportRejected)."""
    errors: list[RowError] = []
    records = _read(stream, fmt, errors, known=CASE_FIELDS, required=CASE_REQUIRED, max_bytes=max_bytes,
                    from_csv=_case_from_csv)
    rows = _validate_cases(records, errors)
    if not rows and not errors:
        errors.append(RowError(None, None, "the file has no cases"))
    return _cases_write(dataset=dataset, rows=rows, errors=errors, update=update)


def cases_import_objects(*, dataset: Dataset, objects: list, update: bool = False) -> CaseImportResult:
    """The ingest API's import: the same rules, with each error at its item's index in the batch."""
    errors: list[RowError] = []
    rows = _validate_cases(enumerate(objects), errors)
    if not objects:
        errors.append(RowError(None, None, "the batch has no cases"))
    return _cases_write(dataset=dataset, rows=rows, errors=errors, update=update)


def _chunks(items: list, size: int) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _cases_write(*, dataset: Dataset, rows: list[tuple[int, CaseData]], errors: list[RowError],
                 update: bool) -> CaseImportResult:
    """Step 2 and 3: check the rows against the dataset, then create, update or leave each case.

    One transaction: either every row is written or none. The dataset row is locked so two imports
    into the same dataset cannot both create the same external_id.
    """
    with transaction.atomic():
        Dataset.objects.select_for_update().only("pk").get(pk=dataset.pk)
        ids = [data.external_id for _, data in rows]
        existing: dict[str, tuple[int, CaseData]] = {}
        if update:
            existing = _existing_cases(dataset=dataset, external_ids=ids)
        else:
            taken = set()
            for chunk in _chunks(ids, LOOKUP_CHUNK):
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
    return CaseImportResult(created=len(new), updated=len(changed), unchanged=len(existing) - len(changed))


def _existing_cases(*, dataset: Dataset, external_ids: list[str]) -> dict[str, tuple[int, CaseData]]:
    """{external_id: (pk, content)} of the dataset's cases among external_ids, in a few bulk queries."""
    found = {}
    columns = ("pk", *CASE_FIELDS, "checks_tool_argument")
    for chunk in _chunks(external_ids, LOOKUP_CHUNK):
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
    "expected_tool", "expected_tool_argument", "expected_source", "category", "metadata", "split",
    "content_hash", "created_at", "content_changed_at",
)
COPY_UPDATE_COLUMNS = (
    "input", "output", "trace", "golden_answer", "expected_behaviour", "expected_tool", "expected_tool_argument",
    "expected_source", "category", "metadata", "content_hash", "content_changed_at",
)


def copy_path_available() -> bool:
    if connection.vendor != "postgresql":
        return False
    columns = {f.column for f in Case._meta.concrete_fields if not f.primary_key}
    return columns == set(COPY_INSERT_COLUMNS)


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _content_cells(data: CaseData) -> tuple:
    """The COPY_UPDATE_COLUMNS values up to metadata, as COPY text: JSON as text, None as SQL NULL."""
    argument = _json_text(data.expected_tool_argument) if data.checks_tool_argument else None
    return (data.input, data.output, _json_text(data.trace), data.golden_answer, data.expected_behaviour,
            data.expected_tool, argument, data.expected_source, data.category, _json_text(data.metadata))


def _insert_cases(*, dataset: Dataset, cases: list[CaseData], now) -> None:
    if not cases:
        return
    if not copy_path_available():
        Case.objects.bulk_create(
            [Case(dataset=dataset, split=case_split(data.external_id), content_hash=data.content_hash,
                  created_at=now, content_changed_at=now, **data.values()) for data in cases],
            batch_size=BATCH_SIZE,
        )
        return
    quote = connection.ops.quote_name
    sql = f"COPY {quote(Case._meta.db_table)} ({', '.join(map(quote, COPY_INSERT_COLUMNS))}) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        for data in cases:
            cells = _content_cells(data)
            copy.write_row((dataset.pk, data.external_id, *cells[:10], case_split(data.external_id),
                            data.content_hash, now, now))


def _update_cases(*, dataset: Dataset, cases: list[tuple[int, CaseData, bool]], now) -> None:
    """Write changed cases. Labels keep the hash they were given against, so they stop counting when
    content_hash changes; content_changed_at moves only when something a judge sees changed."""
    if not cases:
        return
    if not copy_path_available():
        objects = []
        for pk, data, judged_change in cases:
            case = Case(pk=pk, dataset=dataset, content_hash=data.content_hash, **data.values())
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
            "expected_source text, category text, metadata jsonb, content_hash text, content_changed_at "
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


# ---------------------------------------------------------------------------------------------------
# Labels


def labels_import(*, dataset: Dataset, rubric_slug: str, stream: IO[bytes], fmt: Format,
                  max_bytes: int | None = None) -> LabelImportResult:
    """Import reviewers' labels of one rubric for cases of `dataset`, all or nothing.

    Must succeed or fail together: creating the rubric (as a draft) if missing, creating reviewer
    accounts named in the file (no usable password) and assigning them to the dataset, creating new
    labels and revising existing ones against each case's current content.
    """
    errors: list[RowError] = []
    try:
        validate_slug(rubric_slug)
    except ValidationError:
        errors.append(RowError(None, "rubric", f"{rubric_slug!r} is not a valid slug"))
    records = _read(stream, fmt, errors, known=LABEL_FIELDS, required=LABEL_REQUIRED, max_bytes=max_bytes)
    rows: list[tuple[int, LabelData]] = validated_rows(
        records, errors, validate=validate_label, key=lambda data: (data.external_id, data.reviewer),
        duplicate=lambda data, first: (
            "reviewer", f"{data.reviewer!r} labels {data.external_id!r} twice in this import (first at line {first})"
        ),
    )
    if not rows and not errors:
        errors.append(RowError(None, None, "the file has no labels"))

    with transaction.atomic():
        cases: dict[str, tuple[int, str]] = {}
        ids = sorted({data.external_id for _, data in rows})
        for chunk in _chunks(ids, LOOKUP_CHUNK):
            found = Case.objects.filter(dataset=dataset, external_id__in=chunk)
            cases.update(
                (external_id, (pk, content_hash))
                for pk, external_id, content_hash in found.values_list("pk", "external_id", "content_hash")
            )
        errors.extend(
            RowError(row, "external_id", f"{data.external_id!r} is not a case of the dataset {dataset.slug}")
            for row, data in rows if data.external_id not in cases
        )
        if errors:
            raise ImportRejected(errors)

        rubric, rubric_created = Rubric.objects.get_or_create(
            slug=rubric_slug, defaults={"name": rubric_slug, "criteria": ""}
        )
        users = _reviewer_accounts(sorted({data.reviewer for _, data in rows}))
        new_reviewers = sorted(name for name, (_, created) in users.items() if created)
        dataset.reviewers.add(*(user for user, _ in users.values()))

        current: dict[tuple[int, int], Label] = {}
        for chunk in _chunks([pk for pk, _ in cases.values()], LOOKUP_CHUNK):
            for label in Label.objects.filter(rubric=rubric, case_id__in=chunk,
                                              reviewer__in=[user for user, _ in users.values()]):
                current[(label.case_id, label.reviewer_id)] = label
        now = timezone.now()
        new, revised, unchanged = [], 0, 0
        for _, data in rows:
            case_id, content_hash = cases[data.external_id]
            reviewer = users[data.reviewer][0]
            label = current.get((case_id, reviewer.pk))
            if label is None:
                new.append(Label(case_id=case_id, rubric=rubric, reviewer=reviewer, verdict=data.verdict,
                                 note=data.note, content_hash=content_hash, created_at=now, updated_at=now))
            elif (label.verdict, label.note, label.content_hash) == (data.verdict, data.note, content_hash):
                unchanged += 1
            else:
                label.revise(verdict=data.verdict, note=data.note, content_hash=content_hash)
                revised += 1
        Label.objects.bulk_create(new, batch_size=BATCH_SIZE)
    return LabelImportResult(created=len(new), revised=revised, unchanged=unchanged,
                             new_reviewers=new_reviewers, rubric_created=rubric_created)


def _reviewer_accounts(usernames: list[str]) -> dict[str, tuple[Any, bool]]:
    """The users named in a labels file, creating missing ones as reviewers who cannot log in yet."""
    User = get_user_model()
    found = {user.username: (user, False) for user in User.objects.filter(username__in=usernames)}
    for name in usernames:
        if name not in found:
            user = User(username=name, role=Role.REVIEWER)
            user.set_unusable_password()  # an admin sets a password or the user resets it
            user.save()
            found[name] = (user, True)
    return found
