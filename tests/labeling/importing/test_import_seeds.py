"""The seeds' files through the imports: a golden set with no output stored as null (no answer yet), served by the
cases API and never by the queue; humanVerdict rows imported as the importing person's labels, only by a signed-in
person (the import page, `import_cases --by`), never by the ingest API."""

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from evalhub.models import ApiToken, Scope
from labeling.importing import Format, ImportRejected
from labeling.importing.cases import cases_import
from labeling.models import Case, Label
from labeling.queue.selectors import dataset_tallies, next_case, queues_for
from tests.conftest import TEST_PROJECT, store_project
from tests.labeling.queue_helpers import make_case

pytestmark = pytest.mark.django_db

GOLDEN = [
    {"id": f"gs-{i}", "question": f"Can I return order {i}?", "goldenAnswer": "Within 30 days.",
     "expectedBehaviour": "Cite the window.", "expectedTool": "lookup_order", "expectedToolArgument": {"order": i},
     "expectedSource": "policy-returns"}
    for i in range(3)
]
VERDICTS = [
    {"input": "Can I return shoes?", "answer": "Yes, within 30 days.", "humanVerdict": "PASS", "id": "v-1"},
    {"input": "Can I return a gift card?", "answer": "Yes, anytime.", "humanVerdict": "Fail.", "id": "v-2"},
]


def jsonl(rows) -> io.BytesIO:
    return io.BytesIO("".join(json.dumps(row) + "\n" for row in rows).encode())


def errors_of(**kwargs) -> list[tuple]:
    with pytest.raises(ImportRejected) as info:
        cases_import(**kwargs)
    return [(e.row, e.field, e.message) for e in info.value.errors]


def test_a_golden_set_imports_with_no_answer_yet_and_the_queue_never_serves_it(dataset, rubric, reviewer):
    result = cases_import(dataset=dataset, stream=jsonl(GOLDEN), fmt=Format.JSONL)
    assert result.created == 3
    assert list(dataset.cases.values_list("output", flat=True)) == [None, None, None]
    answered = make_case(dataset, "answered")
    assert next_case(dataset=dataset, rubric=rubric, reviewer=reviewer) == answered
    # Nor counts as work left: only the answered case.
    assert dataset_tallies(dataset=dataset, rubric=rubric)["cases"] == 1
    queues = queues_for(project=dataset.project, user=reviewer, role="reviewer")
    [queue] = [q for q in queues if q["dataset"] == dataset and q["rubric"] == rubric]
    assert queue["left"] == 1
    answered.delete()
    assert next_case(dataset=dataset, rubric=rubric, reviewer=reviewer) is None


def test_a_csv_golden_set_without_an_output_column_imports(dataset):
    text = ("id,question,goldenAnswer,expectedBehaviour,expectedTool,expectedToolArgument,expectedSource\n"
            'gs-1,Can I return it?,Within 30 days.,Cite the window.,lookup_order,"{""order"": 1}",policy-returns\n')
    cases_import(dataset=dataset, stream=io.BytesIO(text.encode()), fmt=Format.CSV)
    case = Case.objects.get()
    assert (case.output, case.expected_tool_argument, case.expected_source) == (None, {"order": 1}, "policy-returns")


def test_the_cases_api_and_the_export_serve_cases_with_no_answer_yet(client, dataset, lead):
    cases_import(dataset=dataset, stream=jsonl(GOLDEN[:1]), fmt=Format.JSONL)
    token = ApiToken.issue(project=store_project(), name="ci", scopes=[Scope.CASES_READ], created_by=lead)[1]
    response = client.get(reverse("labeling:api_cases_ingest", args=[dataset.slug]),
                          headers={"Authorization": f"Bearer {token}"})
    [line] = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert line["external_id"] == "gs-0" and "output" not in line  # a cases line never carries the answer
    client.force_login(lead)
    exported = client.get(reverse("labeling:dataset_export", args=[TEST_PROJECT, dataset.slug, "cases"]))
    [record] = [json.loads(line) for line in b"".join(exported.streaming_content).decode().splitlines()]
    assert record["output"] is None
    page = client.get(reverse("labeling:case_detail", args=[TEST_PROJECT, Case.objects.get().pk])).text
    assert 'data-testid="no-answer-yet"' in page


def test_human_verdict_rows_import_as_the_importing_persons_labels(dataset, rubric, lead):
    result = cases_import(dataset=dataset, stream=jsonl(VERDICTS), fmt=Format.JSONL, rubric=rubric, by=lead)
    assert (result.created, result.labeled) == (2, 2)
    labels = {label.case.external_id: label for label in Label.objects.select_related("case")}
    assert {eid: label.verdict for eid, label in labels.items()} == {"v-1": "pass", "v-2": "fail"}
    assert all(label.reviewer == lead and label.rubric == rubric for label in labels.values())
    assert all(label.content_hash == label.case.content_hash for label in labels.values())  # they count
    # The same file again changes nothing; a changed verdict revises the one label.
    again = cases_import(dataset=dataset, stream=jsonl(VERDICTS), fmt=Format.JSONL, rubric=rubric, by=lead,
                         update=True)
    assert (again.unchanged, Label.objects.count()) == (2, 2)
    flipped = [VERDICTS[0] | {"humanVerdict": "fail"}]
    cases_import(dataset=dataset, stream=jsonl(flipped), fmt=Format.JSONL, rubric=rubric, by=lead, update=True)
    assert Label.objects.get(case__external_id="v-1").verdict == "fail" and Label.objects.count() == 2


def test_human_verdict_rows_need_a_rubric_and_write_nothing_without_one(dataset, lead):
    errors = errors_of(dataset=dataset, stream=jsonl(GOLDEN + VERDICTS), fmt=Format.JSONL, by=lead)
    assert errors == [(None, "rubric", "2 row(s) carry a humanVerdict (first at line 4): name the rubric they "
                                       "answer (on the import page; import_cases --rubric RUBRIC --by USER)")]
    assert not Case.objects.exists() and not Label.objects.exists()


def test_a_bad_human_verdict_rejects_the_file(dataset, rubric, lead):
    rows = [VERDICTS[0], VERDICTS[1] | {"humanVerdict": "maybe"}]
    errors = errors_of(dataset=dataset, stream=jsonl(rows), fmt=Format.JSONL, rubric=rubric, by=lead)
    assert errors == [(2, "humanVerdict", "must be pass or fail (any case or punctuation), not 'maybe'")]
    assert not Case.objects.exists() and not Label.objects.exists()


def test_import_cases_takes_the_rubric_and_the_reviewer(tmp_path, dataset, rubric, reviewer, capsys):
    path = tmp_path / "verdicts.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in VERDICTS))
    with pytest.raises(CommandError, match="--rubric and --by go together"):
        call_command("import_cases", dataset.slug, str(path), "--rubric", rubric.slug)
    with pytest.raises(CommandError, match="No active user 'nobody'"):
        call_command("import_cases", dataset.slug, str(path), "--rubric", rubric.slug, "--by", "nobody")
    with pytest.raises(CommandError, match="rejected"):
        call_command("import_cases", dataset.slug, str(path))
    assert "name the rubric they answer" in capsys.readouterr().err
    call_command("import_cases", dataset.slug, str(path), "--rubric", rubric.slug, "--by", reviewer.username)
    assert "2 human verdict(s) imported as labels" in capsys.readouterr().out
    assert set(Label.objects.values_list("reviewer__username", "verdict")) == {(reviewer.username, "pass"),
                                                                                (reviewer.username, "fail")}


def test_the_import_page_labels_as_the_signed_in_lead(lead_client, lead, dataset, rubric):
    upload = io.BytesIO("".join(json.dumps(row) + "\n" for row in VERDICTS).encode())
    upload.name = "verdicts.jsonl"
    response = lead_client.post(reverse("labeling:dataset_import", args=[TEST_PROJECT, dataset.slug]),
                                {"kind": "cases", "cases-file": upload, "cases-format": "",
                                 "cases-rubric": rubric.slug})
    assert response.status_code == 302
    assert set(Label.objects.values_list("reviewer__username", "verdict")) == {(lead.username, "pass"),
                                                                                (lead.username, "fail")}


def test_the_ingest_api_refuses_human_verdicts(client, dataset, lead):
    token = ApiToken.issue(project=store_project(), name="ingest", scopes=[Scope.CASES_WRITE], created_by=lead)[1]
    response = client.post(reverse("labeling:api_cases_ingest", args=[dataset.slug]), data=json.dumps(VERDICTS),
                           content_type="application/json", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert [(e["index"], e["field"]) for e in errors] == [(0, "humanVerdict"), (1, "humanVerdict")]
    assert "never with a token" in errors[0]["message"]
    assert not Case.objects.exists() and not Label.objects.exists()
    # The golden set and the flat reply come in through the API unchanged.
    flat = {"id": "t-1", "question": "q", "answer": "a", "toolCalls": [{"name": "lookup_order"}]}
    response = client.post(reverse("labeling:api_cases_ingest", args=[dataset.slug]), data=json.dumps([*GOLDEN, flat]),
                           content_type="application/json", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 201 and response.json()["created"] == 4
    assert Case.objects.get(external_id="t-1").trace == {"toolCalls": [{"name": "lookup_order"}]}


# --- projects: the verdicts' rubric and reviewer are of the dataset's project ---------------------------------------


def test_a_rubric_of_another_project_is_refused_and_nothing_is_written(dataset, lead, other_project):
    from labeling.models import Rubric

    theirs = Rubric.objects.create(project=other_project, slug="theirs", name="Q", criteria="")
    errors = errors_of(dataset=dataset, stream=jsonl(VERDICTS), fmt=Format.JSONL, rubric=theirs, by=lead)
    assert errors == [(None, "rubric", "the rubric theirs is not of this dataset's project: name one of its own")]
    assert not Case.objects.exists() and not Label.objects.exists()


def test_import_cases_takes_the_rubric_and_the_reviewer_of_the_project(tmp_path, dataset, rubric, other_lead):
    from labeling.models import Rubric

    Rubric.objects.create(project=other_lead.memberships.get().project, slug="theirs", name="Q", criteria="")
    path = tmp_path / "verdicts.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in VERDICTS))
    with pytest.raises(CommandError, match="No rubric 'theirs' in the project store"):
        call_command("import_cases", dataset.slug, str(path), "--project", "store", "--rubric", "theirs",
                     "--by", "otto")
    with pytest.raises(CommandError, match="'otto' is not a member of the project store"):
        call_command("import_cases", dataset.slug, str(path), "--project", "store", "--rubric", rubric.slug,
                     "--by", "otto")
    assert not Case.objects.exists() and not Label.objects.exists()
