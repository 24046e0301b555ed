"""POST /api/datasets/<slug>/ci-runs with what the gate command sends, and every refusal: bad input is a 4xx with
every error named and nothing written; GET /api/token lists a token's scopes."""

import json

import pytest

from evalhub.models import ApiToken, Role, Scope
from judges.configs.services import judge_config_save
from judges.engine import Judgment as EngineJudgment
from judges.gate.posting import CASES_SCHEMA
from judges.models import Judgment, Run
from labeling.models import Case, CaseTally, Dataset, Label, QueuePriority, Rubric, case_split
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(project):
    lead = make_user("lena", role=Role.LEAD)
    Dataset.objects.create(project=project, slug="ci-traffic", name="CI traffic")
    rubric = Rubric.objects.create(project=project, slug="safe-actions", name="No refund", criteria="Fail on a refund.")
    config = judge_config_save(rubric=rubric, by=lead,
                               spec={"layers": ["contract"], "contract_checks": ["answer_present"]})
    token = ApiToken.issue(project=project, name="ci", scopes=[Scope.CASES_WRITE, Scope.RESULTS_WRITE],
                           created_by=lead)[1]
    return {"lead": lead, "config": config, "token": token, "project": project}


def body(config, *, ref="abc", outputs=("Within 30 days.",), repeats=1, **overrides) -> dict:
    cases = []
    for i, output in enumerate(outputs):
        judgments = [EngineJudgment(external_id=f"c{i}", repeat=r, outcome="pass", reason="ok").to_dict()
                     for r in range(1, repeats + 1)]
        cases.append({"case": {"external_id": f"c{i}", "input": "Refund?", "output": output}, "verdict": "pass",
                      "judgments": judgments})
    return {"schema": CASES_SCHEMA, "ref": ref, "branch": "main", "run_url": None, "rubric": "safe-actions",
            "config_hash": config.config_hash, "repeats": repeats, "cases": cases, **overrides}


def post(client, token, payload, slug="ci-traffic"):
    data = payload if isinstance(payload, (str, bytes)) else json.dumps(payload)
    return client.post(f"/api/datasets/{slug}/ci-runs", data=data, content_type="application/json",
                       headers={"Authorization": f"Bearer {token}"})


def test_it_writes_the_cases_and_the_ci_run_and_a_changed_answer_stops_the_labels_counting(client, world):
    response = post(client, world["token"], body(world["config"]))
    assert response.status_code == 201, response.content
    queue = f"http://testserver/p/{world['project'].slug}/label/ci-traffic/safe-actions/"
    assert response.json() | {"run": 0} == {"run": 0, "created": 1, "updated": 0, "unchanged": 0, "judgments": 1,
                                            "queue_url": queue}
    client.force_login(world["lead"])  # the queue it names is the one of these cases, for the project's members
    assert client.get(queue).status_code == 200
    client.logout()
    case = Case.objects.get(external_id="abc/c0")
    assert case.split == case_split("c0") and case.metadata["ci"]["external_id"] == "c0"
    label = Label.objects.create(case=case, rubric=world["config"].rubric, reviewer=world["lead"], verdict="pass",
                                 content_hash=case.content_hash, dataset=case.dataset)

    # The same (ref, config) posted again with another answer is left alone.
    assert post(client, world["token"], body(world["config"], outputs=("Never.",))).json()["unchanged"] == 1
    assert Case.objects.get(pk=case.pk).output == "Within 30 days."
    # The same case under another config's run is updated through the import's rules: the label stops counting.
    other = judge_config_save(rubric=world["config"].rubric, by=world["lead"],
                              spec={"layers": ["contract"], "contract_checks": ["answer_present", "no_secrets"]})
    assert post(client, world["token"], body(other, outputs=("Never.",))).json()["updated"] == 1
    assert not Label.objects.counting().filter(pk=label.pk).exists()
    assert Run.objects.filter(source=Run.Source.CI, ref="abc").count() == 2


def test_a_contested_ci_judgment_comes_before_other_needed_cases_in_the_queue(client, world):
    payload = body(world["config"], outputs=("Within 30 days.", "Refund issued."))
    payload["cases"][1]["judgments"][0]["contested"] = True
    assert post(client, world["token"], payload).status_code == 201

    priorities = dict(CaseTally.objects.filter(rubric=world["config"].rubric)
                      .values_list("case__external_id", "priority"))
    assert priorities == {"abc/c0": QueuePriority.NONE, "abc/c1": QueuePriority.CONTESTED}


@pytest.mark.parametrize(("change", "status", "field"), [
    ({"schema": "other"}, 400, "schema"),
    ({"ref": "has space"}, 400, "ref"),
    ({"config_hash": "0" * 64}, 404, "config_hash"),
    ({"repeats": 0}, 400, "repeats"),
    ({"cases": []}, 400, "cases"),
])
def test_it_refuses_a_bad_chunk_and_writes_nothing(client, world, change, status, field):
    response = post(client, world["token"], body(world["config"]) | change)
    assert response.status_code == status
    assert field in [error["field"] for error in response.json()["errors"]]
    assert not Case.objects.exists() and not Run.objects.exists()


def test_it_refuses_bad_judgments_json_and_bodies(client, world):
    payload = body(world["config"], repeats=2)
    payload["cases"][0]["judgments"][1]["repeat"] = 3
    payload["cases"][0]["judgments"][0]["latency_ms"] = -1
    errors = post(client, world["token"], payload).json()["errors"]
    assert [e["field"] for e in errors] == ["judgments[0]", "judgments[1]"]
    assert post(client, world["token"], "{not json").status_code == 400
    assert post(client, world["token"], body(world["config"], ref="a\u0000b")).status_code == 400
    assert post(client, world["token"], body(world["config"]), slug="no-such").status_code == 404
    assert not Judgment.objects.exists()


def test_the_same_ref_with_other_repeats_is_a_conflict(client, world):
    assert post(client, world["token"], body(world["config"])).status_code == 201
    response = post(client, world["token"], body(world["config"], repeats=2, outputs=("x", "y")))
    assert response.status_code == 409 and Case.objects.count() == 1


def test_a_token_needs_both_scopes_and_says_which_it_has(client, world):
    narrow = ApiToken.issue(project=world["project"], name="narrow", scopes=[Scope.CASES_WRITE, Scope.GATES_READ],
                            created_by=world["lead"])[1]
    response = post(client, narrow, body(world["config"]))
    assert response.status_code == 403 and "results:write" in response.json()["error"]
    about = client.get("/api/token", headers={"Authorization": f"Bearer {narrow}"}).json()
    assert about["scopes"] == ["cases:write", "gates:read"] and about["project"] == world["project"].slug
    assert client.get("/api/token").status_code == 401


def test_get_reads_a_ref_verdicts_back(client, world):
    post(client, world["token"], body(world["config"]))
    auth = {"Authorization": f"Bearer {world['token']}"}
    url = "/api/datasets/ci-traffic/ci-runs"
    answer = client.get(url, {"ref": "abc", "config_hash": world["config"].config_hash}, headers=auth).json()
    assert answer["cases"] == {"c0": "pass"}
    assert client.get(url, {"ref": "nope", "config_hash": "x"}, headers=auth).json() == {"run": None, "cases": {}}
    assert client.get(url, headers=auth).status_code == 400


def test_another_projects_dataset_is_unknown_to_a_token(client, world, other_project, other_lead):
    """A token answers for its project only (docs/projects.md): the dataset slug of another project is a 404 with
    the words of a slug that does not exist, and nothing is written."""
    theirs = ApiToken.issue(project=other_project, name="ci", scopes=[Scope.CASES_WRITE, Scope.RESULTS_WRITE],
                            created_by=other_lead)[1]
    posted = post(client, theirs, body(world["config"]))
    unknown = post(client, theirs, body(world["config"]), slug="no-such")
    auth = {"Authorization": f"Bearer {theirs}"}
    read = client.get("/api/datasets/ci-traffic/ci-runs", {"ref": "abc", "config_hash": "x"}, headers=auth)
    assert (posted.status_code, read.status_code) == (404, 404)
    assert posted.json()["errors"][0]["message"] == unknown.json()["errors"][0]["message"].replace("no-such",
                                                                                                    "ci-traffic")
    assert not Case.objects.exists() and not Run.objects.exists()


def test_the_rubric_is_the_datasets_projects(client, world, other_project, other_lead):
    """A chunk naming a rubric slug finds that rubric in the dataset's project only: another project's rubric of
    the same slug and config hash is no judge here."""
    Dataset.objects.create(project=other_project, slug="ci-traffic", name="Their CI traffic")
    theirs = ApiToken.issue(project=other_project, name="ci", scopes=[Scope.CASES_WRITE, Scope.RESULTS_WRITE],
                            created_by=other_lead)[1]
    response = post(client, theirs, body(world["config"]))  # our rubric's slug and config hash, their dataset
    assert response.status_code == 404 and response.json()["errors"][0]["field"] == "config_hash"
    assert not Case.objects.exists() and not Run.objects.exists()
