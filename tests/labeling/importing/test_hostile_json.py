"""JSON that no import may take (docs/cases.md, "Strict JSON"): a repeated key, NaN, Infinity, 1e999, a lone surrogate,
nesting past 64 levels. Each is an error on its line in import_cases, import_labels and import_judgments
(JSONL, and the JSON cells of CSV), on the upload page, and at its index in the ingest API — never a
traceback or a 500, never a partial write. The camelCase golden-dataset names import everywhere."""

import json
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from evalhub.models import ApiToken, Scope
from judges.models import Run
from labeling.models import Case, Label, Rubric
from tests.conftest import TEST_PROJECT, store_project
from tests.judges.helpers import make_cases

pytestmark = pytest.mark.django_db

GOOD = '{"external_id": "ok", "input": "q", "output": "a"}'
# (name, a JSON value as text, what the error says); each is put where a case, label or judgment holds JSON.
HAZARDS = [
    ("repeated key", '{"k": 1, "k": 2}', "the key 'k' is repeated"),
    ("NaN", "NaN", "NaN is not valid JSON"),
    ("Infinity", "-Infinity", "-Infinity is not valid JSON"),
    ("overflow", "1e999", "the number 1e999 is too large"),
    ("lone surrogate", '"\\ud800"', "lone surrogate"),
    ("deep", "[" * 65 + "]" * 65, "deeper than 64 levels"),
]
IDS = [h[0] for h in HAZARDS]


def import_command(name: str, path, dataset, **options) -> str:
    """The command's stderr when it refuses the file (it must), as the user reads it."""
    err = StringIO()
    with pytest.raises(CommandError, match="was rejected"):
        call_command(name, dataset.slug, str(path), stdout=StringIO(), stderr=err, **options)
    return err.getvalue()


@pytest.mark.parametrize(("name", "value", "message"), HAZARDS, ids=IDS)
def test_import_cases_refuses_each_hazard_on_its_line(tmp_path, dataset, name, value, message):
    jsonl = tmp_path / "cases.jsonl"
    jsonl.write_text(f'{GOOD}\n{{"external_id": "b", "input": "q", "output": "a", "metadata": {{"x": {value}}}}}\n')
    csv = tmp_path / "cases.csv"
    csv.write_text('external_id,input,output,trace\nok,q,a,\nb,q,a,"{""x"": ' + value.replace('"', '""') + '}"\n')

    refused = import_command("import_cases", jsonl, dataset)
    assert refused.startswith("line 2: is not valid JSON") and message in refused
    refused = import_command("import_cases", csv, dataset)
    assert refused.startswith("line 3: trace: must be JSON text in its CSV cell") and message in refused
    assert not Case.objects.exists()


def test_a_repeated_key_is_refused_not_the_last_one_taken(tmp_path, dataset):
    path = tmp_path / "cases.jsonl"
    path.write_text('{"external_id": "a", "input": "q", "output": "x", "external_id": "b"}\n')
    assert import_command("import_cases", path, dataset).startswith(
        "line 1: is not valid JSON: the key 'external_id' is repeated")
    assert not Case.objects.exists()


@pytest.mark.parametrize(("name", "value", "message"), HAZARDS, ids=IDS)
def test_import_labels_refuses_each_hazard_on_its_line(tmp_path, dataset, name, value, message):
    make_cases(dataset, 1)
    path = tmp_path / "labels.jsonl"
    path.write_text('{"external_id": "c000", "reviewer": "rita", "verdict": "pass"}\n'
                    f'{{"external_id": "c000", "reviewer": "rob", "verdict": "pass", "note": {value}}}\n')
    refused = import_command("import_labels", path, dataset, rubric="new-rubric")
    assert refused.startswith("line 2: is not valid JSON") and message in refused
    assert not Label.objects.exists() and not Rubric.objects.exists()


@pytest.mark.parametrize(("name", "value", "message"), HAZARDS, ids=IDS)
def test_import_judgments_refuses_each_hazard_on_its_line(tmp_path, dataset, rubric, lead, name, value, message):
    make_cases(dataset, 1)
    jsonl = tmp_path / "judgments.jsonl"
    jsonl.write_text('{"external_id": "c000", "repeat": 1, "verdict": "pass"}\n'
                     f'{{"external_id": "c000", "repeat": 2, "verdict": "pass", "scores": {{"s": {value}}}}}\n')
    csv = tmp_path / "judgments.csv"
    csv.write_text('external_id,repeat,verdict,scores\nc000,1,pass,\nc000,2,pass,"{""s"": '
                   + value.replace('"', '""') + '}"\n')

    refused = import_command("import_judgments", jsonl, dataset, rubric=rubric.slug)
    assert refused.startswith("line 2: is not valid JSON") and message in refused
    refused = import_command("import_judgments", csv, dataset, rubric=rubric.slug)
    assert refused.startswith("line 3: scores: must be JSON text in its CSV cell") and message in refused
    assert not Run.objects.exists()


@pytest.mark.parametrize(("name", "value", "message"), HAZARDS, ids=IDS)
def test_the_upload_page_lists_each_hazard_on_its_line(lead_client, dataset, name, value, message):
    content = f'{GOOD}\n{{"external_id": "b", "input": "q", "output": "a", "trace": {{"x": {value}}}}}\n'
    response = lead_client.post(reverse("labeling:dataset_import", args=[TEST_PROJECT, dataset.slug]), {
        "kind": "cases", "cases-file": SimpleUploadedFile("cases.jsonl", content.encode()),
    })
    assert response.status_code == 200
    [error] = response.context["rejected"]["errors"]
    assert error.row == 2 and message in error.message
    assert not Case.objects.exists()


@pytest.fixture
def ingest(client, lead):
    raw = ApiToken.issue(project=store_project(), name="ingest", scopes=[Scope.CASES_WRITE], created_by=lead)[1]

    def post(body: str, query: str = ""):
        return client.post(reverse("labeling:api_cases_ingest", args=["store-support"]) + query,
                           data=body.encode("utf-8", "surrogatepass"), content_type="application/json",
                           headers={"Authorization": f"Bearer {raw}"})

    return post


@pytest.mark.parametrize(("name", "value", "message"), HAZARDS, ids=IDS)
def test_the_ingest_api_answers_each_hazard_with_a_json_400_at_its_index(ingest, dataset, name, value, message):
    response = ingest(f'[{GOOD}, {{"external_id": "b", "input": "q", "output": "a", "metadata": {value}}}]')

    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    [error] = response.json()["errors"]
    assert error["index"] == 1 and message in error["message"]
    assert not Case.objects.exists()


def test_the_ingest_api_refuses_a_raw_lone_surrogate_as_text_that_is_not_utf8(ingest, dataset):
    response = ingest('{"external_id": "a", "input": "\ud800", "output": "x"}')
    assert response.status_code == 400 and "not UTF-8" in response.json()["errors"][0]["message"]


# --- the camelCase golden-dataset names -------------------------------------------------------------

GOLDEN = {
    "id": "g1", "question": "Can I return it?", "answer": "Yes, within 30 days.", "goldenAnswer": "Yes.",
    "expectedBehavior": "cite the policy", "expectedTool": "lookup_order", "expectedToolArgument": {"order": 1},
    "expectedSource": "returns.md", "category": "policy",
}
EXPECTED = {
    "external_id": "g1", "input": "Can I return it?", "output": "Yes, within 30 days.", "golden_answer": "Yes.",
    "expected_behaviour": "cite the policy", "expected_tool": "lookup_order",
    "expected_tool_argument": {"order": 1}, "expected_source": "returns.md", "category": "policy",
}


def stored(external_id: str = "g1") -> dict:
    case = Case.objects.get(external_id=external_id)
    return {name: getattr(case, name) for name in EXPECTED}


def test_camel_case_cases_import_from_jsonl_csv_and_the_api(tmp_path, dataset, other_dataset, ingest):
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps(GOLDEN) + "\n")
    call_command("import_cases", dataset.slug, str(path), stdout=StringIO(), stderr=StringIO())
    assert stored() == EXPECTED

    csv = tmp_path / "cases.csv"
    csv.write_text("id,question,answer,goldenAnswer,expectedBehaviour,expectedTool,expectedToolArgument,"
                   'expectedSource,category\ng1,Can I return it?,"Yes, within 30 days.",Yes.,cite the policy,'
                   'lookup_order,"{""order"": 1}",returns.md,policy\n')
    call_command("import_cases", other_dataset.slug, str(csv), stdout=StringIO(), stderr=StringIO())
    assert {name: getattr(other_dataset.cases.get(), name) for name in EXPECTED} == EXPECTED

    Case.objects.all().delete()
    assert ingest(json.dumps([GOLDEN])).status_code == 201
    assert stored() == EXPECTED


def test_a_field_named_both_ways_is_an_error_on_its_line(tmp_path, dataset, ingest):
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps(GOLDEN) + "\n" + json.dumps({**GOLDEN, "id": "g2", "output": "x"}) + "\n")
    assert import_command("import_cases", path, dataset).startswith(
        "line 2: output is given twice, as 'answer' and as 'output'")

    response = ingest(json.dumps([GOLDEN, {**GOLDEN, "external_id": "g3"}]))
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"index": 1, "field": None, "message": "external_id is given twice, as 'id' and as 'external_id'"},
    ]
    assert not Case.objects.exists()


def test_labels_and_judgments_accept_id_for_external_id(tmp_path, dataset, rubric, lead):
    make_cases(dataset, 1)
    labels = tmp_path / "labels.csv"
    labels.write_text("id,reviewer,verdict\nc000,rita,pass\n")
    call_command("import_labels", dataset.slug, str(labels), rubric=rubric.slug, stdout=StringIO(), stderr=StringIO())
    assert Label.objects.get().reviewer.username == "rita"

    judgments = tmp_path / "judgments.jsonl"
    judgments.write_text('{"id": "c000", "repeat": 1, "verdict": "fail"}\n')
    call_command("import_judgments", dataset.slug, str(judgments), rubric=rubric.slug, stdout=StringIO(),
                 stderr=StringIO())
    assert Run.objects.get().judgments.get().outcome == "fail"
