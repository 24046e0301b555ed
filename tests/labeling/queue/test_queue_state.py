"""The queue's stored state (CaseTally, Label.stale, Label.dataset) stays true whoever writes the rows.

The database triggers keep it; these tests write rows every way the project does (services, ORM
create, bulk_create, queryset update and delete, cascades) and compare with counts made from scratch.
"""

import random

import pytest
from django.db.models import Count, F

from labeling.disputes import services as dispute_services
from labeling.models import Case, CaseTally, Label, LabelRequest, Rubric, Skip
from labeling.queue import services
from tests.conftest import make_user
from tests.labeling.queue_helpers import change_content, give_label, make_case, make_cases, make_queue


def assert_state_is_true() -> None:
    """One tally row per case and rubric of the same project (a rubric applies to its own project's cases only,
    migration 0018_projects), and none for a case and another project's rubric."""
    expected = {}
    for case in Case.objects.select_related("dataset"):
        for rubric in Rubric.objects.filter(project_id=case.dataset.project_id):
            expected[(case.pk, rubric.pk)] = (
                Label.objects.filter(case=case, rubric=rubric).count(),
                LabelRequest.objects.filter(case=case, rubric=rubric).count(),
            )
    stored = {(t.case_id, t.rubric_id): (t.labels, t.requested) for t in CaseTally.objects.all()}
    assert stored == expected
    assert not CaseTally.objects.exclude(dataset=F("case__dataset")).exists()
    for label in Label.objects.select_related("case"):
        assert label.stale == (label.content_hash != label.case.content_hash)
        assert label.dataset_id == label.case.dataset_id


def test_rows_exist_for_every_case_and_rubric_whichever_comes_first(dataset, rubric):
    make_cases(dataset, 2)
    Rubric.objects.create(project=dataset.project, slug="later", name="Later?", criteria="…")
    make_case(dataset, "after")
    assert CaseTally.objects.count() == 3 * 2
    assert_state_is_true()


def test_label_counts_follow_every_kind_of_write(dataset, other_dataset, rubric, reviewer, second_reviewer, lead):
    cases = make_cases(dataset, 4) + make_cases(other_dataset, 2, prefix="o")
    give_label(cases[0], rubric, reviewer)
    services.label_submit(case=cases[1], rubric=rubric, reviewer=reviewer, verdict="fail",
                          content_hash=cases[1].content_hash)
    Label.objects.bulk_create([
        Label(case=case, rubric=rubric, reviewer=second_reviewer, verdict="pass", content_hash=case.content_hash)
        for case in cases
    ])
    dispute_services.request_another_label(case=cases[0], rubric=rubric, by=lead)
    assert_state_is_true()
    Label.objects.filter(case__in=cases[:2], reviewer=second_reviewer).delete()
    LabelRequest.objects.all().delete()
    assert_state_is_true()
    cases[5].delete()  # cascades to its labels and tally rows
    assert_state_is_true()


def test_stale_flags_follow_content_changes_however_they_are_written(dataset, rubric, reviewer, second_reviewer):
    a, b, c = make_cases(dataset, 3)
    for case in (a, b, c):
        give_label(case, rubric, reviewer)
    change_content(a, "changed with save()")
    Case.objects.filter(pk=b.pk).update(content_hash="f" * 64)  # a bulk update skips Python hooks
    assert set(Label.objects.filter(stale=True).values_list("case_id", flat=True)) == {a.pk, b.pk}
    Case.objects.filter(pk=b.pk).update(content_hash=b.content_hash)  # changed back: counts again
    assert set(Label.objects.filter(stale=True).values_list("case_id", flat=True)) == {a.pk}
    assert_state_is_true()


def test_state_stays_true_under_random_writes(dataset, rubric, lead):
    rng = random.Random(7)
    reviewers = [make_user(f"rand{i}") for i in range(4)]
    rubrics = [rubric, Rubric.objects.create(project=rubric.project, slug="second", name="Second?", criteria="…")]
    cases = make_cases(dataset, 12)
    for _ in range(300):
        case, rub, who = rng.choice(cases), rng.choice(rubrics), rng.choice(reviewers)
        action = rng.random()
        if action < 0.5:
            services.label_submit(case=case, rubric=rub, reviewer=who, verdict=rng.choice(["pass", "fail"]),
                                  content_hash=rng.choice([case.content_hash, "0" * 64]))
        elif action < 0.7:
            label = Label.objects.filter(case=case, rubric=rub, reviewer=who).first()
            if label:
                services.label_undo(label_id=label.pk, reviewer=who, dataset=dataset, rubric=rub,
                                    given_at=label.updated_at, created=label.previous is None)
        elif action < 0.8:
            change_content(case, f"output {rng.random()}")
        elif action < 0.9:
            try:
                dispute_services.request_another_label(case=case, rubric=rub, by=lead)
            except services.LabelingRefused:
                pass
        else:
            services.skip(case=case, rubric=rub, reviewer=who)
    assert_state_is_true()
    counted = dict(
        Label.objects.filter(rubric=rubric).values("case").annotate(n=Count("id")).values_list("case", "n")
    )
    assert {t.case_id: t.labels for t in CaseTally.objects.filter(rubric=rubric) if t.labels} == counted


def test_the_sqlite_triggers_keep_the_same_state():
    """The embedded default runs on SQLite: its dialect of the triggers, on the tables they touch."""
    import importlib
    import sqlite3

    up = importlib.import_module("labeling.migrations.0003_queue_triggers").SQLITE_UP
    dataset_up = importlib.import_module("labeling.migrations.0004_label_dataset").SQLITE_UP
    hold_up = importlib.import_module("labeling.migrations.0006_hold_ends_on_label").SQLITE_UP
    db = sqlite3.connect(":memory:")
    db.executescript("""
        CREATE TABLE labeling_rubric (id INTEGER PRIMARY KEY);
        CREATE TABLE labeling_case (id INTEGER PRIMARY KEY, dataset_id INTEGER, content_hash TEXT);
        CREATE TABLE labeling_label (id INTEGER PRIMARY KEY, case_id INTEGER, rubric_id INTEGER, reviewer_id INTEGER,
                                     content_hash TEXT, stale BOOL DEFAULT 0, dataset_id INTEGER);
        CREATE TABLE labeling_labelrequest (id INTEGER PRIMARY KEY, case_id INTEGER, rubric_id INTEGER);
        CREATE TABLE labeling_casetally (id INTEGER PRIMARY KEY, case_id INTEGER, rubric_id INTEGER, dataset_id INTEGER,
                                         labels INTEGER, requested INTEGER, claimed_by_id INTEGER,
                                         claimed_until TEXT, UNIQUE (case_id, rubric_id));
    """)
    for statement in up + dataset_up + hold_up:
        db.execute(statement)
    db.execute("INSERT INTO labeling_casetally (case_id, rubric_id, dataset_id, labels, requested, claimed_by_id, "
               "claimed_until) VALUES (1, 1, 7, 0, 0, 2, '2999-01-01')")  # case 1 is on reviewer 2's screen
    db.execute("INSERT INTO labeling_case VALUES (1, 7, 'h1')")
    db.execute("INSERT INTO labeling_rubric VALUES (1)")
    db.execute("INSERT INTO labeling_case VALUES (2, 7, 'h2')")
    insert_label = (
        "INSERT INTO labeling_label (id, case_id, rubric_id, reviewer_id, content_hash) VALUES (?, 1, 1, ?, ?)"
    )
    db.execute(insert_label, (1, 1, "h1"))
    db.execute(insert_label, (2, 2, "x"))
    db.execute("INSERT INTO labeling_labelrequest VALUES (1, 2, 1)")
    tallies = "SELECT case_id, dataset_id, labels, requested FROM labeling_casetally ORDER BY case_id"
    labels = "SELECT id, stale, dataset_id FROM labeling_label ORDER BY id"
    assert db.execute(tallies).fetchall() == [(1, 7, 2, 0), (2, 7, 0, 1)]
    # Reviewer 2 answered: their hold ended.
    assert db.execute("SELECT claimed_by_id, claimed_until FROM labeling_casetally WHERE case_id = 1").fetchall() == [
        (None, None)
    ]
    assert db.execute(labels).fetchall() == [(1, 0, 7), (2, 1, 7)]
    db.execute("UPDATE labeling_case SET content_hash = 'x' WHERE id = 1")
    assert db.execute(labels).fetchall() == [(1, 1, 7), (2, 0, 7)]
    db.execute("DELETE FROM labeling_label WHERE id = 1")
    db.execute("DELETE FROM labeling_labelrequest")
    assert db.execute(tallies).fetchall() == [(1, 7, 1, 0), (2, 7, 0, 0)]


def test_tally_rows_pair_cases_only_with_their_own_projects_rubrics(dataset, rubric, reviewer, other_project):
    """Two projects with the same slugs: whichever comes first, cases and rubrics pair within a project only, and
    the queue's writes never make (nor count into) a row across them."""
    make_cases(dataset, 2)
    shop_dataset, shop_rubric = make_queue(other_project)
    shop_cases = make_cases(shop_dataset, 3, prefix="s")
    later = Rubric.objects.create(project=other_project, slug="later", name="Later?", criteria="…")
    make_case(dataset, "after")
    assert CaseTally.objects.filter(rubric__project=other_project).exclude(dataset__project=other_project).count() == 0
    assert CaseTally.objects.filter(rubric=rubric).count() == 3
    assert CaseTally.objects.filter(rubric__in=[shop_rubric, later]).count() == 2 * 3
    with pytest.raises(services.LabelingRefused):
        services.label_submit(case=shop_cases[0], rubric=rubric, reviewer=reviewer, verdict="pass",
                              content_hash=shop_cases[0].content_hash)
    with pytest.raises(services.LabelingRefused):
        services.skip(case=shop_cases[0], rubric=rubric, reviewer=reviewer)
    # A hold asked for across projects finds no tally row to take.
    assert services.case_claim(case_id=shop_cases[0].pk, rubric=rubric, reviewer=reviewer) is False
    assert not Label.objects.exists() and not Skip.objects.exists()
    assert_state_is_true()
