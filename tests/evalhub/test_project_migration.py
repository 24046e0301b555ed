"""A single-team install migrates into one project and back (evalhub 0002/0003, labeling 0018, judges 0022).

The story, told once (`migration_story`) and run on PostgreSQL in this process and on SQLite (the embedded
default) in a subprocess, as tests/evalhub/test_sqlite_migrations.py runs its migrations:
1. back to the schema before projects; an empty instance migrated forward gets no project;
2. back again, single-team data written with the historical models: users with global roles (a lead, two
   reviewers, the admin as superuser), a dataset with assigned reviewers, a rubric at observe (its promotion
   event), a policy, cases with labels (the queue's triggers keep CaseTally), a judge config, a finished run with
   judgments and its per-case tallies, a cached judgment and embedding, an API token;
3. forward to the latest: one project, named by EVALHUB_DEFAULT_PROJECT ("default"), holds every dataset, rubric,
   policy, token and cache entry; each user with a global role became a member with that role (the superuser
   none: the instance admin leads every project); CaseTally rows, labels, judgments and the run's figures
   (judges.calibration.selectors.run_figures) are as they were;
4. back: the global roles and the data are as before;
5. forward again: the same figures; then, with a second project, going back is refused with a clear error.
"""

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder
from django.utils import timezone

from judges.engine import JudgeConfig as EngineConfig
from labeling.importing.reading import case_split, labeled_content_hash

ROOT = Path(__file__).resolve().parents[2]
BEFORE = [("evalhub", "0001_initial"), ("labeling", "0017_dataset_policies"), ("judges", "0021_fewer_indexes")]
SPEC = {"layers": ["contract"], "contract_checks": ["answer_present"]}
ROLES = {"lena": "lead", "rita": "reviewer", "rob": "reviewer", "ada": "admin"}
CASES = 6


def _executor() -> MigrationExecutor:
    # A fresh executor each time: its loader holds what was applied when it was made.
    return MigrationExecutor(connection)


def migrate(targets) -> None:
    _executor().migrate(targets)


PROJECT_MIGRATIONS = [("evalhub", "0002_projects"), ("evalhub", "0003_roles_are_per_project"),
                      ("labeling", "0018_projects"), ("judges", "0022_caches_per_project")]


def latest() -> list[tuple[str, str]]:
    return _executor().loader.graph.leaf_nodes()


def apps_at(targets):
    """The historical models at `targets` (they need no model code of today's)."""
    return _executor().loader.project_state(targets).apps


def single_team(apps) -> dict:
    """A single-team install's data, written with the models before projects; returns the ids the story needs."""
    user = apps.get_model("evalhub", "User")
    people = {name: user.objects.create(username=name, password="!", role=role, is_superuser=role == "admin",
                                        is_staff=role == "admin") for name, role in ROLES.items()}
    lead = people["lena"]
    dataset = apps.get_model("labeling", "Dataset").objects.create(slug="support", name="Support")
    dataset.reviewers.add(people["rita"], people["rob"])
    rubric = apps.get_model("labeling", "Rubric").objects.create(
        slug="return-policy", name="Does the answer follow the return policy?", criteria="30 days.", stage="observe")
    apps.get_model("labeling", "PolicyDocument").objects.create(
        slug="returns", version=1, text="Returns within 30 days.", sha256="a" * 64, created_by=lead)
    case_model, label_model = apps.get_model("labeling", "Case"), apps.get_model("labeling", "Label")
    cases = []
    for i in range(CASES):
        external_id, question, answer = f"c{i}", f"Can I return item {i}?", f"Yes, within 30 days ({i})."
        cases.append(case_model.objects.create(
            dataset=dataset, external_id=external_id, input=question, output=answer, split=case_split(external_id),
            content_hash=labeled_content_hash(input=question, output=answer, trace={})))
    for i, case in enumerate(cases):
        verdict = "pass" if i % 2 == 0 else "fail"
        label_model.objects.create(case=case, rubric=rubric, reviewer=people["rita"], verdict=verdict,
                                   content_hash=case.content_hash, dataset=dataset)
        if i < 3:  # a second opinion on some, one of them a disagreement
            other = verdict if i != 1 else "pass"
            label_model.objects.create(case=case, rubric=rubric, reviewer=people["rob"], verdict=other,
                                       content_hash=case.content_hash, dataset=dataset)
    engine = EngineConfig.from_dict({**SPEC, "rubric": rubric.slug, "criteria": rubric.criteria})
    config = apps.get_model("judges", "JudgeConfig").objects.create(
        rubric=rubric, version=1, spec=engine.to_dict(), config_hash=engine.config_hash, created_by=lead)
    apps.get_model("judges", "RubricEvent").objects.create(
        rubric=rubric, kind="promote", from_stage="draft", to_stage="observe", config=config, by=lead,
        reason="Observe from day one.")
    now = timezone.now()
    run = apps.get_model("judges", "Run").objects.create(
        config=config, dataset=dataset, created_by=lead, repeats=2, status="finished", total=2 * CASES,
        done=2 * CASES, started_at=now - timedelta(minutes=1), finished_at=now)
    judgment, tally = apps.get_model("judges", "Judgment"), apps.get_model("judges", "RunCaseTally")
    for i, case in enumerate(cases):
        human = "pass" if i % 2 == 0 else "fail"
        outcomes = [human, human] if i != 3 else ["pass", "fail"]  # one flip, on a case the humans fail
        for repeat, outcome in enumerate(outcomes, start=1):
            judgment.objects.create(run=run, case=case, repeat=repeat, outcome=outcome, reason=f"{outcome} {i}")
        tally.objects.create(run=run, case=case, judged=2, passes=outcomes.count("pass"),
                             fails=outcomes.count("fail"))
    apps.get_model("judges", "CachedJudgment").objects.create(key="k" * 64, judgment={"outcome": "pass"})
    apps.get_model("judges", "CachedEmbedding").objects.create(key="e" * 64, vector=b"\x00\x01")
    apps.get_model("evalhub", "ApiToken").objects.create(
        name="ci", prefix="evh_abcdef", token_hash="0" * 64, scopes=["gates:read"], created_by=lead)
    return {"run": run.pk}


def snapshot(apps) -> dict:
    """What must not change, read through the historical models of either side (same fields on both)."""

    def rows(app_model: str, *fields: str) -> list:
        return sorted(map(list, apps.get_model(*app_model.split(".")).objects.values_list(*fields)))

    return {
        "datasets": rows("labeling.Dataset", "slug", "name"),
        "reviewers": sorted(apps.get_model("labeling", "Dataset").objects.values_list("reviewers__username",
                                                                                       flat=True)),
        "rubrics": rows("labeling.Rubric", "slug", "stage"),
        "policies": rows("labeling.PolicyDocument", "slug", "version", "text"),
        "cases": rows("labeling.Case", "external_id", "content_hash"),
        "labels": rows("labeling.Label", "case__external_id", "reviewer__username", "verdict"),
        "case_tallies": rows("labeling.CaseTally", "case__external_id", "rubric__slug", "dataset__slug", "labels",
                             "requested"),
        "judgments": rows("judges.Judgment", "run_id", "case__external_id", "repeat", "outcome"),
        "run_tallies": rows("judges.RunCaseTally", "run_id", "case__external_id", "judged", "passes", "fails"),
        "events": rows("judges.RubricEvent", "rubric__slug", "kind", "to_stage"),
        "tokens": rows("evalhub.ApiToken", "name", "prefix", "scopes"),
        "cached": rows("judges.CachedJudgment", "key") + rows("judges.CachedEmbedding", "key"),
    }


def projects_side(apps) -> dict:
    """Where the data went, on the projects side."""
    project = apps.get_model("evalhub", "Project")
    bound = {}
    for app_model in ("labeling.Dataset", "labeling.Rubric", "labeling.PolicyDocument", "evalhub.ApiToken",
                      "judges.CachedJudgment", "judges.CachedEmbedding"):
        bound[app_model] = sorted(set(apps.get_model(*app_model.split(".")).objects.values_list(
            "project__slug", flat=True)))
    return {
        "projects": [list(p) for p in project.objects.values_list("slug", "name")],
        "members": sorted(map(list, apps.get_model("evalhub", "Membership").objects.values_list(
            "project__slug", "user__username", "role"))),
        "bound": bound,
    }


def figures(run_id: int) -> dict:
    """The run's figures through the app's own selector (today's models: call it at the latest schema only)."""
    from judges.calibration.selectors import run_figures
    from judges.models import Run

    return json.loads(json.dumps(run_figures(run=Run.objects.get(pk=run_id)), default=str))


def migration_story() -> dict:
    """Steps 1-5 of the module's docstring; returns what each step found (run on either database)."""
    found: dict = {}
    try:
        migrate(BEFORE)
        migrate(latest())
        found["empty_install_projects"] = projects_side(apps_at(latest()))["projects"]
        migrate(BEFORE)
        ids = single_team(apps_at(BEFORE))
        found["before"] = snapshot(apps_at(BEFORE))
        found["before_roles"] = dict(apps_at(BEFORE).get_model("evalhub", "User").objects.values_list(
            "username", "role"))

        migrate(latest())
        found["forward"] = snapshot(apps_at(latest()))
        found["forward_projects"] = projects_side(apps_at(latest()))
        found["figures"] = figures(ids["run"])

        migrate(BEFORE)
        found["back"] = snapshot(apps_at(BEFORE))
        found["back_roles"] = dict(apps_at(BEFORE).get_model("evalhub", "User").objects.values_list(
            "username", "role"))

        migrate(latest())
        found["figures_again"] = figures(ids["run"])
        found["forward_again_projects"] = projects_side(apps_at(latest()))
        apps_at(latest()).get_model("evalhub", "Project").objects.create(slug="second", name="Second")
        try:
            migrate(BEFORE)
        except Exception as exc:  # noqa: BLE001 - the message is what is checked
            found["refused"] = f"{type(exc).__name__}: {exc}"
        else:
            found["refused"] = None
        applied = MigrationRecorder(connection).applied_migrations()
        # The refusal leaves the projects in place (later apps' migrations, reversed before it, are not its concern).
        found["still_latest"] = all(node in applied for node in PROJECT_MIGRATIONS)
    finally:
        migrate(latest())
    return found


def check_story(found: dict) -> None:
    assert found["empty_install_projects"] == []  # a new install gets no project until the admin makes one
    assert found["before_roles"] == ROLES
    before = found["before"]
    assert len(before["cases"]) == CASES and len(before["judgments"]) == 2 * CASES
    assert len(before["case_tallies"]) == CASES and sum(t[3] for t in before["case_tallies"]) == CASES + 3

    assert found["forward"] == before  # tallies, labels, judgments, tokens, caches: all as they were
    side = found["forward_projects"]
    assert side["projects"] == [["default", "Default"]]
    assert side["members"] == [["default", "lena", "lead"], ["default", "rita", "reviewer"],
                               ["default", "rob", "reviewer"]]  # the superuser leads every project unasked
    assert side["bound"] == dict.fromkeys(side["bound"], ["default"]), side["bound"]

    assert found["back"] == before
    assert found["back_roles"] == ROLES

    assert found["figures_again"] == found["figures"]
    figures = found["figures"]
    # What the data says: c1's reviewers disagree (no verdict), c3 is judged pass then fail by a judge the humans
    # fail; nothing is stale (the labels' content hashes still match).
    assert (figures["n"], figures["judgments"], figures["flipped_cases"], figures["false_pass_cases"]) == (
        CASES - 1, 2 * (CASES - 1), ["c3"], ["c3"])
    assert figures["reviewer_agreement"]["pairs"] == 3 and figures["stale_reasons"] == []
    assert found["forward_again_projects"] == side
    assert found["refused"] is not None and "more than one project" in found["refused"], found["refused"]
    assert found["still_latest"]


@pytest.mark.django_db(transaction=True)
def test_a_single_team_install_migrates_into_one_project_and_back():
    check_story(migration_story())


@pytest.mark.django_db(transaction=True)
def test_the_one_project_is_named_by_the_setting(settings):
    settings.EVALHUB_DEFAULT_PROJECT = "Acme Support"
    try:
        migrate(BEFORE)
        single_team(apps_at(BEFORE))
    finally:
        migrate(latest())
    assert projects_side(apps_at(latest()))["projects"] == [["acme-support", "Acme support"]]


STORY = """
import json
from tests.evalhub.test_project_migration import migration_story
print("STORY " + json.dumps(migration_story(), default=str))
"""


def test_the_same_story_on_sqlite(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env["EVALHUB_DATA_DIR"] = str(tmp_path)
    done = subprocess.run([sys.executable, str(ROOT / "manage.py"), "shell", "-c", STORY], env=env, cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("STORY "))
    check_story(json.loads(line.removeprefix("STORY ")))
