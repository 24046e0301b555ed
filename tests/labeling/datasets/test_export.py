import csv
import io
import json

import pytest
from django.core.management import CommandError, call_command

from labeling.datasets.exporting import cases_export, labels_export, report_export
from labeling.importing import Format
from labeling.importing.cases import cases_import
from labeling.importing.labels import labels_import
from labeling.importing.reading import CASE_FIELDS
from labeling.models import Adjudication, Case, Dataset, Label, Rubric
from tests.conftest import make_user, store_project

pytestmark = pytest.mark.django_db

# Awkward on purpose: commas, quotes, line breaks (\n and \r\n), unicode, markup, JSON null vs unchecked.
CASES = [
    {
        "external_id": "ret-001", "input": 'He said "return it", ok?', "output": "Line one\r\nline two, é ✓",
        "trace": {"toolCalls": [{"name": "lookup", "argument": {"id": 1.5}, "result": None}],
                  "retrievedSources": ["policy"], "context": "30 days", "extra": [1, {"b": True}]},
        "golden_answer": "30 days", "expected_behaviour": "cite the window", "expected_tool": "lookup",
        "expected_tool_argument": {"id": 1.5}, "expected_source": "policy", "category": "policy", "kind": "good",
        "metadata": {"agent_model": "claude-3-5-haiku-20241022", "tags": ["a"]},
    },
    {"external_id": "ret-002", "input": "<script>alert(1)</script>", "output": "", "expected_tool_argument": None},
    {"external_id": "ret,003", "input": "q", "output": "a", "expected_tool_argument": "plain string"},
    {"external_id": "ret-004", "input": "q", "output": "a", "expected_tool_argument": 0, "category": "edge"},
]


def import_cases(dataset, content: bytes, fmt: Format) -> None:
    cases_import(dataset=dataset, stream=io.BytesIO(content), fmt=fmt)


def export(pieces) -> bytes:
    return "".join(pieces).encode()


def fields_of(dataset) -> list[dict]:
    rows = Case.objects.filter(dataset=dataset).order_by("external_id")
    return [
        {**{name: getattr(c, name) for name in CASE_FIELDS},
         "argument_checked": Case.objects.filter(pk=c.pk, expected_tool_argument__isnull=False).exists(),
         "split": c.split, "content_hash": c.content_hash}
        for c in rows
    ]


@pytest.mark.parametrize("fmt", [Format.JSONL, Format.CSV])
def test_an_export_imports_again_unchanged(dataset, fmt):
    import_cases(dataset, "".join(json.dumps(c) + "\n" for c in CASES).encode(), Format.JSONL)

    first = export(cases_export(dataset=dataset, fmt=fmt))
    copy = Dataset.objects.create(project=store_project(), slug="copy", name="copy")
    import_cases(copy, first, fmt)
    second = export(cases_export(dataset=copy, fmt=fmt))

    assert second == first  # byte for byte
    assert fields_of(copy) == fields_of(dataset)  # field for field, JSON null vs unchecked included
    # And into the same dataset with update on, every case is unchanged.
    result = cases_import(dataset=dataset, stream=io.BytesIO(first), fmt=fmt, update=True)
    assert (result.created, result.updated, result.unchanged) == (0, 0, len(CASES))


def test_the_jsonl_export_leaves_out_an_unchecked_argument_only(dataset):
    import_cases(dataset, "".join(json.dumps(c) + "\n" for c in CASES[:2]).encode(), Format.JSONL)
    Case.objects.create(dataset=dataset, external_id="bare", input="q", output="a", split="dev", content_hash="x")
    rows = {r["external_id"]: r for r in map(json.loads, export(cases_export(dataset=dataset, fmt=Format.JSONL))
                                              .decode().splitlines())}
    assert rows["ret-002"]["expected_tool_argument"] is None
    assert "expected_tool_argument" not in rows["bare"]
    assert rows["ret-001"] == {name: CASES[0][name] for name in CASE_FIELDS}


@pytest.fixture
def labeled(dataset, rubric):
    import_cases(dataset, "".join(json.dumps(c) + "\n" for c in CASES).encode(), Format.JSONL)
    content = (
        b'{"external_id": "ret-001", "reviewer": "rita", "verdict": "pass", "note": "ok, \\"fine\\"\\nreally"}\n'
        b'{"external_id": "ret-001", "reviewer": "rob", "verdict": "fail", "note": ""}\n'
        b'{"external_id": "ret-002", "reviewer": "rita", "verdict": "fail", "note": ""}\n'
        b'{"external_id": "ret,003", "reviewer": "rita", "verdict": "pass", "note": ""}\n'
        b'{"external_id": "ret,003", "reviewer": "rob", "verdict": "fail", "note": ""}\n'
    )
    labels_import(dataset=dataset, rubric_slug=rubric.slug, stream=io.BytesIO(content), fmt=Format.JSONL)
    return content


@pytest.mark.parametrize("fmt", [Format.JSONL, Format.CSV])
def test_a_labels_export_imports_again_unchanged(dataset, rubric, labeled, fmt):
    first = export(labels_export(dataset=dataset, rubric=rubric, fmt=fmt))
    if fmt == Format.JSONL:
        assert first == labeled  # the same order and fields as the file they came from

    result = labels_import(dataset=dataset, rubric_slug=rubric.slug, stream=io.BytesIO(first), fmt=fmt)
    assert (result.created, result.revised, result.unchanged) == (0, 0, 5)

    other = Rubric.objects.create(project=store_project(), slug="copy", name="copy", criteria="")
    labels_import(dataset=dataset, rubric_slug=other.slug, stream=io.BytesIO(first), fmt=fmt)
    assert export(labels_export(dataset=dataset, rubric=other, fmt=fmt)) == first


def test_the_report_has_a_human_verdict_column_per_rubric(dataset, rubric, labeled, lead):
    tone = Rubric.objects.create(project=store_project(), slug="tone", name="Polite?", criteria="")
    Rubric.objects.create(project=store_project(), slug="unused", name="Unused", criteria="")  # no label: no column
    case_3 = Case.objects.get(external_id="ret,003")
    Adjudication.objects.create(case=case_3, rubric=rubric, verdict="pass", decided_by=lead)
    Label.objects.create(case=Case.objects.get(external_id="ret-004"), rubric=tone, reviewer=make_user("x"),
                         verdict="fail", content_hash=Case.objects.get(external_id="ret-004").content_hash)

    rows = list(csv.reader(io.StringIO("".join(report_export(dataset=dataset)))))

    assert rows[0] == ["external_id", "category", "split", "input", "output", "return-policy", "tone"]
    by_id = {row[0]: row for row in rows[1:]}
    assert by_id["ret-001"][1:5] == ["policy", Case.objects.get(external_id="ret-001").split,
                                     CASES[0]["input"], CASES[0]["output"]]
    # ret-001: a 1–1 tie (none); ret-002: fail; ret,003: tie, adjudicated pass; ret-004: only a tone label.
    assert [by_id[x][5:] for x in ("ret-001", "ret-002", "ret,003", "ret-004")] == [
        ["", ""], ["fail", ""], ["pass", ""], ["", "fail"],
    ]


def test_the_export_commands_write_files(dataset, rubric, labeled, tmp_path, capsys):
    call_command("export_cases", dataset.slug, str(tmp_path / "cases.csv"))
    call_command("export_labels", dataset.slug, str(tmp_path / "labels.jsonl"), "--rubric", rubric.slug)
    call_command("export_report", dataset.slug, str(tmp_path / "report.csv"))

    out = capsys.readouterr().out
    assert "Exported 4 cases" in out and "Exported 5 labels" in out and "report of 4 cases" in out
    assert (tmp_path / "cases.csv").read_bytes() == export(cases_export(dataset=dataset, fmt=Format.CSV))
    assert (tmp_path / "labels.jsonl").read_bytes() == labeled
    call_command("import_cases", "again", str(tmp_path / "cases.csv"))
    assert Case.objects.filter(dataset__slug="again").count() == 4


FORMULAS = ["=HYPERLINK(\"http://evil.example\",\"x\")", "+1+1", "-2+3", "@SUM(A1)", "\tlead", "\rcr"]


@pytest.fixture
def hostile(dataset, rubric, reviewer):
    """Cases and a label whose text a spreadsheet would run as formulas."""
    import_cases(dataset, "".join(
        json.dumps({"external_id": f"f{i}", "input": formula, "output": formula, "category": formula,
                    "expected_tool_argument": -5}) + "\n" for i, formula in enumerate(FORMULAS)
    ).encode(), Format.JSONL)
    import_cases(dataset, b'{"external_id": "=cmd", "input": "a - b = c", "output": "plain"}\n', Format.JSONL)
    for case in Case.objects.filter(dataset=dataset):
        Label.objects.create(case=case, rubric=rubric, reviewer=reviewer, verdict="pass", note=case.input,
                             content_hash=case.content_hash)


def cells(pieces) -> list[list[str]]:
    return list(csv.reader(io.StringIO("".join(pieces), newline="")))


def starts_a_formula(cell: str) -> bool:
    return cell.startswith(("=", "+", "-", "@", "\t", "\r"))


def test_the_report_neutralises_formulas(dataset, rubric, hostile):
    rows = cells(report_export(dataset=dataset))
    assert not [cell for row in rows for cell in row if starts_a_formula(cell)]
    by_id = {row[0]: row for row in rows[1:]}
    assert by_id["'=cmd"][3:5] == ["a - b = c", "plain"]  # text that merely contains a sign is left alone
    assert by_id["f0"][3] == "'" + FORMULAS[0]  # made text, kept whole
    assert {by_id[f"f{i}"][4] for i in range(len(FORMULAS))} == {"'" + formula for formula in FORMULAS}


@pytest.mark.parametrize("kind", ["cases", "labels"])
def test_the_csv_exports_neutralise_formulas_by_default_and_raw_only_when_asked(dataset, rubric, hostile, kind):
    def export_of(**raw):
        if kind == "cases":
            return cells(cases_export(dataset=dataset, fmt=Format.CSV, **raw))
        return cells(labels_export(dataset=dataset, rubric=rubric, fmt=Format.CSV, **raw))

    default, raw = export_of(), export_of(neutralise_formulas=False)
    assert not any(starts_a_formula(cell) for row in default for cell in row)
    assert any(starts_a_formula(cell) for row in raw for cell in row)  # the opt-in keeps the text as it is
    assert default[0] == raw[0]
    assert [[cell.removeprefix("'") for cell in row] for row in default] == raw


def test_a_neutralised_csv_export_imports_again_unchanged(dataset, rubric, hostile, tmp_path):
    Case.objects.filter(dataset=dataset, external_id="f0").update(output="'=already quoted", content_hash="x")
    call_command("export_cases", dataset.slug, str(tmp_path / "cases.csv"))
    call_command("export_labels", dataset.slug, str(tmp_path / "labels.csv"), "--rubric", rubric.slug)
    assert not any(starts_a_formula(cell) for name in ("cases.csv", "labels.csv")
                   for row in cells([(tmp_path / name).read_text(encoding="utf-8")]) for cell in row)

    call_command("import_cases", "again", str(tmp_path / "cases.csv"))
    fields = ("external_id", "input", "output", "category", "expected_tool_argument")
    again = Dataset.objects.get(project=dataset.project, slug="again")
    assert sorted(Case.objects.filter(dataset=again).values_list(*fields)) == \
        sorted(Case.objects.filter(dataset=dataset).values_list(*fields))
    assert Case.objects.get(dataset=again, external_id="f0").output == "'=already quoted"
    other = Rubric.objects.create(project=dataset.project, slug="again", name="Again", criteria="")
    call_command("import_labels", dataset.slug, str(tmp_path / "labels.csv"), "--rubric", other.slug)
    notes = lambda r: sorted(Label.objects.filter(rubric=r).values_list("case__external_id", "note"))  # noqa: E731
    assert notes(other) == notes(rubric)


def test_the_export_commands_write_raw_formulas_only_when_asked(dataset, rubric, hostile, tmp_path):
    call_command("export_cases", dataset.slug, str(tmp_path / "cases.csv"), "--raw-formulas")
    call_command("export_labels", dataset.slug, str(tmp_path / "labels.csv"), "--rubric", rubric.slug,
                 "--raw-formulas")
    for name in ("cases.csv", "labels.csv"):
        rows = cells([(tmp_path / name).read_text(encoding="utf-8")])
        assert len(rows) == len(FORMULAS) + 2
        assert any(starts_a_formula(cell) for row in rows for cell in row)


def test_the_export_commands_refuse_raw_formulas_for_jsonl(dataset, tmp_path):
    with pytest.raises(CommandError, match="CSV only"):
        call_command("export_cases", dataset.slug, str(tmp_path / "cases.jsonl"), "--raw-formulas")


def test_the_labels_export_refuses_a_rubric_of_another_project(dataset, other_project):
    theirs = Rubric.objects.create(project=other_project, slug="theirs", name="Q", criteria="")
    with pytest.raises(ValueError, match="not of the dataset store-support's project"):
        labels_export(dataset=dataset, rubric=theirs, fmt=Format.JSONL)


def test_the_report_has_no_column_of_another_projects_rubric(dataset, rubric, labeled, other_project):
    Rubric.objects.create(project=other_project, slug="theirs", name="Q", criteria="")
    header = next(csv.reader(io.StringIO("".join(report_export(dataset=dataset)))))
    assert header[5:] == ["return-policy"]
