"""The import and export commands name a dataset (and a rubric) by slug, which is unique within a project only:
with more than one project they need --project (or EVALHUB_PROJECT), and then read and write that project's."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from labeling.importing import Format
from labeling.importing.cases import cases_import
from labeling.models import Case, Dataset, Label, Rubric
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

SLUG = "support"


def jsonl(*objects) -> bytes:
    return "".join(json.dumps(o) + "\n" for o in objects).encode()


@pytest.fixture
def twins(project, other_project):
    """The same dataset and rubric slugs in both projects, each with a case and a label of its own."""
    made = {}
    for owner in (project, other_project):
        dataset = Dataset.objects.create(project=owner, slug=SLUG, name=f"{owner.slug} support")
        rubric = Rubric.objects.create(project=owner, slug="tone", name="Polite?", criteria="")
        cases_import(dataset=dataset, stream=io.BytesIO(jsonl(
            {"external_id": f"{owner.slug}-case", "input": f"asked at {owner.slug}", "output": "a"}
        )), fmt=Format.JSONL)
        case = dataset.cases.get()
        reviewer = make_user(f"{owner.slug}-rev", project=owner)
        dataset.reviewers.add(reviewer)  # a labels import names only reviewers assigned to its dataset
        Label.objects.create(case=case, rubric=rubric, reviewer=reviewer, verdict="pass",
                             content_hash=case.content_hash)
        made[owner.slug] = dataset
    return made


def commands(tmp_path) -> dict[str, list[str]]:
    source = tmp_path / "in.jsonl"
    source.write_bytes(jsonl({"external_id": "new", "input": "q", "output": "a"}))
    return {
        "import_cases": ["import_cases", SLUG, str(source)],
        "import_labels": ["import_labels", SLUG, str(source), "--rubric", "tone"],
        "export_cases": ["export_cases", SLUG, str(tmp_path / "out.jsonl")],
        "export_labels": ["export_labels", SLUG, str(tmp_path / "out.jsonl"), "--rubric", "tone"],
        "export_report": ["export_report", SLUG, str(tmp_path / "out.csv")],
    }


@pytest.mark.parametrize("name", ["import_cases", "import_labels", "export_cases", "export_labels", "export_report"])
def test_with_two_projects_a_command_needs_the_project_and_names_them(twins, tmp_path, name, monkeypatch):
    monkeypatch.delenv("EVALHUB_PROJECT", raising=False)
    with pytest.raises(CommandError) as refused:
        call_command(*commands(tmp_path)[name])
    assert str(refused.value) == ("This instance holds more than one project: name one with --project SLUG. "
                                  "Projects: shopnest, store.")
    with pytest.raises(CommandError, match="No project 'nope'. Projects: shopnest, store."):
        call_command(*commands(tmp_path)[name], "--project", "nope")
    assert Case.objects.count() == 2 and Label.objects.count() == 2 and not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("chosen", ["store", "shopnest"])
def test_the_exports_read_the_chosen_projects_dataset(twins, tmp_path, chosen, capsys):
    call_command("export_cases", SLUG, str(tmp_path / "cases.jsonl"), "--project", chosen)
    call_command("export_labels", SLUG, str(tmp_path / "labels.jsonl"), "--rubric", "tone", "--project", chosen)
    call_command("export_report", SLUG, str(tmp_path / "report.csv"), "--project", chosen)

    other = {"store": "shopnest", "shopnest": "store"}[chosen]
    cases = [json.loads(line) for line in (tmp_path / "cases.jsonl").read_text().splitlines()]
    assert [case["external_id"] for case in cases] == [f"{chosen}-case"]
    labels = [json.loads(line) for line in (tmp_path / "labels.jsonl").read_text().splitlines()]
    assert [(label["external_id"], label["reviewer"]) for label in labels] == [(f"{chosen}-case", f"{chosen}-rev")]
    report = (tmp_path / "report.csv").read_text()
    assert f"asked at {chosen}" in report and other not in report


def test_the_environment_names_the_project_too(twins, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALHUB_PROJECT", "shopnest")
    call_command("export_cases", SLUG, str(tmp_path / "cases.jsonl"))
    assert "shopnest-case" in (tmp_path / "cases.jsonl").read_text()


def test_the_imports_write_into_the_chosen_projects_dataset(twins, tmp_path):
    source = tmp_path / "cases.jsonl"
    source.write_bytes(jsonl({"external_id": "new", "input": "q", "output": "a"}))
    call_command("import_cases", SLUG, str(source), "--project", "shopnest")
    assert list(Case.objects.filter(external_id="new").values_list("dataset", flat=True)) == [twins["shopnest"].pk]

    labels = tmp_path / "labels.jsonl"
    labels.write_bytes(jsonl({"external_id": "new", "reviewer": "shopnest-rev", "verdict": "fail"}))
    call_command("import_labels", SLUG, str(labels), "--rubric", "tone", "--project", "shopnest")
    label = Label.objects.select_related("rubric__project", "case__dataset").get(case__external_id="new")
    assert (label.rubric.project.slug, label.case.dataset) == ("shopnest", twins["shopnest"])
    # A dataset new to the project is made in it, though the other project has none of the slug either.
    call_command("import_cases", "fresh", str(source), "--project", "shopnest")
    assert list(Dataset.objects.filter(slug="fresh").values_list("project__slug", flat=True)) == ["shopnest"]


def test_a_slug_of_another_project_is_unknown(twins, tmp_path, other_project):
    Dataset.objects.create(project=other_project, slug="theirs-only", name="x")
    with pytest.raises(CommandError, match="No dataset 'theirs-only' in the project store"):
        call_command("export_cases", "theirs-only", str(tmp_path / "out.jsonl"), "--project", "store")
    Rubric.objects.create(project=other_project, slug="their-rubric", name="x", criteria="")
    with pytest.raises(CommandError, match="No rubric 'their-rubric' in the project store"):
        call_command("export_labels", SLUG, str(tmp_path / "out.jsonl"), "--rubric", "their-rubric",
                     "--project", "store")
