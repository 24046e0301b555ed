"""Judgments in and out: import_judgments makes a finished run of an external config, all or nothing
with every error by line; export_judgments writes any run in the same format, which imports unchanged."""

import csv
import hashlib
import io
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from judges.configs import services as config_services
from judges.models import JudgeConfig, Judgment, Run
from judges.runs import services
from tests.conftest import TEST_PROJECT
from tests.judges.helpers import CONTRACT_SPEC, behavioral_spec, make_cases


@pytest.fixture
def eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.EVALHUB_CHUNK_CASES = 4


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def jsonl(*rows) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def import_file(path, dataset, rubric, **options) -> tuple[int, str]:
    out, err = StringIO(), StringIO()
    call_command("import_judgments", dataset.slug, str(path), rubric=rubric.slug, stdout=out, stderr=err, **options)
    return int(out.getvalue().strip()), err.getvalue()


def test_it_imports_judgments_as_a_finished_run_of_an_external_config(tmp_path, dataset, rubric, lead):
    make_cases(dataset, 3)
    config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)  # v1: versions are shared
    path = write(tmp_path, "other-tool.jsonl", jsonl(
        {"external_id": "c000", "repeat": 1, "verdict": "pass", "scores": {"correctness": 5}, "reason": "fine",
         "judge": "promptfoo-gpt-4o-2024-08-06"},
        {"external_id": "c000", "repeat": 2, "verdict": "FAIL", "reason": "not fine",
         "judge": "promptfoo-gpt-4o-2024-08-06"},
        {"external_id": "c001", "repeat": 1, "verdict": "not_evaluated", "reason": "timeout", "judge": "langfuse"},
    ))

    run_id, message = import_file(path, dataset, rubric)

    run = Run.objects.select_related("config").get(pk=run_id)
    config = run.config
    assert (config.version, config.external, config.rubric) == (2, True, rubric)
    assert config.spec == {
        "rubric": rubric.slug, "criteria": rubric.criteria, "external": True,
        "judge": ["langfuse", "promptfoo-gpt-4o-2024-08-06"], "source_file": "other-tool.jsonl",
    }
    canonical = json.dumps(config.spec, sort_keys=True, separators=(",", ":"))
    assert config.config_hash == hashlib.sha256(canonical.encode()).hexdigest()
    assert (run.status, run.repeats, run.total, run.done, run.not_evaluated) == (Run.Status.FINISHED, 2, 3, 3, 1)
    assert run.finished_at is not None
    rows = {(j.case.external_id, j.repeat): j for j in run.judgments.select_related("case")}
    assert rows["c000", 1].scores == {"correctness": 5} and rows["c000", 1].outcome == "pass"
    assert rows["c000", 2].outcome == "fail"  # verdicts are read case-insensitively
    assert {j.layer for j in rows.values()} == {"external"}
    assert f"run {run_id}: 3 judgments, 1 not evaluated" in message


def test_it_imports_csv_with_scores_as_json_text(tmp_path, dataset, rubric, lead):
    make_cases(dataset, 2)
    path = write(tmp_path, "j.csv", 'external_id,repeat,verdict,scores,reason,judge\r\n'
                                    'c000,1,pass,"{""relevance"": 4}","multi\nline",x\r\n'
                                    'c001,1,fail,,,\r\n')
    run_id, _ = import_file(path, dataset, rubric)
    rows = {j.case.external_id: j for j in Judgment.objects.filter(run_id=run_id).select_related("case")}
    assert rows["c000"].scores == {"relevance": 4} and rows["c000"].reason == "multi\nline"
    assert rows["c001"].scores is None and rows["c001"].outcome == "fail"


def test_it_rejects_a_file_with_every_error_by_line_and_writes_nothing(tmp_path, dataset, rubric, lead):
    make_cases(dataset, 2)
    path = write(tmp_path, "bad.jsonl", "\n".join([
        json.dumps({"external_id": "c000", "repeat": 1, "verdict": "pass"}),
        json.dumps({"external_id": "nope", "repeat": 1, "verdict": "pass"}),
        json.dumps({"external_id": "c000", "repeat": 1, "verdict": "fail"}),
        json.dumps({"external_id": "c001", "repeat": 0, "verdict": "pass"}),
        json.dumps({"external_id": "c001", "repeat": 2, "verdict": "maybe"}),
        '{"external_id": "c001", "repeat": 3,',
        json.dumps({"external_id": "c001", "repeat": 4, "verdict": "pass", "scores": [5], "colour": "red"}),
        json.dumps({"external_id": "c001", "repeat": True, "verdict": "pass"}),
    ]) + "\n")
    err = StringIO()

    with pytest.raises(CommandError, match="rejected with 8 error"):
        call_command("import_judgments", dataset.slug, str(path), rubric=rubric.slug, stdout=StringIO(), stderr=err)

    lines = err.getvalue().splitlines()
    assert lines[0] == "line 2: external_id: 'nope' is not a case of the dataset store-support"
    assert lines[1].startswith("line 3: repeat: 'c000' repeat 1 is judged twice in this import (first at line 1)")
    assert lines[2] == "line 4: repeat: must be from 1 to 1000, not 0"
    assert lines[3] == "line 5: verdict: must be pass, fail or not_evaluated, not 'maybe'"
    assert lines[4].startswith("line 6: is not valid JSON")
    assert any(line.startswith("line 7: colour: is not a judgment field") for line in lines)
    assert "line 7: scores: must be a JSON object or null, not a list" in lines
    assert lines[-1] == "line 8: repeat: must be a whole number from 1, not True"
    assert not JudgeConfig.objects.exists() and not Run.objects.exists() and not Judgment.objects.exists()


def test_it_rejects_a_csv_repeat_that_is_not_a_number(tmp_path, dataset, rubric, lead):
    make_cases(dataset, 1)
    path = write(tmp_path, "bad.csv", "external_id,repeat,verdict\nc000,two,pass\nc000,-1,pass\n")
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("import_judgments", dataset.slug, str(path), rubric=rubric.slug, stdout=StringIO(), stderr=err)
    assert err.getvalue().splitlines() == [
        "line 2: repeat: must be a whole number from 1, not 'two'",
        "line 3: repeat: must be from 1 to 1000, not -1",
    ]
    assert not Run.objects.exists()


def test_it_refuses_an_unknown_rubric_or_dataset(tmp_path, dataset, rubric, lead):
    path = write(tmp_path, "j.jsonl", jsonl({"external_id": "c000", "repeat": 1, "verdict": "pass"}))
    with pytest.raises(CommandError, match="No rubric 'nope'"):
        call_command("import_judgments", dataset.slug, str(path), rubric="nope")
    with pytest.raises(CommandError, match="No dataset 'nope'"):
        call_command("import_judgments", "nope", str(path), rubric=rubric.slug)


def test_it_reuses_the_external_config_when_the_same_file_comes_again(tmp_path, dataset, rubric, lead):
    make_cases(dataset, 1)
    path = write(tmp_path, "j.jsonl", jsonl({"external_id": "c000", "repeat": 1, "verdict": "pass", "judge": "x"}))
    first, _ = import_file(path, dataset, rubric)
    second, message = import_file(path, dataset, rubric)
    assert first != second
    assert JudgeConfig.objects.count() == 1
    assert "(external config v1)" in message


def test_an_imported_config_cannot_run(tmp_path, dataset, rubric, lead):
    make_cases(dataset, 1)
    run_id, _ = import_file(write(tmp_path, "j.jsonl", jsonl({"external_id": "c000", "repeat": 1, "verdict": "pass"})),
                            dataset, rubric)
    with pytest.raises(services.RunError):
        services.run_start(config=Run.objects.get(pk=run_id).config, dataset=dataset, repeats=1, concurrency=1,
                           spend_cap_usd=None, by=lead)


def _export(run_id: int, path, fmt: str | None = None) -> str:
    out = StringIO()
    call_command("export_judgments", str(run_id), str(path), stdout=out, **({"format": fmt} if fmt else {}))
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("ext", ["jsonl", "csv"])
def test_an_export_imports_again_unchanged(
    eager, tmp_path, dataset, rubric, lead, fake_provider, django_capture_on_commit_callbacks, ext
):
    make_cases(dataset, 6)
    # Scores, reasons with the fake's markers, a fallback-free primary: the richest rows a run writes.
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(output_kind="scores"), by=lead)
    fake_provider.control(rule={"kind": "answer_min_length", "chars": 1})
    with django_capture_on_commit_callbacks(execute=True):
        run = services.run_start(config=config, dataset=dataset, repeats=2, concurrency=2, spend_cap_usd=None,
                                 by=lead)

    exported = _export(run.pk, tmp_path / f"run.{ext}")
    run_id, _ = import_file(tmp_path / f"run.{ext}", dataset, rubric)
    again = _export(run_id, tmp_path / f"again.{ext}")

    assert exported == again
    rows = exported.splitlines()
    assert len(rows) == 12 + (ext == "csv")
    if ext == "jsonl":
        first = json.loads(rows[0])
        assert first["judge"] == config.spec["model"] and first["verdict"] == "fail"
        assert set(first["scores"]) == {"relevance", "correctness", "faithfulness", "helpfulness", "hallucinationFree"}
    imported = Run.objects.get(pk=run_id)
    assert (imported.total, imported.repeats) == (12, 2)


def test_it_exports_a_contract_run_naming_the_judge_contract(
    eager, tmp_path, dataset, rubric, lead, django_capture_on_commit_callbacks
):
    make_cases(dataset, 2)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    with django_capture_on_commit_callbacks(execute=True):
        run = services.run_start(config=config, dataset=dataset, repeats=1, concurrency=1, spend_cap_usd=None,
                                 by=lead)
    rows = [json.loads(line) for line in _export(run.pk, tmp_path / "out.txt", "jsonl").splitlines()]
    assert rows[0] == {"external_id": "c000", "repeat": 1, "verdict": "fail", "scores": None, "similarity": None,
                       "reason": rows[0]["reason"], "judge": "contract"}
    assert [r["verdict"] for r in rows] == ["fail", "pass"]


def test_it_refuses_an_unknown_run(db, tmp_path):
    with pytest.raises(CommandError, match="No run 999"):
        call_command("export_judgments", "999", str(tmp_path / "x.jsonl"))


def test_a_csv_neutralises_formulas_by_default_imports_unchanged_and_is_raw_only_when_asked(
    tmp_path, dataset, rubric, lead, lead_client
):
    from django.urls import reverse

    from tests.judges.report_factories import make_cases as make_named_cases
    from tests.judges.report_factories import make_config, make_run

    cases = make_named_cases(dataset, [("=cmd|' /C calc'!A0", "policy"), ("plain", "policy")])
    run = make_run(make_config(rubric, lead), dataset, lead, {case: ["fail"] for case in cases},
                   reasons={("plain", 1): '@SUM(1+1)*cmd|" /C calc"!A0'})

    _export(run.pk, tmp_path / "run.csv")
    default = (tmp_path / "run.csv").read_bytes().decode()
    call_command("export_judgments", str(run.pk), str(tmp_path / "raw.csv"), "--raw-formulas", stdout=StringIO())
    raw = (tmp_path / "raw.csv").read_bytes().decode()
    default_rows, raw_rows = (list(csv.reader(io.StringIO(text, newline=""))) for text in (default, raw))
    assert [raw_rows[1][0], raw_rows[2][5]] == ["=cmd|' /C calc'!A0", '@SUM(1+1)*cmd|" /C calc"!A0']  # kept
    assert [default_rows[1][0], default_rows[2][5]] == ["'=cmd|' /C calc'!A0", '\'@SUM(1+1)*cmd|" /C calc"!A0']
    assert [[cell.removeprefix("'") for cell in row] for row in default_rows] == raw_rows
    # The neutralised file imports as the raw one would: the reasons as the judge wrote them.
    run_id, _ = import_file(tmp_path / "run.csv", dataset, rubric)
    _export(run_id, tmp_path / "again.csv")
    assert (tmp_path / "again.csv").read_bytes().decode() == default

    response = lead_client.get(reverse("judges:run_export", args=[TEST_PROJECT, run.pk, "csv"]))
    assert b"".join(response.streaming_content).decode() == default
    response = lead_client.get(reverse("judges:run_export", args=[TEST_PROJECT, run.pk, "csv"]), {"raw_formulas": "1"})
    assert b"".join(response.streaming_content).decode() == raw
    assert "judgments-raw-formulas.csv" in response["Content-Disposition"]
    page = lead_client.get(reverse("judges:run_detail", args=[TEST_PROJECT, run.pk])).content.decode()
    assert "?raw_formulas=1" in page and "unsafe to open in a spreadsheet" in page

    with pytest.raises(CommandError, match="CSV only"):
        call_command("export_judgments", str(run.pk), str(tmp_path / "x.jsonl"), "--raw-formulas")
