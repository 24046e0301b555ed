"""GET /api/datasets/<slug>/cases (cases:read): a pipeline's cases file — every case field but the answer,
never a label — with the category, split and kind filters, then a stable sample by a salted hash."""

import hashlib
import json

import pytest
from django.urls import reverse

from evalhub.models import ApiToken, Scope
from labeling.importing.cases import cases_import_objects
from labeling.models import Case, Label
from tests.conftest import store_project

pytestmark = pytest.mark.django_db

KINDS = ["good", "bad", "incomplete", "injection", "paraphrase", ""]


@pytest.fixture
def cases(dataset) -> list[dict]:
    objects = [
        {"external_id": f"case-{i:03}", "input": f"Question {i}?", "output": f"secret answer {i}",
         "trace": {"toolCalls": [{"name": "lookup_order", "argument": {"order": i}}]},
         "category": "tools" if i % 2 else "policy", "kind": KINDS[i % len(KINDS)], "metadata": {"n": i},
         "golden_answer": f"golden {i}", "expected_tool": "lookup_order", "expected_tool_argument": {"order": i}}
        for i in range(60)
    ]
    objects[0]["expected_tool_argument"] = None  # checked, and must be null
    del objects[1]["expected_tool_argument"]  # not checked: left out of the line, as in the export
    cases_import_objects(dataset=dataset, objects=objects)
    return objects


@pytest.fixture
def read_token(lead) -> str:
    return ApiToken.issue(project=store_project(), name="pipeline", scopes=[Scope.CASES_READ], created_by=lead)[1]


def fetch(client, token: str, query: str = "", slug: str = "store-support"):
    return client.get(reverse("labeling:api_cases_ingest", args=[slug]) + query,
                      headers={"Authorization": f"Bearer {token}"})


def lines(response) -> list[dict]:
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"] == "application/x-ndjson; charset=utf-8"
    return [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]


def ids(response) -> list[str]:
    return [line["external_id"] for line in lines(response)]


def test_it_streams_every_case_without_its_answer_or_labels(client, dataset, rubric, reviewer, cases, read_token):
    case = Case.objects.get(external_id="case-002")
    Label.objects.create(case=case, rubric=rubric, reviewer=reviewer, verdict="fail", note="secret note",
                         content_hash=case.content_hash)

    response = fetch(client, read_token)
    body = lines(response)

    assert [line["external_id"] for line in body] == [c["external_id"] for c in cases]  # import order
    assert body[2] == {
        "external_id": "case-002", "input": "Question 2?",
        "trace": {"toolCalls": [{"name": "lookup_order", "argument": {"order": 2}}]},
        "golden_answer": "golden 2", "expected_behaviour": "", "expected_tool": "lookup_order",
        "expected_tool_argument": {"order": 2}, "expected_source": None, "category": "policy", "kind": "incomplete",
        "metadata": {"n": 2},
    }
    assert body[0]["expected_tool_argument"] is None and "expected_tool_argument" not in body[1]
    text = json.dumps(body)
    assert "secret answer" not in text and "secret note" not in text and "verdict" not in text


def test_each_filter_selects_its_cases(client, cases, read_token):
    def having(name, value):
        return [c["external_id"] for c in cases if c[name] == value]

    assert ids(fetch(client, read_token, "?category=tools")) == having("category", "tools")
    assert ids(fetch(client, read_token, "?kind=injection")) == having("kind", "injection")
    assert ids(fetch(client, read_token, "?kind=")) == having("kind", "")
    holdout = set(Case.objects.filter(split="holdout").values_list("external_id", flat=True))
    assert 0 < len(holdout) < len(cases)
    assert set(ids(fetch(client, read_token, "?split=holdout"))) == holdout
    both = ids(fetch(client, read_token, "?category=tools&kind=good&split=dev"))
    assert both == [c["external_id"] for c in cases if c["category"] == "tools" and c["kind"] == "good"
                    and c["external_id"] not in holdout]
    assert ids(fetch(client, read_token, "?category=nope")) == []


def expected_sample(external_ids: list[str], seed: str, n: int) -> set[str]:
    return set(sorted(external_ids, key=lambda e: hashlib.sha256((seed + e).encode()).hexdigest())[:n])


def test_a_sample_is_the_same_for_the_same_seed_and_rotates_with_it(client, cases, read_token):
    all_ids = [c["external_id"] for c in cases]

    first = ids(fetch(client, read_token, "?sample=10&seed=pr-suite"))
    again = ids(fetch(client, read_token, "?sample=10&seed=pr-suite"))
    rotated = ids(fetch(client, read_token, "?sample=10&seed=2026-11-30"))

    assert first == again and len(first) == 10
    assert set(first) == expected_sample(all_ids, "pr-suite", 10)  # docs/cases.md: lowest sha256(seed + external_id)
    assert set(rotated) == expected_sample(all_ids, "2026-11-30", 10) and set(rotated) != set(first)
    assert first == [e for e in all_ids if e in set(first)]  # in import order
    # A larger sample keeps the smaller one's cases: growing the suite does not reshuffle it.
    assert set(first) <= set(ids(fetch(client, read_token, "?sample=20&seed=pr-suite")))
    assert len(ids(fetch(client, read_token, "?sample=1000&seed=pr-suite"))) == len(cases)


def test_the_filters_come_before_the_sample(client, cases, read_token):
    tools = [c["external_id"] for c in cases if c["category"] == "tools"]
    sampled = ids(fetch(client, read_token, "?category=tools&sample=5&seed=s"))
    assert set(sampled) == expected_sample(tools, "s", 5)


@pytest.mark.parametrize(("query", "field", "message"), [
    ("?split=test", "split", "must be dev or holdout"),
    ("?kind=evil", "kind", "must be one of good, bad, incomplete, injection, paraphrase"),
    ("?sample=ten&seed=s", "sample", "whole number"),
    ("?sample=0&seed=s", "sample", "1 or more"),
    ("?sample=-3&seed=s", "sample", "whole number"),
    ("?sample=5", "seed", "is required with sample"),
    ("?seed=s", "seed", "only goes with sample"),
    ("?categroy=tools", "categroy", "is not a filter"),
    ("?category=a&category=b", "category", "more than once"),
    ("?sample=5&seed=" + "x" * 201, "seed", "at most 200 characters"),
])
def test_a_bad_parameter_is_a_json_400_naming_it(client, cases, read_token, query, field, message):
    response = fetch(client, read_token, query)
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    [error] = response.json()["errors"]
    assert error["field"] == field and message in error["message"]


def test_an_unknown_dataset_is_a_json_404(client, db, read_token):
    response = fetch(client, read_token, slug="missing")
    assert response.status_code == 404 and "missing" in response.json()["error"]


@pytest.mark.parametrize("scopes", [[Scope.CASES_WRITE], [Scope.GATES_READ, Scope.RESULTS_WRITE], [Scope.RUNS_READ]])
def test_only_a_cases_read_token_reads(client, cases, lead, scopes):
    raw = ApiToken.issue(project=store_project(), name="t", scopes=scopes, created_by=lead)[1]
    response = fetch(client, raw)
    assert response.status_code == 403 and "cases:read" in response.json()["error"]


def test_a_cases_read_token_cannot_ingest_and_a_session_cannot_read(client, lead_client, dataset, read_token):
    refused = client.post(reverse("labeling:api_cases_ingest", args=[dataset.slug]), data="[]",
                          content_type="application/json", headers={"Authorization": f"Bearer {read_token}"})
    assert refused.status_code == 403 and "cases:write" in refused.json()["error"]
    assert lead_client.get(reverse("labeling:api_cases_ingest", args=[dataset.slug])).status_code == 401


# --- projects: a token reads its own project's datasets only --------------------------------------------------------


def test_a_dataset_of_another_project_is_404_in_the_words_of_an_unknown_one(client, cases, other_lead):
    their_project = other_lead.memberships.get().project
    theirs = ApiToken.issue(project=their_project, name="t", scopes=[Scope.CASES_READ], created_by=other_lead)[1]

    refused, unknown = fetch(client, theirs), fetch(client, theirs, slug="never-made")

    assert refused.status_code == unknown.status_code == 404
    assert refused.json() == {"error": "No dataset 'store-support'."}
    assert unknown.json() == {"error": "No dataset 'never-made'."}
    for slug in ("store-support", "never-made"):  # the dataset endpoint too
        response = client.get(reverse("labeling:api_dataset", args=[slug]),
                              headers={"Authorization": f"Bearer {theirs}"})
        assert response.status_code == 404 and response.json() == {"error": f"No dataset {slug!r}."}


def test_the_same_slug_in_two_projects_reads_the_tokens_projects(client, cases, read_token, other_lead):
    from labeling.models import Dataset

    their_project = other_lead.memberships.get().project
    twin = Dataset.objects.create(project=their_project, slug="store-support", name="Twin", redact="email")
    cases_import_objects(dataset=twin, objects=[{"external_id": "theirs", "input": "q", "output": "a"}])
    theirs = ApiToken.issue(project=their_project, name="t", scopes=[Scope.CASES_READ], created_by=other_lead)[1]

    assert ids(fetch(client, theirs)) == ["theirs"]
    assert "theirs" not in ids(fetch(client, read_token)) and len(ids(fetch(client, read_token))) == len(cases)
    read = client.get(reverse("labeling:api_dataset", args=["store-support"]),
                      headers={"Authorization": f"Bearer {theirs}"})
    assert read.json() == {"dataset": "store-support", "name": "Twin", "redact": ["email"]}
