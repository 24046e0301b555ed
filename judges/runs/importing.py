"""Judgments made elsewhere, in: validate every row, then write an external config, a run and its judgments.

The file format is the export's (external_id, repeat, verdict, optional scores, similarity, reason, judge), read with
labeling.importing's public reader API, so the same all-or-nothing rules hold: every error is listed with its
line number and nothing is written. The result is a finished run of an `external` judge config, which
the calibration pages read like any other run; it can never run or be promoted.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from judges.engine import OUTCOMES
from judges.engine.canonical import canonical_json, sha256_hex
from judges.models import JudgeConfig, Judgment, Run
from judges.runs.tallies import case_tallies_refresh
from judges.runs.tool_results import read_tool_results
from labeling.importing import Format, ImportRejected, RowError, parse_json
from labeling.importing.cases import BATCH_SIZE
from labeling.importing.reading import (
    ID_ALIASES,
    LOOKUP_CHUNK,
    chunks,
    has_nul,
    json_error,
    keyed_row,
    quote_value,
    read_records,
    text_field,
    type_name,
    validated_rows,
)
from labeling.importing.redaction import Redactor
from labeling.models import Case, Dataset, Rubric

JUDGMENT_FIELDS = ("external_id", "repeat", "verdict", "scores", "similarity", "reason", "judge")
JUDGMENT_REQUIRED = ("external_id", "repeat", "verdict")
MAX_REPEAT = 1000
# What an imported judgment records as its layer and judge: no evaluated layer of ours decided it.
EXTERNAL = "external"


@dataclass(frozen=True)
class JudgmentData:
    external_id: str
    repeat: int
    verdict: str
    scores: dict | None
    reason: str
    judge: str
    similarity: float | None = None

    def record(self) -> dict:
        """The row as the export writes it (kept as the judgment's raw output, so it exports unchanged)."""
        return {
            "external_id": self.external_id, "repeat": self.repeat, "verdict": self.verdict,
            "scores": self.scores, "similarity": self.similarity, "reason": self.reason, "judge": self.judge,
        }


@dataclass(frozen=True)
class JudgmentImportResult:
    run: Run
    config: JudgeConfig
    config_created: bool
    judgments: int

    def __str__(self) -> str:
        config = f"{'new ' if self.config_created else ''}external config v{self.config.version}"
        return f"run {self.run.pk}: {self.judgments} judgments, {self.run.not_evaluated} not evaluated ({config})"


def validate_judgment(obj: Any) -> tuple[JudgmentData | None, list[tuple[str | None, str]]]:
    """Check one judgment row; returns the normalised row or the problems found."""
    obj, problems, external_id = keyed_row(obj, JUDGMENT_FIELDS, "judgment")
    if obj is None:
        return None, problems
    repeat = obj.get("repeat")
    if "repeat" not in obj or repeat is None:
        problems.append(("repeat", "is required: a whole number from 1"))
    elif isinstance(repeat, bool) or not isinstance(repeat, int):
        problems.append(("repeat", f"must be a whole number from 1, not {repeat!r}"))
    elif not 1 <= repeat <= MAX_REPEAT:
        problems.append(("repeat", f"must be from 1 to {MAX_REPEAT}, not {repeat}"))
    verdict = (text_field(obj, "verdict", problems, required=True, max_chars=20) or "").strip().lower()
    if isinstance(obj.get("verdict"), str) and verdict not in OUTCOMES:
        problems.append(("verdict", f"must be pass, fail or not_evaluated, not {obj['verdict']!r}"))
    scores = obj.get("scores")
    if scores is not None and not isinstance(scores, dict):
        problems.append(("scores", f"must be a JSON object or null, not {type_name(scores)}"))
    elif has_nul(scores):
        problems.append(("scores", "contains a NUL character"))
    similarity = obj.get("similarity")
    if similarity is not None and (
        isinstance(similarity, bool) or not isinstance(similarity, int | float) or not -1 <= similarity <= 1
    ):
        problems.append(("similarity", f"must be a number from -1 to 1 (a cosine similarity), not {similarity!r}"))
    reason = text_field(obj, "reason", problems) or ""
    judge = (text_field(obj, "judge", problems, max_chars=200) or "").strip()
    if problems:
        return None, problems
    return JudgmentData(external_id=external_id, repeat=repeat, verdict=verdict, scores=scores or None,
                        reason=reason, judge=judge,
                        similarity=None if similarity is None else float(similarity)), []


def _judgment_from_csv(cells: dict, number: int, errors: list[RowError]) -> dict | None:
    """CSV cells to the JSON shape: scores parsed from JSON text, repeat and similarity read as numbers."""
    obj: dict = {}
    for name, cell in cells.items():
        if name == "scores":
            if not cell.strip():
                continue
            try:
                obj[name] = parse_json(cell)
            except ValueError as exc:
                errors.append(RowError(number, name, f"must be JSON text in its CSV cell: {json_error(exc)}"))
                return None
        elif name == "repeat":
            try:
                obj[name] = int(cell.strip())
            except ValueError:
                obj[name] = cell or None  # reported by validate_judgment, with the cell's text
        elif name == "similarity":
            if not cell.strip():
                continue
            try:
                obj[name] = float(cell.strip())
            except ValueError:
                obj[name] = cell  # reported by validate_judgment, with the cell's text
        else:
            obj[name] = cell
    return obj


def _spec_hash(spec: dict) -> str:
    return sha256_hex(canonical_json(spec))


def judgments_import(
    *, dataset: Dataset, rubric: Rubric, stream: IO[bytes], fmt: Format, source_name: str, by,
    max_bytes: int | None = None,
) -> JudgmentImportResult:
    """Import another tool's judgments of `rubric` on `dataset` (of one project) as a finished run of an external
    config.

    Must succeed or fail together: the external config version (or the existing one with the same
    content), the finished run with its counters, and every judgment.
    """
    errors: list[RowError] = []
    records = read_records(
        stream, fmt, errors, known=JUDGMENT_FIELDS, required=JUDGMENT_REQUIRED, aliases=ID_ALIASES,
        from_csv=_judgment_from_csv,
        max_bytes=settings.EVALHUB_IMPORT_MAX_BYTES if max_bytes is None else max_bytes,
    )
    rows: list[tuple[int, JudgmentData]] = validated_rows(
        records, errors, validate=validate_judgment, key=lambda data: (data.external_id, data.repeat),
        duplicate=lambda data, first: (
            "repeat",
            f"{data.external_id!r} repeat {data.repeat} is judged twice in this import (first at line {first})",
        ),
    )
    spec = {"judge": sorted({data.judge for _, data in rows if data.judge})}
    return _save_external_run(dataset=dataset, rubric=rubric, rows=rows, errors=errors, spec=spec,
                              source_name=source_name, by=by)


def tool_judgments_import(
    *, dataset: Dataset, rubric: Rubric, stream: IO[bytes], tool: str, match_var: str, metric: str | None,
    source_name: str, by, max_bytes: int | None = None,
) -> JudgmentImportResult:
    """Import a promptfoo results file or a DeepEval test run (judges.runs.tool_results) as a finished run of
    an external config, all or nothing, like judgments_import.

    Each result must have graded the case's own answer: a result whose output differs from the case's was
    about another text, and calibrating it against the humans' verdicts on this one would mean nothing.
    """
    limit = settings.EVALHUB_IMPORT_MAX_BYTES if max_bytes is None else max_bytes
    body = stream.read(limit + 1)
    if len(body) > limit:
        raise ImportRejected([RowError(None, None, f"the file is larger than {limit} bytes")])
    try:
        document = parse_json(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise ImportRejected([RowError(None, None, "the file is not UTF-8 text")]) from None
    except ValueError as exc:
        raise ImportRejected([RowError(None, None, f"the file is not JSON: {json_error(exc)}")]) from None
    verdicts, errors = read_tool_results(document, tool=tool, match_var=match_var, metric=metric)
    repeats: dict[str, int] = {}
    rows: list[tuple[str, JudgmentData]] = []
    outputs: dict[str, str | None] = {}  # the answer each result graded, by where it is
    for verdict in verdicts:
        repeats[verdict.external_id] = repeat = repeats.get(verdict.external_id, 0) + 1
        if repeat > MAX_REPEAT:
            errors.append(RowError(None, verdict.where, f"more than {MAX_REPEAT} results for one case"))
            continue
        data_row = JudgmentData(
            external_id=verdict.external_id, repeat=repeat, verdict=verdict.verdict,
            scores=None if verdict.score is None else {"score": verdict.score}, reason=verdict.reason,
            judge=verdict.judge[:200],
        )
        outputs[verdict.where] = verdict.output
        rows.append((verdict.where, data_row))
    spec = {
        "tool": tool, "match_var": match_var, "metric": metric,
        "judge": sorted({data.judge for _, data in rows if data.judge}),
    }

    def check_outputs(case_outputs: dict[str, str | None]) -> list[RowError]:
        mismatched = []
        for where, data in rows:
            output, external_id = outputs[where], data.external_id
            if output is None or external_id not in case_outputs:
                continue
            if output.strip() != (case_outputs[external_id] or "").strip():
                mismatched.append(RowError(None, where, f"{tool} graded another answer than the case's (its output "
                                                        f"{quote_value(output or '')}, the case's "
                                                        f"{quote_value(case_outputs[external_id] or '')})"))
        return mismatched

    return _save_external_run(dataset=dataset, rubric=rubric, rows=rows, errors=errors, spec=spec,
                              source_name=source_name, by=by, check_outputs=check_outputs)


def _save_external_run(
    *, dataset: Dataset, rubric: Rubric, rows: list, errors: list[RowError], spec: dict, source_name: str, by,
    check_outputs: Callable[[dict[str, str | None]], list[RowError]] | None = None,
) -> JudgmentImportResult:
    """Check the rows against the dataset's cases and write the external config, its finished run and the
    judgments, in one transaction; any error (theirs or the rows') rejects the whole import.
    `rows`: (a line number, or where the result is in another tool's file; its JudgmentData).
    `check_outputs` is given each case's answer by external_id and returns its own errors."""
    if rubric.project_id != dataset.project_id:
        # A rubric judges its own project's datasets only (docs/projects.md).
        raise ImportRejected([RowError(None, None, f"the rubric {rubric.slug} is not a rubric of the dataset "
                                                   f"{dataset.slug}'s project: import into one of its own datasets")])
    if not rows and not errors:
        errors.append(RowError(None, None, "the file has no judgments"))
    with transaction.atomic():
        case_ids: dict[str, int] = {}
        case_outputs: dict[str, str | None] = {}
        case_inputs: dict[str, str] = {}
        for chunk in chunks(sorted({data.external_id for _, data in rows}), LOOKUP_CHUNK):
            for external_id, pk, output, input_ in Case.objects.filter(
                dataset=dataset, external_id__in=chunk
            ).values_list("external_id", "pk", "output", "input"):
                case_ids[external_id] = pk
                case_outputs[external_id] = output
                case_inputs[external_id] = input_
        for row, data in rows:
            if data.external_id not in case_ids:
                message = f"{data.external_id!r} is not a case of the dataset {dataset.slug}"
                # A line of a judgments file, or where a result is in another tool's file.
                errors.append(RowError(None, row, message) if isinstance(row, str) else
                              RowError(row, "external_id", message))
        if check_outputs is not None:
            errors.extend(check_outputs(case_outputs))
        # A judge's reason quotes the answer, an error the rows: the dataset's redaction applies to them as to
        # the case (docs/security.md, "Redaction"), before a reason is stored in the judgment and its raw
        # row, and before an error's quoted value is clipped.
        redactor = Redactor(Dataset.objects.only("redact").get(pk=dataset.pk).redact_kinds)
        if errors:
            raise ImportRejected([e.redacted(redactor.text_alone) for e in errors] if redactor else errors)
        if redactor:
            rows = [(row, replace(data, reason=redactor.about_case(
                data.reason, (case_inputs[data.external_id], case_outputs[data.external_id] or ""))))
                for row, data in rows]

        spec = {
            "rubric": rubric.slug,
            "criteria": rubric.criteria,
            "external": True,
            **spec,
            "source_file": Path(source_name).name,
        }
        config, config_created = _external_config(rubric=rubric, spec=spec, by=by)
        now = timezone.now()
        not_evaluated = sum(data.verdict == "not_evaluated" for _, data in rows)
        run = Run.objects.create(
            config=config, dataset=dataset, repeats=max(data.repeat for _, data in rows), concurrency=1,
            status=Run.Status.FINISHED, created_by=by, created_at=now, started_at=now, finished_at=now,
            total=len(rows), done=len(rows), not_evaluated=not_evaluated,
        )
        Judgment.objects.bulk_create(
            (
                Judgment(
                    run=run, case_id=case_ids[data.external_id], repeat=data.repeat, outcome=data.verdict,
                    scores=data.scores, reason=data.reason, similarity=data.similarity,
                    # The row itself: the judge's name may be longer than Judgment.judge holds.
                    raw_output=json.dumps(data.record(), ensure_ascii=False),
                    layer=EXTERNAL, judge=EXTERNAL, cost_usd=None, created_at=now,
                )
                for _, data in rows
            ),
            batch_size=BATCH_SIZE,
        )
        case_tallies_refresh(run_id=run.pk)
    return JudgmentImportResult(run=run, config=config, config_created=config_created, judgments=len(rows))


def _external_config(*, rubric: Rubric, spec: dict, by) -> tuple[JudgeConfig, bool]:
    """The rubric's external config with this spec, created as its next version when there is none.

    Not judge_config_save: the engine refuses a spec without layers, and an external config has none.
    Version numbers are shared with the rubric's other configs, under the same row lock.
    """
    Rubric.objects.select_for_update().filter(pk=rubric.pk).first()
    config_hash = _spec_hash(spec)
    existing = rubric.judge_configs.filter(external=True, config_hash=config_hash).order_by("-version").first()
    if existing is not None:
        return existing, False
    version = (rubric.judge_configs.aggregate(v=Max("version"))["v"] or 0) + 1
    config = JudgeConfig.objects.create(
        rubric=rubric, version=version, spec=spec, config_hash=config_hash, external=True,
        note=f"imported from {spec['source_file']}", created_by=by,
    )
    return config, True
