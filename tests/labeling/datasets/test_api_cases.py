import json

import pytest
from django.urls import reverse

from evalhub.models import ApiToken, Scope
from labeling.models import Case
from tests.conftest import store_project

pytestmark = pytest.mark.django_db

ONE = {"external_id": "api-1", "input": "q", "output": "a", "trace": {"toolCalls": [{"name": "t"}]}}


@pytest.fixture
def token(lead) -> str:
    return ApiToken.issue(project=store_project(), name="ingest", scopes=[Scope.CASES_WRITE], created_by=lead)[1]


def post(client, slug: str, body, token: str | None, query: str = "", raw: bytes | None = None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = raw if raw is not None else json.dumps(body)
    return client.post(reverse("labeling:api_cases_ingest", args=[slug]) + query, data=data,
                       content_type="application/json", headers=headers)


def test_it_creates_one_case(client, dataset, token):
    response = post(client, dataset.slug, ONE, token)

    assert response.status_code == 201
    assert response.json() == {"dataset": dataset.slug, "created": 1, "updated": 0, "unchanged": 0}
    assert Case.objects.get().trace == {"toolCalls": [{"name": "t"}]}


def test_it_creates_a_batch(client, dataset, token):
    batch = [{**ONE, "external_id": f"api-{i}"} for i in range(5)]
    assert post(client, dataset.slug, batch, token).json()["created"] == 5
    assert dataset.cases.count() == 5


def test_it_lists_each_bad_item_by_index_and_writes_nothing(client, dataset, token):
    batch = [ONE, {**ONE, "external_id": "b", "output": 3}, {"external_id": "c"}, ONE, "nope",
             {**ONE, "external_id": "d", "trace": {"retrievedSources": "doc-1"}}]

    response = post(client, dataset.slug, batch, token)

    assert response.status_code == 400
    errors = response.json()["errors"]
    assert [(e["index"], e["field"]) for e in errors] == [
        (1, "output"), (2, "input"), (3, "external_id"), (4, None), (5, "trace.retrievedSources"),
    ]
    assert errors[0]["message"] == "must be a string, not a number"
    assert not Case.objects.exists()


def test_an_external_id_too_long_or_an_empty_tool_name_is_an_item_error_not_a_database_error(client, dataset, token):
    batch = [{**ONE, "external_id": "x" * 201}, {**ONE, "external_id": "b", "trace": {"toolCalls": [{"name": ""}]}}]

    response = post(client, dataset.slug, batch, token)

    assert response.status_code == 400
    assert [(e["index"], e["field"], e["message"]) for e in response.json()["errors"]] == [
        (0, "external_id", "is 201 characters long; the limit is 200"),
        (1, "trace.toolCalls[0].name", "is required: the tool's name, a string"),
    ]
    assert not Case.objects.exists()


def test_it_needs_update_to_change_an_existing_case(client, dataset, token):
    post(client, dataset.slug, ONE, token)
    changed = {**ONE, "output": "changed"}

    refused = post(client, dataset.slug, changed, token)
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["field"] == "external_id"
    assert "already exists" in refused.json()["errors"][0]["message"]

    response = post(client, dataset.slug, [changed, {**ONE, "external_id": "new"}], token, "?update=1")
    assert response.status_code == 201
    assert response.json() | {"dataset": None} == {"dataset": None, "created": 1, "updated": 1, "unchanged": 0}
    assert Case.objects.get(external_id="api-1").output == "changed"


def test_an_unknown_dataset_is_404_json(client, db, token):
    response = post(client, "missing", ONE, token)
    assert response.status_code == 404 and "missing" in response.json()["error"]


@pytest.mark.parametrize(
    ("raw", "message"),
    [(b"{not json", "not valid JSON"), (b"\xff\xfe", "not UTF-8"), (b"[]", "the batch has no cases"),
     (b'{"external_id": "x", "input": "q", "output": NaN}', "not valid JSON")],
)
def test_it_refuses_a_bad_body(client, dataset, token, raw, message):
    response = post(client, dataset.slug, None, token, raw=raw)
    assert response.status_code == 400
    assert message in response.json()["errors"][0]["message"]
    assert not Case.objects.exists()


def test_it_refuses_a_body_over_the_limit(client, dataset, token, settings):
    body = json.dumps([{**ONE, "external_id": f"c{i}"} for i in range(50)])
    settings.EVALHUB_IMPORT_MAX_BYTES = len(body) - 1
    response = post(client, dataset.slug, None, token, raw=body.encode())
    assert response.status_code == 413 and not Case.objects.exists()
    settings.EVALHUB_IMPORT_MAX_BYTES = len(body)
    assert post(client, dataset.slug, None, token, raw=body.encode()).status_code == 201


def test_it_accepts_a_batch_beyond_the_form_upload_limit(client, dataset, token, settings):
    # DATA_UPLOAD_MAX_MEMORY_SIZE guards form posts; the API has its own, larger limit.
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    assert post(client, dataset.slug, [ONE, {**ONE, "external_id": "b"}], token).status_code == 201


def test_it_only_accepts_get_and_post(client, dataset, token):
    # GET reads the cases with another scope (tests/labeling/datasets/test_api_cases_read.py)
    response = client.put(reverse("labeling:api_cases_ingest", args=[dataset.slug]),
                          headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 405 and response["Allow"] == "GET, POST"
    response = client.get(reverse("labeling:api_cases_ingest", args=[dataset.slug]),
                          headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 403 and "cases:read" in response.json()["error"]


# --- tokens and scopes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scopes", "status"),
    [
        ([Scope.CASES_WRITE], 201),
        ([Scope.GATES_READ, Scope.CASES_WRITE], 201),
        ([Scope.RUNS_READ], 403),
        ([Scope.CASES_READ], 403),
        ([Scope.GATES_READ], 403),
        ([Scope.RESULTS_WRITE], 403),
        ([Scope.GATES_READ, Scope.RESULTS_WRITE, Scope.RUNS_READ], 403),
    ],
)
def test_only_a_cases_write_token_ingests(client, dataset, lead, scopes, status):
    raw = ApiToken.issue(project=store_project(), name="t", scopes=scopes, created_by=lead)[1]
    response = post(client, dataset.slug, ONE, raw)
    assert response.status_code == status
    assert Case.objects.exists() == (status == 201)
    if status == 403:
        assert "cases:write" in response.json()["error"]


def test_a_revoked_token_is_401(client, dataset, lead):
    token, raw = ApiToken.issue(project=store_project(), name="t", scopes=[Scope.CASES_WRITE], created_by=lead)
    token.revoke()
    response = post(client, dataset.slug, ONE, raw)
    assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Bearer")
    assert not Case.objects.exists()


@pytest.mark.parametrize("header", [None, "Bearer", "Bearer evh_wrong", "Token abc", "Basic dXNlcjpwYXNz"])
def test_no_or_a_bad_token_is_401(client, dataset, header):
    headers = {"Authorization": header} if header else {}
    response = client.post(reverse("labeling:api_cases_ingest", args=[dataset.slug]), data=json.dumps(ONE),
                           content_type="application/json", headers=headers)
    assert response.status_code == 401 and "error" in response.json()


def test_a_session_cookie_alone_is_401(lead_client, dataset):
    response = post(lead_client, dataset.slug, ONE, None)
    assert response.status_code == 401
    assert not Case.objects.exists()


def test_the_token_check_comes_before_the_dataset_lookup(client, db):
    # Without a token nobody learns which datasets exist.
    assert post(client, "missing", ONE, None).status_code == 401


def test_scripts_need_no_csrf_token(dataset, token):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)  # as a browser-less script is treated in production
    assert post(strict, dataset.slug, ONE, token).status_code == 201


# --- projects: a token ingests into its own project's datasets only ------------------------------------------------


@pytest.fixture
def their_token(other_lead) -> str:
    return ApiToken.issue(project=other_lead.memberships.get().project, name="theirs", scopes=[Scope.CASES_WRITE],
                          created_by=other_lead)[1]


def test_a_dataset_of_another_project_is_404_in_the_words_of_an_unknown_one(client, dataset, their_token):
    refused = post(client, dataset.slug, ONE, their_token)
    unknown = post(client, "never-made", ONE, their_token)

    assert refused.status_code == unknown.status_code == 404
    assert refused.json() == {"error": f"No dataset {dataset.slug!r}: create it in evalhub first."}
    assert unknown.json() == {"error": "No dataset 'never-made': create it in evalhub first."}
    assert not Case.objects.exists()


def test_the_same_slug_in_two_projects_is_the_tokens_projects(client, dataset, token, their_token, other_project):
    from labeling.models import Dataset

    twin = Dataset.objects.create(project=other_project, slug=dataset.slug, name="Twin")

    assert post(client, dataset.slug, ONE, token).status_code == 201
    assert post(client, dataset.slug, {**ONE, "external_id": "theirs"}, their_token).status_code == 201

    assert list(dataset.cases.values_list("external_id", flat=True)) == ["api-1"]
    assert list(twin.cases.values_list("external_id", flat=True)) == ["theirs"]
