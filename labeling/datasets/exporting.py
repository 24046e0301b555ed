"""Cases and labels out, in their import formats (an export imports again unchanged), and a report CSV.

Every CSV is safe to open in a spreadsheet by default: a cell a spreadsheet would run as a formula
(`=HYPERLINK(…)`, `@SUM(…)`, `+cmd|…`) is made text with a leading apostrophe, which reading a CSV takes off
again (labeling.importing.formulas), so such a file still imports unchanged. The raw cells are an explicit
opt-in (`neutralise_formulas=False`: `--raw-formulas`, `raw_formulas=1`), for a program that reads CSV itself.

Every export is a generator of text pieces over `QuerySet.iterator()`, so a page streams it
(StreamingHttpResponse) and a command writes it to a file without holding 100k cases in memory.
"""

import csv
import json
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import Any

from django.db.models import BooleanField, Exists, ExpressionWrapper, OuterRef, Q, QuerySet

from labeling.disputes.selectors import cases_with_human_verdict
from labeling.importing import Format
from labeling.importing.formulas import neutralise_formula
from labeling.importing.labels import LABEL_FIELDS
from labeling.importing.reading import CASE_FIELDS
from labeling.models import Adjudication, Case, Dataset, Label, Rubric

CHUNK = 2_000
REPORT_FIELDS = ("external_id", "category", "split", "input", "output")


class _Echo:
    """A file-like object whose write() returns the line, so csv.writer can feed a generator."""

    def write(self, value: str) -> str:
        return value


def csv_lines(rows: Iterable[Sequence], *, neutralise_formulas: bool) -> Iterator[str]:
    """Rows as CSV text pieces, one per row (a writer per export: csv writers are not thread-safe)."""
    writer = csv.writer(_Echo())
    for cells in rows:
        yield writer.writerow([neutralise_formula(cell) for cell in cells] if neutralise_formulas else cells)


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


# What a pipeline gets to run its agent on (docs/gate.md): every case field but the answer.
CASE_LINE_FIELDS = tuple(name for name in CASE_FIELDS if name != "output")


def _case_rows(cases: QuerySet[Case], fields: tuple[str, ...] = CASE_FIELDS) -> Iterator[dict]:
    """Each case as its import record, in import field order; an unchecked argument is left out."""
    cases = cases.annotate(checks_tool_argument=ExpressionWrapper(Q(expected_tool_argument__isnull=False),
                                                                  output_field=BooleanField()))
    for case in cases.iterator(chunk_size=CHUNK):
        record = {name: getattr(case, name) for name in fields}
        if not case.checks_tool_argument:
            del record["expected_tool_argument"]  # SQL NULL: not checked (a JSON null is checked)
        yield record


def case_lines(cases: QuerySet[Case]) -> Iterator[str]:
    """The cases file of `evalhub-gate cases`: one JSON line per case, every field but output (no labels)."""
    for record in _case_rows(cases, CASE_LINE_FIELDS):
        yield _json_text(record) + "\n"


def cases_export(*, dataset: Dataset, fmt: Format, neutralise_formulas: bool = True) -> Iterator[str]:
    """The dataset's cases as JSONL (one object per line) or CSV (JSON text in trace/metadata cells)."""
    cases = Case.objects.filter(dataset=dataset).order_by("pk")
    if fmt == Format.JSONL:
        for record in _case_rows(cases):
            yield _json_text(record) + "\n"
        return
    yield from csv_lines(chain([CASE_FIELDS], map(_case_cells, _case_rows(cases))),
                         neutralise_formulas=neutralise_formulas)


def _case_cells(record: dict) -> list:
    cells = []
    for name in CASE_FIELDS:
        value = record.get(name)
        if name in ("trace", "metadata"):
            cells.append(_json_text(value))
        elif name == "expected_tool_argument":
            cells.append(_json_text(value) if name in record else "")  # empty cell: not checked
        else:
            cells.append("" if value is None else value)
    return cells


def labels_export(*, dataset: Dataset, rubric: Rubric, fmt: Format, neutralise_formulas: bool = True) -> Iterator[str]:
    """Every label of `rubric` on the dataset's cases, one per (case, reviewer), in the import format.

    Labels that stopped counting (the case changed since) are exported too: importing the file
    again confirms them against the current content, as a reviewer confirming would. A rubric of another
    project than the dataset's is refused: the two never pair.
    """
    if rubric.project_id != dataset.project_id:  # refused now, not at the first line of a stream
        raise ValueError(f"The rubric {rubric.slug} is not of the dataset {dataset.slug}'s project.")
    return _label_lines(dataset=dataset, rubric=rubric, fmt=fmt, neutralise_formulas=neutralise_formulas)


def _label_lines(*, dataset: Dataset, rubric: Rubric, fmt: Format, neutralise_formulas: bool) -> Iterator[str]:
    rows = (
        Label.objects.filter(rubric=rubric, case__dataset=dataset)
        .order_by("case_id", "reviewer__username")
        .values_list("case__external_id", "reviewer__username", "verdict", "note")
    )
    if fmt == Format.JSONL:
        for row in rows.iterator(chunk_size=CHUNK):
            yield _json_text(dict(zip(LABEL_FIELDS, row, strict=True))) + "\n"
        return
    yield from csv_lines(chain([LABEL_FIELDS], rows.iterator(chunk_size=CHUNK)),
                         neutralise_formulas=neutralise_formulas)


def report_rubrics(*, dataset: Dataset) -> list[Rubric]:
    """The rubrics of the dataset's project with a label or an adjudication on this dataset: the report's verdict
    columns."""
    on_dataset = {"case__dataset": dataset, "rubric": OuterRef("pk")}
    return list(
        Rubric.objects.filter(project_id=dataset.project_id)
        .filter(Q(Exists(Label.objects.filter(**on_dataset))) | Q(Exists(Adjudication.objects.filter(**on_dataset))))
        .order_by("slug")
    )


def report_export(*, dataset: Dataset) -> Iterator[str]:
    """A CSV of cases with their human verdict per rubric (empty: none yet, or a tie), formulas neutralised.

    One query per rubric builds {case id: verdict} (a few MB for 100k cases), then the cases stream.
    """
    rubrics = report_rubrics(dataset=dataset)
    verdicts = []
    for rubric in rubrics:
        rows = cases_with_human_verdict(rubric=rubric, cases=Case.objects.filter(dataset=dataset))
        verdicts.append({pk: v for pk, v in rows.values_list("pk", "human_verdict").order_by() if v})
    header = [*REPORT_FIELDS, *(rubric.slug for rubric in rubrics)]
    cases = Case.objects.filter(dataset=dataset).order_by("pk").values_list("pk", *REPORT_FIELDS)
    rows = ([*fields, *(by_case.get(pk, "") for by_case in verdicts)]
            for pk, *fields in cases.iterator(chunk_size=CHUNK))
    # Opened in spreadsheets: agent outputs and case ids are untrusted text, never formulas.
    yield from csv_lines(chain([header], rows), neutralise_formulas=True)
