"""POST /api/ci-results with each case's verdict, flip and repeats (what `--post` sends, gzip-compressed):
checked whole, kept on the CiResult, shown on the result's page, escaped; a body over the bound is refused
whole."""

import gzip
import json

import pytest
from django.test import Client
from django.urls import reverse

from evalhub.models import ApiToken, Scope
from judges.models import CiResult
from judges.promotion import api
from tests.conftest import TEST_PROJECT, store_project
from tests.judges.promotion.test_ci_results import payload

pytestmark = pytest.mark.django_db

HOSTILE = "<script>alert(1)</script>"


def repeat(number: int, verdict: str, **overrides) -> dict:
    return {"repeat": number, "verdict": verdict, "layer": "behavioral", "failed_checks": [],
            "scores": {"accuracy": 4}, "similarity": None, "reason": f"repeat {number} said {verdict}"} | overrides


def case(external_id: str, verdict: str, repeats: list[dict], *, flipped: bool = False) -> dict:
    return {"external_id": external_id, "category": "policy", "verdict": verdict, "flipped": flipped,
            "reason": repeats[0]["reason"], "repeats": repeats}


def cases_payload(**overrides) -> dict:
    cases = [
        case("case-001", "pass", [repeat(1, "pass"), repeat(2, "pass")]),
        case("case-002", "pass", [repeat(1, "pass"), repeat(2, "fail")], flipped=True),
        case(HOSTILE, "fail", [repeat(1, "fail", layer="contract", failed_checks=["forbidden_tools"], scores=None,
                                      reason=HOSTILE), repeat(2, "fail", layer="contract", scores=None)]),
        case("case-004", "not_evaluated", [repeat(1, "not_evaluated", scores=None, reason="timeout"),
                                           repeat(2, "not_evaluated", scores=None, reason="timeout")]),
    ]
    return payload(passed=2, failed=1, not_evaluated=1, total=4, cases=cases, **overrides)


def post(client, token: str, body: bytes, encoding: str | None = "gzip"):
    headers = {"Authorization": f"Bearer {token}"} | ({"Content-Encoding": encoding} if encoding else {})
    return client.post(reverse("judges:api_ci_results"), data=body, content_type="application/json", headers=headers)


def gz(body: dict) -> bytes:
    return gzip.compress(json.dumps(body).encode())


@pytest.fixture
def ci_token(lead) -> str:
    return ApiToken.issue(project=store_project(), name="github-actions", scopes=[Scope.RESULTS_WRITE],
                          created_by=lead)[1]


def test_it_keeps_each_case_with_its_repeats_from_a_gzip_body(client, rubric, ci_token):
    body = cases_payload()
    body["rubrics"][0]["cases"][0]["extra"] = "not kept"
    assert post(client, ci_token, gz(body)).status_code == 201
    stored = CiResult.objects.get().cases
    assert [c["external_id"] for c in stored] == ["case-001", "case-002", HOSTILE, "case-004"]
    assert "extra" not in stored[0]
    assert stored[1]["flipped"] is True and [r["verdict"] for r in stored[1]["repeats"]] == ["pass", "fail"]
    assert stored[2]["repeats"][0] == {"repeat": 1, "verdict": "fail", "layer": "contract",
                                       "failed_checks": ["forbidden_tools"], "scores": None, "similarity": None,
                                       "reason": HOSTILE}


def test_a_plain_body_without_cases_still_works(client, rubric, ci_token):
    assert post(client, ci_token, json.dumps(payload()).encode(), encoding=None).status_code == 201
    assert CiResult.objects.get().cases == []


def mutate_repeat(body, **change):
    body["rubrics"][0]["cases"][0]["repeats"][1].update(change)


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda b: mutate_repeat(b, repeat=3), "rubrics[0].cases[0].repeats[1]"),
    (lambda b: mutate_repeat(b, verdict="maybe"), "rubrics[0].cases[0].repeats[1]"),
    (lambda b: mutate_repeat(b, layer="vibes"), "rubrics[0].cases[0].repeats[1]"),
    (lambda b: mutate_repeat(b, scores={"accuracy": "high"}), "rubrics[0].cases[0].repeats[1]"),
    (lambda b: mutate_repeat(b, failed_checks="all"), "rubrics[0].cases[0].repeats[1]"),
    (lambda b: b["rubrics"][0]["cases"][1].update(flipped="yes"), "rubrics[0].cases[1].flipped"),
    (lambda b: b["rubrics"][0]["cases"][1].update(verdict="passed"), "rubrics[0].cases[1].verdict"),
    (lambda b: b["rubrics"][0]["cases"][1].update(repeats=[]), "rubrics[0].cases[1].repeats"),
    (lambda b: b["rubrics"][0]["cases"][1].update(external_id=""), "rubrics[0].cases[1].external_id"),
    (lambda b: b["rubrics"][0]["cases"].pop(), "rubrics[0].cases"),  # the verdicts no longer add up to the counts
    (lambda b: b["rubrics"][0].update(cases={"case-001": "pass"}), "rubrics[0].cases"),
])
def test_a_bad_case_is_refused_naming_it_and_nothing_is_stored(client, rubric, ci_token, mutate, field):
    body = cases_payload()
    mutate(body)
    response = post(client, ci_token, gz(body))
    assert response.status_code == 400, response.content
    assert [e["field"] for e in response.json()["errors"]] == [field]
    assert not CiResult.objects.exists()


def test_a_body_over_the_bound_is_refused_whole_with_a_clear_error(client, rubric, ci_token, monkeypatch):
    body = gz(cases_payload())
    monkeypatch.setattr(api, "CI_RESULTS_MAX_BYTES", len(body) - 1)
    response = post(client, ci_token, body)
    assert response.status_code == 413
    message = response.json()["errors"][0]["message"]
    assert "over the limit" in message and "nothing was stored" in message
    assert not CiResult.objects.exists()


def test_a_gzip_bomb_is_refused_without_unpacking_it_all(client, rubric, ci_token, monkeypatch):
    monkeypatch.setattr(api, "CI_RESULTS_MAX_INFLATED", 10_000)
    bomb = gzip.compress(b" " * 10_001)  # JSON whitespace: valid if it were unpacked whole
    response = post(client, ci_token, bomb)
    assert response.status_code == 413 and "unpacks to over 10,000 bytes" in response.json()["errors"][0]["message"]
    assert post(client, ci_token, gzip.compress(json.dumps(payload()).encode().ljust(10_000))).status_code == 201


@pytest.mark.parametrize(("body", "encoding", "status", "words"), [
    (b"not gzip at all", "gzip", 400, "not gzip"),
    (gzip.compress(json.dumps(payload()).encode())[:-6], "gzip", 400, "not gzip"),  # cut short
    (b"{}", "br", 415, "not accepted"),
])
def test_a_body_that_cannot_be_unpacked_is_a_clear_error(client, rubric, ci_token, body, encoding, status, words):
    response = post(client, ci_token, body, encoding=encoding)
    assert response.status_code == status and words in response.json()["errors"][0]["message"]
    assert not CiResult.objects.exists()


def test_the_results_page_shows_the_cases_failures_first_and_escaped(client, lead_client, rubric, ci_token):
    post(client, ci_token, gz(cases_payload()))
    result = CiResult.objects.get()
    promotion = lead_client.get(reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])).text
    url = reverse("judges:promotion_ci_result", args=[TEST_PROJECT, rubric.slug, result.pk])
    assert f'href="{url}"' in promotion
    text = lead_client.get(url).text
    assert HOSTILE not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    table = text.split('data-testid="ci-cases-table"')[1]
    order = [table.index(name) for name in ("&lt;script&gt;", "case-004", "case-002", "case-001")]
    assert order == sorted(order)  # fail, not evaluated, flipped pass, pass
    assert "failed forbidden_tools" in table and "accuracy 4" in table and "flipped" in table
    assert "All 4 cases" in text


def test_the_results_page_needs_a_lead_and_the_rubrics_own_result(lead_client, reviewer, rubric, ci_token):
    post(Client(), ci_token, json.dumps(payload()).encode(), encoding=None)
    result = CiResult.objects.get()
    url = reverse("judges:promotion_ci_result", args=[TEST_PROJECT, rubric.slug, result.pk])
    assert "without its cases" in lead_client.get(url).text
    as_reviewer = Client()
    as_reviewer.force_login(reviewer)
    assert as_reviewer.get(url).status_code == 403
    assert Client().get(url).status_code == 302
    missing = reverse("judges:promotion_ci_result", args=[TEST_PROJECT, rubric.slug, result.pk + 1])
    assert lead_client.get(missing).status_code == 404
