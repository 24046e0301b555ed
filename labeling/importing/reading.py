"""Reading and checking cases, with no Django: the part of the imports that the CI command shares.

Importable without Django settings (tests/test_architecture.py keeps it so). Holds the file formats,
reading JSONL and CSV line by line with the size limit and UTF-8 checked per line, strict JSON parsing,
the case's fields and their checks, and the row errors every import reports. The database side (what
already exists, the writes) is in `labeling.importing.cases` and `labeling.importing.labels`.
"""

import csv
import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import IO, Any

from labeling.importing.formulas import restore_formula

# A single text field beyond this is almost surely a mistake (a whole log pasted into `output`), and it
# would make pages and judge prompts unusable. Files as a whole are bounded by EVALHUB_IMPORT_MAX_BYTES.
MAX_TEXT_CHARS = 1_000_000
LOOKUP_CHUNK = 5_000  # external_ids per `IN (...)` lookup
READ_CHUNK = 1 << 20

CASE_FIELDS = (
    "external_id", "input", "output", "trace", "golden_answer", "expected_behaviour", "expected_tool",
    "expected_tool_argument", "expected_source", "category", "kind", "metadata",
)
# The calibration kind of a case (docs/cases.md), or empty: clearly good, clearly bad, plausible but
# incomplete, an adversarial prompt injection, a right answer in other words. Not judged content.
CASE_KINDS = ("good", "bad", "incomplete", "injection", "paraphrase")
# `output` may be absent or null: no answer yet (a golden-set case), distinct from an empty answer.
CASE_REQUIRED = ("external_id", "input")
# The agent's reply carried flat, beside `answer`: read into `trace` (docs/cases.md).
REPLY_TRACE_FIELDS = ("retrievedSources", "toolCalls", "context")
# A reviewer's verdict riding on a case row (`humanVerdict`): imported as their label, only by a signed-in person.
HUMAN_VERDICT = "human_verdict"
# What a case line or row may name: the case's fields, its reply flat, a human verdict.
CASE_ROW_FIELDS = (*CASE_FIELDS, *REPLY_TRACE_FIELDS, HUMAN_VERDICT)
HUMAN_VERDICT_REFUSED = (
    "a human verdict is imported only by a signed-in person (the import page, import_cases --by USER), "
    "never with a token: it is what calibration is measured against"
)
# JSON text in their CSV cells.
CASE_JSON_CSV_COLUMNS = ("trace", "metadata", "expected_tool_argument", "retrievedSources", "toolCalls")
# What a judge sees: a change to any of these makes earlier runs stale (content_changed_at).
# category and the rest of metadata only group and describe a case, so changing them does not; but
# metadata.references (more acceptable answers for the semantic layer) is judged like the golden answer.
JUDGED_FIELDS = (
    "input", "output", "trace", "golden_answer", "expected_behaviour", "expected_tool",
    "expected_tool_argument", "expected_source", "references",
)
# The camelCase golden-dataset names of agent-eval write-ups, accepted beside the snake_case ones.
CASE_ALIASES = {
    "id": "external_id", "question": "input", "answer": "output", "goldenAnswer": "golden_answer",
    "expectedBehaviour": "expected_behaviour", "expectedBehavior": "expected_behaviour",
    "expectedTool": "expected_tool", "expectedToolArgument": "expected_tool_argument",
    "expectedSource": "expected_source", "humanVerdict": HUMAN_VERDICT,
}
ID_ALIASES = {"id": "external_id"}  # labels and judgments name their case as cases do


def normalize_fields(obj: dict, aliases: dict[str, str]) -> dict:
    """obj with each alias renamed to its field; ValueError when one field is named two ways."""
    if not any(key in aliases for key in obj):
        return obj
    renamed: dict = {}
    given_as: dict[str, str] = {}
    for key, value in obj.items():
        name = aliases.get(key, key)
        if name in renamed:
            raise ValueError(f"{name} is given twice, as {given_as[name]!r} and as {key!r}")
        renamed[name], given_as[name] = value, key
    return renamed


def normalize_case_fields(obj: dict) -> dict:
    """A case with the camelCase names (id, question, answer, goldenAnswer, …) renamed to snake_case, and a
    reply carried flat (retrievedSources, toolCalls, context) moved into `trace`; ValueError when one field
    is named two ways."""
    obj = normalize_fields(obj, CASE_ALIASES)
    flat = [key for key in REPLY_TRACE_FIELDS if key in obj]
    if not flat:
        return obj
    trace = obj.get("trace")
    if trace is not None and not isinstance(trace, dict):
        raise ValueError(f"trace must be an object to hold {', '.join(flat)} as well")
    trace = dict(trace or {})
    for key in flat:
        if key in trace:
            raise ValueError(f"{key} is given twice, as {key!r} and as 'trace.{key}'")
        trace[key] = obj[key]
    return {key: value for key, value in obj.items() if key not in flat} | {"trace": trace}


def human_verdict(value: Any) -> str | None:
    """A humanVerdict cell as pass or fail, whatever its case or punctuation ("PASS", "Fail."); None otherwise."""
    word = re.sub(r"[\W_]+", "", value).lower() if isinstance(value, str) else ""
    return word if word in ("pass", "fail") else None


def case_split(external_id: str) -> str:
    """docs/cases.md, "The split": holdout when the first 8 hex digits of sha256(external_id) mod 100 are below 30."""
    digest = hashlib.sha256(external_id.encode()).hexdigest()
    return "holdout" if int(digest[:8], 16) % 100 < 30 else "dev"


def sample_key(seed: str, external_id: str) -> str:
    """A stable sample takes the N cases with the lowest sha256(seed + external_id): the same seed, the
    same cases; another seed, an unrelated draw (docs/cases.md, "Stable samples")."""
    return hashlib.sha256((seed + external_id).encode()).hexdigest()


def labeled_content_hash(*, input: str, output: str | None, trace: dict) -> str:
    """What a reviewer judged: a label stops counting when this changes under it."""
    payload = json.dumps([input, output, trace], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


class Format(StrEnum):
    JSONL = "jsonl"
    CSV = "csv"


# .json too: a file so named is read as JSON Lines, and a JSON array in it is told apart in one line.
_EXTENSIONS = {".jsonl": Format.JSONL, ".ndjson": Format.JSONL, ".json": Format.JSONL, ".csv": Format.CSV}


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
    # The message with its quoted values whole (finish_message), for a dataset that redacts; else "".
    marked: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        if _QUOTE_START in self.message:
            object.__setattr__(self, "marked", self.message)
            object.__setattr__(self, "message", finish_message(self.message))

    def redacted(self, redact: Callable[[str], str]) -> "RowError":
        """This error with its message redacted by `redact` before any quoted value in it is clipped."""
        return RowError(self.row, self.field, finish_message(self.marked or self.message, redact))

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


def chunks(items: list, size: int) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


@dataclass
class CaseData:
    """One validated case, normalised: absent optional fields take their empty values."""

    external_id: str
    input: str
    output: str | None  # None: no answer yet
    trace: dict
    golden_answer: str = ""
    expected_behaviour: str = ""
    expected_tool: str | None = None
    # Absent means "the argument is not checked" (SQL NULL); present, any JSON value (null included).
    checks_tool_argument: bool = False
    expected_tool_argument: Any = None
    expected_source: str | None = None
    category: str = ""
    kind: str = ""
    metadata: dict = field(default_factory=dict)
    # A row's humanVerdict (pass or fail): a label by whoever imports it, never a case field.
    human_verdict: str | None = None

    @property
    def content_hash(self) -> str:
        return labeled_content_hash(input=self.input, output=self.output, trace=self.trace)

    @property
    def split(self) -> str:
        """A case posted back from CI (`<ref>/<external_id>`) takes the split of its original external_id,
        kept in metadata.ci.external_id, so the copies of one case never straddle splits."""
        ci = self.metadata.get("ci")
        original = ci.get("external_id") if isinstance(ci, dict) else None
        return case_split(original if isinstance(original, str) and original else self.external_id)

    @property
    def references(self) -> list:
        """metadata.references; absent reads as none, as the judge reads it."""
        return self.metadata.get("references") or []

    def signature(self, names: Iterable[str]) -> str:
        # Canonical JSON, so that 1 vs true or reordered keys compare as JSON does, not as Python does.
        data = {name: getattr(self, name) for name in names}
        data["checks_tool_argument"] = self.checks_tool_argument
        return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------------------------------------------
# Checking fields. Each check appends (field, message) to `problems`, as the validators return them.


# json.dumps writes a NUL character as \u0000; a literal backslash before "u0000" is written doubled.
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def has_nul(value: Any) -> bool:
    """PostgreSQL stores no NUL character, neither in text nor in jsonb (keys included)."""
    if isinstance(value, str):
        return "\x00" in value
    if value is None or isinstance(value, bool | int | float):
        return False
    return _NUL_ESCAPE.search(json.dumps(value)) is not None  # C-fast, unlike walking the value


def type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def keyed_row(obj: Any, fields: tuple[str, ...], what: str) -> tuple[dict | None, list, str]:
    """The start a label or judgment row shares: an object, its names normalised, only `fields`, and the
    case's external_id. Returns (the row or None, the problems so far, the external_id or "")."""
    if not isinstance(obj, dict):
        return None, [(None, f"must be a JSON object, not {type_name(obj)}")], ""
    try:
        obj = normalize_fields(obj, ID_ALIASES)
    except ValueError as exc:
        return None, [(None, str(exc))], ""
    problems: list[tuple[str | None, str]] = []
    for key in obj:
        if key not in fields:
            problems.append((str(key), f"is not a {what} field (known fields: {', '.join(fields)})"))
    external_id = text_field(obj, "external_id", problems, required=True, max_chars=200) or ""
    if isinstance(obj.get("external_id"), str) and not external_id.strip():
        problems.append(("external_id", "must not be empty"))
    return obj, problems, external_id


def text_field(obj: dict, name: str, problems: list, *, required=False, max_chars: int | None = None,
               nullable=False) -> str | None:
    """obj[name] checked as text: its value, "" (None if nullable) when absent, None when it is not text."""
    max_chars = max_chars or MAX_TEXT_CHARS
    if name not in obj or obj[name] is None:
        if required:
            problems.append((name, "is required" if name not in obj else "must be a string, not null"))
        return None if nullable else ""
    value = obj[name]
    if not isinstance(value, str):
        problems.append((name, f"must be a string, not {type_name(value)}"))
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
        problems.append(("trace", f"must be an object, not {type_name(trace)}"))
        return {}
    sources = trace.get("retrievedSources")
    if sources is not None and not (isinstance(sources, list) and all(isinstance(s, str) for s in sources)):
        problems.append(("trace.retrievedSources", "must be a list of strings (document ids)"))
    calls = trace.get("toolCalls")
    if calls is not None:
        if not isinstance(calls, list):
            problems.append(("trace.toolCalls", f"must be a list of objects, not {type_name(calls)}"))
        else:
            for i, call in enumerate(calls):
                if not isinstance(call, dict):
                    problems.append((f"trace.toolCalls[{i}]", f"must be an object, not {type_name(call)}"))
                elif not isinstance(call.get("name"), str) or not call["name"]:
                    problems.append((f"trace.toolCalls[{i}].name", "is required: the tool's name, a string"))
    context = trace.get("context")
    if context is not None and not isinstance(context, str):
        problems.append(("trace.context", f"must be a string, not {type_name(context)}"))
    if has_nul(trace):
        problems.append(("trace", "contains a NUL character"))
    return trace


def validate_case(obj: Any) -> tuple[CaseData | None, list[tuple[str | None, str]]]:
    """The case in `obj` and what is wrong with it, each message finished (its quoted values clipped)."""
    data, problems = _validate_case_marked(obj)
    return data, [(name, finish_message(message)) for name, message in problems]


def _validate_case_marked(obj: Any) -> tuple[CaseData | None, list[tuple[str | None, str]]]:
    """Check one case as docs/cases.md defines it; returns the normalised case or the problems found."""
    if not isinstance(obj, dict):
        return None, [(None, f"must be a JSON object, not {type_name(obj)}")]
    try:
        obj = normalize_case_fields(obj)
    except ValueError as exc:
        return None, [(None, str(exc))]
    problems: list[tuple[str | None, str]] = []
    unknown = [key for key in obj if key not in (*CASE_FIELDS, HUMAN_VERDICT)]
    for key in unknown:
        problems.append((str(key), f"is not a case field (known fields: {', '.join(CASE_FIELDS)})"))
    external_id = text_field(obj, "external_id", problems, required=True, max_chars=200)
    if isinstance(obj.get("external_id"), str) and not obj["external_id"].strip():
        problems.append(("external_id", "must not be empty"))
    data = CaseData(
        external_id=external_id or "",
        input=text_field(obj, "input", problems, required=True) or "",
        # Absent or null: no answer yet; "" stays an empty answer (answer_present fails it).
        output=None if obj.get("output") is None else text_field(obj, "output", problems),
        trace=_validate_trace(obj.get("trace"), problems),
        golden_answer=text_field(obj, "golden_answer", problems) or "",
        expected_behaviour=text_field(obj, "expected_behaviour", problems) or "",
        expected_tool=text_field(obj, "expected_tool", problems, max_chars=200, nullable=True),
        checks_tool_argument="expected_tool_argument" in obj,
        expected_tool_argument=obj.get("expected_tool_argument"),
        expected_source=text_field(obj, "expected_source", problems, max_chars=500, nullable=True),
        category=text_field(obj, "category", problems, max_chars=100) or "",
        kind=text_field(obj, "kind", problems, max_chars=20) or "",
    )
    if data.kind not in ("", *CASE_KINDS):
        problems.append(("kind", f"must be one of {', '.join(CASE_KINDS)} or empty, not {quote_value(data.kind)}"))
    if has_nul(data.expected_tool_argument):
        problems.append(("expected_tool_argument", "contains a NUL character"))
    metadata = obj.get("metadata")
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, dict):
        problems.append(("metadata", f"must be an object, not {type_name(metadata)}"))
    elif has_nul(metadata):
        problems.append(("metadata", "contains a NUL character"))
    elif "references" in metadata and not (
        isinstance(metadata["references"], list) and all(isinstance(r, str) for r in metadata["references"])
    ):
        problems.append(("metadata", "references must be a list of strings (more acceptable answers)"))
    data.metadata = metadata if isinstance(metadata, dict) else {}
    if obj.get(HUMAN_VERDICT) is not None:
        data.human_verdict = human_verdict(obj[HUMAN_VERDICT])
        if data.human_verdict is None:
            problems.append(("humanVerdict", f"must be pass or fail (any case or punctuation), not "
                                             f"{quote_value(str(obj[HUMAN_VERDICT]))}"))
        elif data.output is None:
            problems.append(("humanVerdict", "judges the agent's answer, and this case has none (output)"))
    return (None, problems) if problems else (data, [])


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


def validated_cases(records: Iterable[tuple[int, Any]], errors: list[RowError]) -> list[tuple[int, CaseData]]:
    """The cases among `records` that validate, each external_id once; the rest go to `errors`."""
    return validated_rows(
        records, errors, validate=_validate_case_marked, key=lambda data: data.external_id,
        duplicate=lambda data, first: (
            "external_id", f"{data.external_id!r} appears twice in this import (first at {first})"
        ),
    )


# ---------------------------------------------------------------------------------------------------
# Reading files: line by line from any binary stream, with the size limit and UTF-8 checked per line.


class _TooLarge(Exception):
    pass


def _raw_lines(stream: IO[bytes], max_bytes: int) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes with their line ending) for each line; stops past max_bytes."""
    # An unfinished line is kept as its chunks and joined once, at its newline: adding each chunk to it
    # and splitting it again would copy and scan a long line once per chunk (quadratic in its length).
    total, number = 0, 0
    pending: list[bytes] = []
    while chunk := stream.read(READ_CHUNK):
        total += len(chunk)
        if total > max_bytes:
            raise _TooLarge
        *complete, rest = chunk.split(b"\n")
        if complete:
            complete[0] = b"".join([*pending, complete[0]])
            pending.clear()
        for raw in complete:
            number += 1
            yield number, raw + b"\n"
        if rest:
            pending.append(rest)
    if pending:
        yield number + 1, b"".join(pending)


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


# ---------------------------------------------------------------------------------------------------
# Strict JSON: what PostgreSQL's jsonb, a spreadsheet round trip or a CI log could not hold is refused
# with a short message, never a crash (docs/cases.md). Everywhere JSON comes in, it comes through here.

MAX_JSON_DEPTH = 64
_LONE_SURROGATE_HINT = re.compile(r"[\ud800-\udfff]|\\u[dD][89a-fA-F]")


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")  # NaN, Infinity: jsonb refuses them


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {_clip(text)} is too large (it overflows a float)")
    return value


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


# A row's value quoted in its error message is marked, whole, until the message is finished: a dataset that
# redacts redacts the whole message first, and only then is each value clipped (finish_message). Clipping
# first would quote the start of a card number or an address, which the redaction no longer recognises.
_QUOTE_START, _QUOTE_END = "\ue000", "\ue001"  # private-use characters: no kind of personal data holds one
_QUOTED = re.compile(f"{_QUOTE_START}(.*?){_QUOTE_END}", re.DOTALL)


def quote_value(text: str) -> str:
    return f"{_QUOTE_START}{text.replace(_QUOTE_START, '').replace(_QUOTE_END, '')}{_QUOTE_END}"


def finish_message(message: str, redact: Callable[[str], str] | None = None) -> str:
    """An error message with its quoted values (_quote) redacted by `redact`, if given, then clipped."""
    if redact is not None:
        message = redact(message)
    return _QUOTED.sub(lambda m: repr(_clip(m.group(1))), message)


def _no_repeated_keys(pairs: list[tuple[str, Any]]) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"the key {_clip(key)!r} is repeated in one object")
            seen.add(key)
    return obj


_DECODER = json.JSONDecoder(object_pairs_hook=_no_repeated_keys, parse_float=_finite_float,
                            parse_constant=_reject_constant)
_WHITESPACE = re.compile(r"[ \t\n\r]*")


def _too_deep(value: Any, limit: int) -> bool:
    """Whether containers nest more than `limit` levels (a scalar is level 0, `[1]` level 1)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _checked(value: Any, text: str, *, depth: int) -> Any:
    # Cheap guards first: few brackets cannot nest deeply, and text without a surrogate (raw or as an
    # escape) cannot hold one; only then walk or re-encode the value.
    if isinstance(value, dict | list) and text.count("[") + text.count("{") > depth and _too_deep(value, depth):
        raise ValueError(f"it nests deeper than {MAX_JSON_DEPTH} levels")
    if _LONE_SURROGATE_HINT.search(text):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("it holds a lone surrogate (such as \\ud800), which is not text") from None
    return value


def _decode(text: str, start: int = 0) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, start)
    except RecursionError:
        raise ValueError(f"it nests deeper than {MAX_JSON_DEPTH} levels") from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:
        if "integer string conversion" in str(exc):  # Python's own limit on a number's digits
            raise ValueError("a number has too many digits") from None
        raise


def parse_json(text: str) -> Any:
    """json.loads, refusing what JSON data must not hold, with a short ValueError saying what was wrong.

    Refused: a key repeated in one object (named), NaN and Infinity, a number that overflows a float
    (1e999), a lone surrogate ("\\ud800"), nesting deeper than MAX_JSON_DEPTH levels. A syntax error
    is a json.JSONDecodeError (a ValueError) with its position.
    """
    value, end = _decode(text, _WHITESPACE.match(text).end())
    end = _WHITESPACE.match(text, end).end()
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return _checked(value, text, depth=MAX_JSON_DEPTH)


def parse_json_items(text: str, errors: list[RowError]) -> list[tuple[int, Any]]:
    """A JSON body of one value or an array of them, as (index, value); a bad item is an error at its index.

    Items before a bad one are kept and checked on, so every error can be listed; after a syntax error
    the rest of the array cannot be found, so reading stops there.
    """
    start = _WHITESPACE.match(text).end()
    if not text.startswith("[", start):
        try:
            return [(0, parse_json(text))]
        except ValueError as exc:
            errors.append(RowError(None, None, f"the body is not valid JSON: {json_error(exc)}"))
            return []
    items: list[tuple[int, Any]] = []
    position = _WHITESPACE.match(text, start + 1).end()
    if text.startswith("]", position):
        position += 1
    else:
        index = 0
        while True:
            try:
                value, end = _decode(text, position)
            except ValueError as exc:  # where this item ends is unknown, so reading stops here
                errors.append(RowError(index, None, f"is not valid JSON: {json_error(exc)}"))
                return items
            try:
                items.append((index, _checked(value, text[position:end], depth=MAX_JSON_DEPTH - 1)))
            except ValueError as exc:
                errors.append(RowError(index, None, f"is not valid JSON: {exc}"))
            position = _WHITESPACE.match(text, end).end()
            if text.startswith(",", position):
                position = _WHITESPACE.match(text, position + 1).end()
                index += 1
                continue
            if text.startswith("]", position):
                position += 1
                break
            errors.append(RowError(index, None, "is not followed by a comma or the end of the array"))
            return items
    if _WHITESPACE.match(text, position).end() != len(text):
        errors.append(RowError(None, None, "the body has more text after its array"))
    return items


def json_error(exc: ValueError) -> str:
    """A parse error in a few words: a syntax error with its column, else parse_json's own message."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at column {exc.colno}" if exc.lineno == 1 else f"{exc.msg} at line {exc.lineno}"
    return str(exc)


JSON_ARRAY_ERROR = (
    "the file is one JSON array, not JSON Lines (one case a line): convert it with "
    "jq -c '.[]' golden.json > golden.jsonl (or python -c \"import json,sys; [print(json.dumps(x)) for x in "
    "json.load(sys.stdin)]\" < golden.json > golden.jsonl) and import the .jsonl file"
)


def _jsonl_records(stream, max_bytes, errors) -> Iterator[tuple[int, Any]]:
    bad_lines: set[int] = set()
    first = True
    for number, text in _text_lines(stream, max_bytes, errors, bad_lines):
        if number in bad_lines or not text.strip():
            continue  # blank lines are allowed; a badly encoded line has its error already
        if first and text.lstrip().startswith("["):
            # A JSON array (golden.json) read line by line gives an error on every line: one says what it is.
            errors.append(RowError(None, None, JSON_ARRAY_ERROR))
            return
        first = False
        try:
            yield number, parse_json(text)
        except ValueError as exc:
            errors.append(RowError(number, None, f"is not valid JSON: {json_error(exc)}"))


def _csv_records(stream, max_bytes, errors, *, known: tuple[str, ...], required: tuple[str, ...],
                 aliases: dict[str, str]) -> Iterator[tuple[int, dict]]:
    """Rows as {column: cell}, aliases renamed; header problems are one error on line 1, not one per row."""
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
    given = [name.strip() for name in header]
    header = [aliases.get(name, name) for name in given]
    problems = []
    if duplicated := sorted({n for n in header if header.count(n) > 1}):
        named = {n: sorted({g for g, h in zip(given, header, strict=True) if h == n}) for n in duplicated}
        problems.append("repeats the column(s) " + ", ".join(
            n if len(names) == 1 else f"{n} (as {' and '.join(names)})" for n, names in named.items()
        ))
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
        # A cell an export neutralised (labeling.importing.formulas) is read as it was.
        yield number, dict(zip(header, map(restore_formula, cells), strict=True))


def case_from_csv(cells: dict, number: int, errors: list[RowError]) -> dict | None:
    """CSV cells to the JSON shape: JSON columns parsed, empty optional cells left out."""
    obj: dict = {}
    ok = True
    for name, cell in cells.items():
        if name in CASE_JSON_CSV_COLUMNS:
            if not cell.strip():
                continue  # empty trace/metadata: {}; empty argument: not checked
            try:
                obj[name] = parse_json(cell)
            except ValueError as exc:
                errors.append(RowError(number, name, f"must be JSON text in its CSV cell: {json_error(exc)}"))
                ok = False
        elif name in ("expected_tool", "expected_source", "context", HUMAN_VERDICT) and cell == "":
            continue  # none expected; no context; no verdict on this row
        else:
            obj[name] = cell
    return obj if ok else None


def read_records(stream: IO[bytes], fmt: Format, errors: list[RowError], *, known, required,
                 max_bytes: int, aliases: dict[str, str], from_csv: Callable | None = None
                 ) -> Iterator[tuple[int, Any]]:
    """(line number, JSON-shaped record) for each row; `from_csv` turns a CSV row into that shape.

    CSV columns named by an alias are renamed here; a JSONL record's aliases are its validator's job
    (`normalize_fields`), as they are for the ingest API's objects.

    Problems (encoding, JSON, CSV shape, the size limit) go to `errors` by line; reading goes on after
    them so that one import lists every error of the file.
    """
    try:
        if fmt == Format.JSONL:
            yield from _jsonl_records(stream, max_bytes, errors)
            return
        for number, cells in _csv_records(stream, max_bytes, errors, known=known, required=required,
                                          aliases=aliases):
            obj = from_csv(cells, number, errors) if from_csv else cells
            if obj is not None:
                yield number, obj
    except _TooLarge:
        errors.append(RowError(None, None, f"the file is larger than the limit of {max_bytes:,} bytes "
                                           "(EVALHUB_IMPORT_MAX_BYTES); split it"))
