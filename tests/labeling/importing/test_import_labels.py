import io
import json

import pytest
from django.core.management import CommandError, call_command

from evalhub.models import MemberEvent, Membership, Role, User
from labeling.importing import Format, ImportRejected
from labeling.importing.labels import labels_import
from labeling.models import Case, Dataset, Label, Rubric, labeled_content_hash
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def cases(dataset) -> dict[str, Case]:
    made = {}
    for external_id in ("a", "b"):
        made[external_id] = Case.objects.create(
            dataset=dataset, external_id=external_id, input="q", output=f"answer {external_id}", split="dev",
            content_hash=labeled_content_hash(input="q", output=f"answer {external_id}", trace={}),
        )
    return made


def jsonl(*objects) -> bytes:
    return "".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objects).encode()


def run(dataset, content: bytes, rubric_slug="return-policy", fmt=Format.JSONL, by=None):
    return labels_import(dataset=dataset, rubric_slug=rubric_slug, stream=io.BytesIO(content), fmt=fmt, by=by)


def rejected(dataset, content: bytes, **kwargs) -> list[tuple]:
    with pytest.raises(ImportRejected) as info:
        run(dataset, content, **kwargs)
    return [(e.row, e.field, e.message) for e in info.value.errors]


def test_it_creates_labels_against_the_current_content(dataset, rubric, cases, reviewer):
    result = run(dataset, jsonl(
        {"external_id": "a", "reviewer": "rita", "verdict": " PASS ", "note": "cites the window"},
        {"external_id": "b", "reviewer": "rita", "verdict": "Fail"},
    ))

    assert (result.created, result.revised, result.unchanged) == (2, 0, 0)
    assert not result.rubric_created and result.new_reviewers == []
    labels = {label.case.external_id: label for label in Label.objects.select_related("case")}
    assert (labels["a"].verdict, labels["a"].note, labels["b"].verdict) == ("pass", "cites the window", "fail")
    assert all(label.content_hash == label.case.content_hash for label in labels.values())
    assert all(label.rubric == rubric and label.reviewer == reviewer for label in labels.values())


def test_it_creates_the_rubric_as_a_draft_and_reviewers_without_a_password(dataset, cases, lead, other_project):
    result = run(dataset, jsonl({"external_id": "a", "reviewer": "newbie", "verdict": "pass"}),
                 rubric_slug="tone", by=lead)

    assert result.rubric_created and result.new_reviewers == ["newbie"]
    rubric = Rubric.objects.get(slug="tone")
    assert rubric.stage == Rubric.Stage.DRAFT and rubric.project == dataset.project
    newbie = User.objects.get(username="newbie")
    assert not newbie.has_usable_password()
    # A reviewer of the dataset's project, and of no other; the membership is audited.
    assert list(newbie.memberships.values_list("project__slug", "role")) == [(dataset.project.slug, Role.REVIEWER)]
    assert newbie.role_in(other_project) is None
    assert dataset.reviewers.filter(pk=newbie.pk).exists()
    event = MemberEvent.objects.get(subject="newbie")
    assert (event.project, event.kind, event.by) == (dataset.project, MemberEvent.Kind.ADDED, lead)


def test_it_revises_a_reviewers_existing_label(dataset, rubric, cases, reviewer):
    stale = Label.objects.create(case=cases["a"], rubric=rubric, reviewer=reviewer, verdict="fail",
                                 content_hash="0" * 64)
    kept = Label.objects.create(case=cases["b"], rubric=rubric, reviewer=reviewer, verdict="pass",
                                content_hash=cases["b"].content_hash)

    result = run(dataset, jsonl(
        {"external_id": "a", "reviewer": "rita", "verdict": "pass", "note": "re-checked"},
        {"external_id": "b", "reviewer": "rita", "verdict": "pass", "note": ""},
    ))

    assert (result.created, result.revised, result.unchanged) == (0, 1, 1)
    stale.refresh_from_db()
    assert (stale.verdict, stale.note, stale.content_hash) == ("pass", "re-checked", cases["a"].content_hash)
    assert Label.objects.get(pk=kept.pk).updated_at == kept.updated_at
    assert Label.objects.count() == 2


@pytest.mark.parametrize(
    ("row", "field", "message"),
    [
        ({"external_id": "zzz", "reviewer": "rita", "verdict": "pass"}, "external_id", "is not a case of"),
        ({"external_id": "a", "reviewer": "rita", "verdict": "maybe"}, "verdict", "must be pass or fail"),
        ({"external_id": "a", "reviewer": "rita"}, "verdict", "is required"),
        ({"external_id": "a", "verdict": "pass"}, "reviewer", "is required"),
        ({"external_id": "a", "reviewer": "rita ann", "verdict": "pass"}, "reviewer", "not a valid username"),
        ({"external_id": "a", "reviewer": "rita", "verdict": "pass", "note": 3}, "note", "must be a string"),
        ({"external_id": "a", "reviewer": "rita", "verdict": "pass", "score": 3}, "score", "not a label field"),
        ({"external_id": "b", "reviewer": "rob", "verdict": "fail"}, "reviewer", "labels 'b' twice"),
    ],
)
def test_it_rejects_a_bad_row_and_writes_nothing(dataset, cases, row, field, message):
    content = jsonl({"external_id": "b", "reviewer": "rob", "verdict": "pass"}, row)

    errors = rejected(dataset, content, rubric_slug="new-rubric")

    assert [(r, f) for r, f, _ in errors] == [(2, field)]
    assert message in errors[0][2]
    assert not Label.objects.exists()
    assert not Rubric.objects.filter(slug="new-rubric").exists()
    assert not User.objects.filter(username="rob").exists()


def test_it_imports_csv_labels(dataset, rubric, cases):
    content = b'external_id,reviewer,verdict,note\r\na,rita,pass,"fine, really"\r\nb,rob,fail,\r\n'
    assert run(dataset, content, fmt=Format.CSV).created == 2
    assert set(Label.objects.values_list("reviewer__username", "verdict", "note")) == {
        ("rita", "pass", "fine, really"), ("rob", "fail", ""),
    }


def test_it_refuses_a_bad_rubric_slug(dataset, cases):
    errors = rejected(dataset, jsonl({"external_id": "a", "reviewer": "rita", "verdict": "pass"}),
                      rubric_slug="not a slug")
    assert errors == [(None, "rubric", "'not a slug' is not a valid slug")]


def test_the_command_imports_and_lists_errors(dataset, cases, tmp_path, capsys):
    good, bad = tmp_path / "labels.jsonl", tmp_path / "bad.csv"
    good.write_bytes(jsonl({"external_id": "a", "reviewer": "rita", "verdict": "pass"}))
    bad.write_bytes(b"external_id,reviewer,verdict\r\nnope,rita,pass\r\na,rita,yes\r\n")

    call_command("import_labels", dataset.slug, str(good), "--rubric", "tone")
    assert "1 created, 0 revised, 0 unchanged" in capsys.readouterr().out

    with pytest.raises(CommandError, match="2 error"):
        call_command("import_labels", dataset.slug, str(bad), "--rubric", "tone")
    err = capsys.readouterr().err
    assert "line 2: external_id: 'nope' is not a case" in err and "line 3: verdict" in err

    with pytest.raises(CommandError, match="No dataset"):
        call_command("import_labels", "missing", str(good), "--rubric", "tone")


# --- projects ----------------------------------------------------------------------------------------------------


def test_an_account_that_is_not_a_member_of_the_project_is_refused_and_nothing_is_written(dataset, cases,
                                                                                          other_lead):
    errors = rejected(dataset, jsonl({"external_id": "a", "reviewer": "rita", "verdict": "pass"},
                                     {"external_id": "b", "reviewer": "otto", "verdict": "fail"},
                                     {"external_id": "a", "reviewer": "otto", "verdict": "fail"}))

    assert errors == [(2, "reviewer", "'otto' is not a member of this project: invite them to it first (a name new "
                                      "to evalhub gets a reviewer account here)")]
    assert not Label.objects.exists() and not User.objects.filter(username="rita").exists()
    assert other_lead.role_in(dataset.project) is None and not dataset.reviewers.exists()
    assert not Membership.objects.filter(project=dataset.project).exists()


def test_members_of_the_project_of_any_role_and_the_admin_may_be_named(dataset, cases, lead, admin_user):
    result = run(dataset, jsonl({"external_id": "a", "reviewer": "lena", "verdict": "pass"},
                                {"external_id": "a", "reviewer": "ada", "verdict": "fail"}), rubric_slug="tone")
    assert (result.created, result.new_reviewers) == (2, [])
    assert not MemberEvent.objects.exists()


def test_a_reviewer_not_assigned_to_the_dataset_is_refused_not_silently_assigned(dataset, cases, reviewer,
                                                                                  outsider, lead):
    content = jsonl({"external_id": "a", "reviewer": "rita", "verdict": "pass"},
                    {"external_id": "a", "reviewer": "olga", "verdict": "fail"})

    errors = rejected(dataset, content, by=lead)

    assert errors == [(2, "reviewer", "'olga' is a reviewer of this project not assigned to the dataset "
                                      "store-support: assign them first (the members page), or import with the "
                                      "reviewers assigned (it opens the dataset's cases to them)")]
    assert not dataset.reviewers.filter(pk=outsider.pk).exists() and not Label.objects.exists()
    assert not MemberEvent.objects.exists()


def test_asked_to_the_import_assigns_them_says_so_and_audits_it(dataset, cases, reviewer, outsider, lead):
    result = labels_import(dataset=dataset, rubric_slug="tone", fmt=Format.JSONL, by=lead, assign_reviewers=True,
                           stream=io.BytesIO(jsonl({"external_id": "a", "reviewer": "olga", "verdict": "fail"},
                                                   {"external_id": "b", "reviewer": "rita", "verdict": "pass"})))

    assert result.assigned_reviewers == ["olga"] and result.new_reviewers == []
    assert "reviewers now assigned to the dataset: olga" in str(result)
    assert set(dataset.reviewers.values_list("username", flat=True)) == {"rita", "olga"}
    event = MemberEvent.objects.get()
    assert (event.kind, event.subject, event.by) == (MemberEvent.Kind.ASSIGNMENTS_SET, "olga", lead)


def test_a_lead_named_in_the_file_is_not_assigned(dataset, cases, lead):
    run(dataset, jsonl({"external_id": "a", "reviewer": "lena", "verdict": "pass"}))

    assert not dataset.reviewers.exists()  # leads label every dataset of their project without one


def test_the_command_refuses_an_unassigned_reviewer_unless_told(dataset, cases, outsider, tmp_path, capsys):
    path = tmp_path / "labels.jsonl"
    path.write_bytes(jsonl({"external_id": "a", "reviewer": "olga", "verdict": "pass"}))

    with pytest.raises(CommandError, match="1 error"):
        call_command("import_labels", dataset.slug, str(path), "--rubric", "tone")
    assert "'olga' is a reviewer of this project not assigned" in capsys.readouterr().err
    call_command("import_labels", dataset.slug, str(path), "--rubric", "tone", "--assign-reviewers")
    assert "reviewers now assigned to the dataset: olga" in capsys.readouterr().out


def test_the_import_page_refuses_then_assigns_when_ticked(dataset, cases, outsider, lead_client):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    url = reverse("labeling:dataset_import", args=[dataset.project.slug, dataset.slug])

    def post(**extra):
        upload = SimpleUploadedFile("labels.jsonl", jsonl({"external_id": "a", "reviewer": "olga", "verdict": "pass"}))
        return lead_client.post(url, {"kind": "labels", "labels-rubric": "tone", "labels-file": upload, **extra},
                                follow=True)

    Rubric.objects.create(project=dataset.project, slug="tone", name="Tone", criteria="")
    refused = post()
    assert "not assigned to the dataset store-support" in refused.content.decode()
    assert not dataset.reviewers.exists()
    done = post(**{"labels-assign_reviewers": "on"})
    assert "reviewers now assigned to the dataset: olga" in done.content.decode()
    assert list(dataset.reviewers.values_list("username", flat=True)) == ["olga"]


def test_the_rubric_is_the_datasets_projects_even_when_another_project_has_the_slug(dataset, cases, rubric,
                                                                                    other_project):
    theirs = Rubric.objects.create(project=other_project, slug="tone", name="Their tone", criteria="")

    result = run(dataset, jsonl({"external_id": "a", "reviewer": "newbie", "verdict": "pass"}), rubric_slug="tone")

    ours = Rubric.objects.get(project=dataset.project, slug="tone")
    assert result.rubric_created and ours != theirs
    assert list(Label.objects.values_list("rubric", flat=True)) == [ours.pk]
    assert not theirs.labels.exists()


def test_the_command_takes_the_project_of_the_dataset(dataset, cases, other_project, tmp_path, capsys):
    theirs = Dataset.objects.create(project=other_project, slug=dataset.slug, name="Theirs")
    Case.objects.create(dataset=theirs, external_id="a", input="q", output="x", split="dev", content_hash="h")
    theirs.reviewers.add(make_user("sam", role=Role.REVIEWER, project=other_project))
    path = tmp_path / "labels.jsonl"
    path.write_bytes(jsonl({"external_id": "a", "reviewer": "sam", "verdict": "pass"}))

    with pytest.raises(CommandError, match="more than one project.*Projects: shopnest, store"):
        call_command("import_labels", dataset.slug, str(path), "--rubric", "tone")
    call_command("import_labels", dataset.slug, str(path), "--rubric", "tone", "--project", "shopnest")

    label = Label.objects.select_related("case__dataset", "rubric__project").get()
    assert (label.case.dataset, label.rubric.project) == (theirs, other_project)
    assert not Rubric.objects.filter(project=dataset.project, slug="tone").exists()
    assert "Imported" in capsys.readouterr().out
