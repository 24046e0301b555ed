"""POST /api/ci-results (results:write): checked whole, kept per rubric, shown on the rubric's promotion page."""

import copy
import json

import pytest
from django.urls import reverse

from evalhub.models import ApiToken, Scope
from judges.models import CiResult
from tests.conftest import TEST_PROJECT, store_project

pytestmark = pytest.mark.django_db

HASH = "a" * 64


def payload(**rubric_overrides) -> dict:
    rubric = {
        "slug": "return-policy", "stage": "gate", "fail_closed": False, "config_hash": HASH,
        "passed": 38, "failed": 1, "not_evaluated": 1, "total": 40, "outcome": "fail",
        "failed_cases": ["case-007"], "not_evaluated_cases": ["case-031"],
    } | rubric_overrides
    return {
        "schema": "evalhub.ci-results/v1", "generated_at": "2025-01-01T00:00:00+00:00", "exit_code": 1,
        "outcome": "fail", "repeats": 1, "cases": 40, "commit": "0123456789abcdef", "ref": "main",
        "run_url": "https://github.com/acme/agent/actions/runs/42", "rubrics": [rubric],
    }


def post(client, body, token: str | None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = body if isinstance(body, bytes | str) else json.dumps(body)
    return client.post(reverse("judges:api_ci_results"), data=data, content_type="application/json", headers=headers)


@pytest.fixture
def ci_token(lead) -> str:
    return ApiToken.issue(project=store_project(), name="github-actions",
                          scopes=[Scope.GATES_READ, Scope.RESULTS_WRITE], created_by=lead)[1]


def test_it_stores_one_result_per_rubric(client, rubric, ci_token):
    response = post(client, payload(), ci_token)
    assert response.status_code == 201
    result = CiResult.objects.get()
    page = f"http://testserver/p/{TEST_PROJECT}/rubrics/{rubric.slug}/promotion/ci-results/{result.pk}/"
    # The fields an older command reads are unchanged; `url` is added: the stored result's page.
    assert response.json() == {"stored": [{"rubric": rubric.slug, "id": result.pk, "outcome": "fail", "url": page}]}
    assert (result.rubric, result.stage, result.outcome, result.exit_code) == (rubric, "gate", "fail", 1)
    assert (result.passed, result.failed, result.not_evaluated, result.total) == (38, 1, 1, 40)
    assert (result.commit, result.ref, result.token_name) == ("0123456789abcdef", "main", "github-actions")
    assert result.failed_cases == ["case-007"] and result.config_hash == HASH


def test_the_answer_names_the_results_page_as_the_request_reached_the_server(client, settings, lead, rubric,
                                                                            ci_token):
    # Behind a proxy that ends TLS and forwards Host and the scheme (docs/serving.md): the address clients use.
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.ALLOWED_HOSTS = ["evalhub.example.com"]
    response = client.post(reverse("judges:api_ci_results"), data=json.dumps(payload()),
                           content_type="application/json", headers={"Authorization": f"Bearer {ci_token}"},
                           HTTP_HOST="evalhub.example.com", HTTP_X_FORWARDED_PROTO="https")
    assert response.status_code == 201, response.content
    [stored] = response.json()["stored"]
    assert stored["url"] == (f"https://evalhub.example.com/p/{TEST_PROJECT}/rubrics/{rubric.slug}/promotion/"
                             f"ci-results/{stored['id']}/")
    # The page it names is this result's, for the project's lead.
    client.force_login(lead)
    page = client.get(f"/p/{TEST_PROJECT}/rubrics/{rubric.slug}/promotion/ci-results/{stored['id']}/",
                      HTTP_HOST="evalhub.example.com", HTTP_X_FORWARDED_PROTO="https")
    assert page.status_code == 200 and page.context["result"].pk == stored["id"]


def test_it_accepts_the_budget_and_recalibration_fields_the_command_now_sends(client, rubric, ci_token):
    budget = {"calls": 40, "cache_hits": 2, "input_tokens": 31000, "output_tokens": 1900, "cost_usd": 0.0058,
              "contested": 1, "latency_ms_p50": 820, "latency_ms_p95": 1900}
    body = payload(**budget, recalibration_needed=True, recalibration_reasons=["evidence stale"])
    body |= {"max_cost_usd": 2.0, "totals": budget}
    assert post(client, body, ci_token).status_code == 201
    assert CiResult.objects.get().passed == 38


@pytest.mark.parametrize(("scopes", "status"), [(None, 401), ([Scope.GATES_READ], 403)])
def test_it_needs_a_results_write_token(client, lead, rubric, scopes, status):
    raw = ApiToken.issue(project=store_project(), name="t", scopes=scopes, created_by=lead)[1] if scopes else None
    assert post(client, payload(), raw).status_code == status
    assert not CiResult.objects.exists()


def test_a_revoked_token_is_refused(client, lead, rubric):
    token, raw = ApiToken.issue(project=store_project(), name="t", scopes=[Scope.RESULTS_WRITE], created_by=lead)
    token.revoke()
    assert post(client, payload(), raw).status_code == 401


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda p: p.update(schema="other"), "schema"),
        (lambda p: p.update(exit_code=2), "exit_code"),
        (lambda p: p.update(run_url="javascript:alert(1)"), "run_url"),
        (lambda p: p.update(rubrics=[]), "rubrics"),
        (lambda p: p["rubrics"][0].update(total=41), "rubrics[0].total"),
        (lambda p: p["rubrics"][0].update(failed=-1), "rubrics[0].failed"),
        (lambda p: p["rubrics"][0].update(stage="draft"), "rubrics[0].stage"),
        (lambda p: p["rubrics"][0].update(config_hash="nope"), "rubrics[0].config_hash"),
        (lambda p: p["rubrics"][0].update(outcome="great"), "rubrics[0].outcome"),
        (lambda p: p["rubrics"][0].update(slug="no-such-rubric"), "rubrics[0].slug"),
        (lambda p: p["rubrics"].append(copy.deepcopy(p["rubrics"][0])), "rubrics[1].slug"),
        (lambda p: p["rubrics"][0].update(failed_cases=["x"] * 101), "rubrics[0].failed_cases"),
    ],
)
def test_it_rejects_a_bad_payload_naming_the_field_and_stores_nothing(client, rubric, ci_token, mutate, field):
    body = payload()
    mutate(body)
    response = post(client, body, ci_token)
    assert response.status_code == 400
    assert field in [error["field"] for error in response.json()["errors"]]
    assert not CiResult.objects.exists()


def test_it_lists_every_error_at_once(client, rubric, ci_token):
    body = payload(total=7, stage="nope")
    body["exit_code"] = 9
    fields = {e["field"] for e in post(client, body, ci_token).json()["errors"]}
    assert fields == {"exit_code", "rubrics[0].stage", "rubrics[0].total"}


def test_it_rejects_a_body_that_is_not_json(client, rubric, ci_token):
    response = post(client, "{oops", ci_token)
    assert response.status_code == 400 and "not JSON" in response.json()["errors"][0]["message"]


@pytest.mark.parametrize(("hazard", "message"), [
    ('"ref": "main", "ref": "other"', "the key 'ref' is repeated"),
    ('"cases": NaN', "NaN is not valid JSON"),
    ('"cases": 1e999', "too large"),
    ('"y": "\\ud800"', "lone surrogate"),
    ('"x": ' + "[" * 65 + "]" * 65, "deeper than 64 levels"),
])
def test_it_refuses_json_that_cannot_be_stored_with_a_json_400(client, rubric, ci_token, hazard, message):
    body = json.dumps(payload())[:-1] + ", " + hazard + "}"
    response = post(client, body, ci_token)
    assert response.status_code == 400 and message in response.json()["errors"][0]["message"]
    assert not CiResult.objects.exists()


def test_it_answers_post_only(client, ci_token):
    response = client.get(reverse("judges:api_ci_results"), headers={"Authorization": f"Bearer {ci_token}"})
    assert response.status_code == 405


def test_the_promotion_page_shows_ci_results_over_time(client, lead_client, rubric, ci_token):
    for passed, failed, ne in [(40, 0, 0), (38, 2, 0), (30, 0, 10)]:
        outcome = "fail" if failed else "not_evaluated" if ne else "pass"
        body = payload(passed=passed, failed=failed, not_evaluated=ne, outcome=outcome)
        assert post(client, body, ci_token).status_code == 201
    page = lead_client.get(reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug]))
    text = page.text
    assert "3 CI runs" in text and "108 passed" in text and "2 failed" in text and "10 not evaluated" in text
    assert text.count('<g class="ci-bar">') == 3
    assert 'class="ci-ne"' in text and 'class="ci-fail"' in text and 'class="ci-pass"' in text
    assert 'href="https://github.com/acme/agent/actions/runs/42"' in text
    partial = lead_client.get(
        reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug]) + "?days=7",
        headers={"HX-Request": "true", "HX-Target": "ci-results"},
    )
    assert partial.text.lstrip().startswith('<section class="card ci-results" id="ci-results"')
    assert partial.text.count('<g class="ci-bar">') == 3 and "<html" not in partial.text


def test_the_overview_shows_the_latest_ci_result(client, lead_client, rubric, ci_token):
    post(client, payload(passed=40, failed=0, not_evaluated=0, outcome="pass"), ci_token)
    post(client, payload(), ci_token)
    text = lead_client.get(reverse("judges:promotion_overview", args=[TEST_PROJECT])).text
    assert 'class="badge ci-outcome-fail"' in text and "38/1/1" in text


# ---- where the budget went (optional: an older command sends none) --------------------------------------

BUDGET = {"calls": 38, "cache_hits": 2, "input_tokens": 41_000, "output_tokens": 1_900, "cost_usd": 0.00729,
          "contested": 1, "latency_ms_p50": 840, "latency_ms_p95": 2_150}


def test_it_stores_the_budget_fields(client, rubric, ci_token):
    assert post(client, payload(**BUDGET), ci_token).status_code == 201
    result = CiResult.objects.get()
    assert {name: getattr(result, name) for name in BUDGET if name != "cost_usd"} == {
        name: value for name, value in BUDGET.items() if name != "cost_usd"
    }
    assert str(result.cost_usd) == "0.007290"


def test_an_older_post_without_them_and_an_unpriced_model_are_fine(client, rubric, ci_token):
    assert post(client, payload(), ci_token).status_code == 201  # no budget field at all
    unpriced = BUDGET | {"cost_usd": None, "latency_ms_p50": None, "latency_ms_p95": None}
    assert post(client, payload(**unpriced), ci_token).status_code == 201
    old, new = CiResult.objects.order_by("id")
    assert (old.calls, old.cost_usd, old.latency_ms_p50) == (None, None, None)
    assert (new.calls, new.cost_usd, new.latency_ms_p95) == (38, None, None)


@pytest.mark.parametrize(("name", "value"), [
    ("calls", -1), ("cache_hits", 1.5), ("input_tokens", "many"), ("contested", True), ("latency_ms_p95", [1]),
    ("cost_usd", -0.01), ("cost_usd", "0.5"), ("cost_usd", False), ("cost_usd", 10**9), ("output_tokens", 2**40),
])
def test_it_rejects_a_bad_budget_field_naming_it(client, rubric, ci_token, name, value):
    response = post(client, payload(**(BUDGET | {name: value})), ci_token)
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == [f"rubrics[0].{name}"]
    assert not CiResult.objects.exists()


def test_the_promotion_page_shows_the_budget_beside_the_outcomes(client, lead_client, rubric, ci_token):
    post(client, payload(), ci_token)  # an older command: no budget
    post(client, payload(**BUDGET), ci_token)
    post(client, payload(**(BUDGET | {"cost_usd": None, "calls": 12})), ci_token)  # an unpriced model
    text = lead_client.get(reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])).text
    table = text.split('data-testid="ci-table"')[1]
    rows = table.split("<tr>")[2:]  # newest first, after the header
    assert "unpriced" in rows[0] and ">12<" in rows[0]
    assert "$0.0073" in rows[1] and "41000 in" in rows[1] and "1900 out" in rows[1] and "840 / 2150 ms" in rows[1]
    assert "2 cached" in rows[1] and '<td class="num">1</td>' in rows[1]  # contested
    assert "no budget reported" in rows[2]
    spend = text.split('data-testid="ci-spend"')[1].split("</p>")[0]
    assert "Spent $0.0073" in spend and "50 provider calls, 4 cache hits" in spend
    assert "1 run with an unpriced model" in spend
    assert "38 calls, $0.0073" in text  # in the bar's title, over time


# ---- projects: results land in the token's project only -------------------------------------------------------


@pytest.fixture
def their_rubric(other_project):
    """Another project's rubric of the same slug: results judged with one project's judges never land on it."""
    from labeling.models import Rubric

    return Rubric.objects.create(project=other_project, slug="return-policy", name="Theirs?", criteria="Theirs.")


@pytest.fixture
def their_token(other_project, other_lead) -> str:
    return ApiToken.issue(project=other_project, name="their-ci", scopes=[Scope.RESULTS_WRITE],
                          created_by=other_lead)[1]


def test_results_carrying_their_project_are_stored_on_its_rubric(client, rubric, their_rubric, ci_token):
    response = post(client, payload() | {"project": TEST_PROJECT}, ci_token)
    assert response.status_code == 201
    assert CiResult.objects.get().rubric == rubric  # the token's project's rubric, not the other one of that slug


def test_results_of_another_project_are_refused_whole(client, rubric, their_rubric, their_token):
    # Judged with the store project's gate config, posted with a token of shopnest, whose rubric has the same slug.
    response = post(client, payload() | {"project": TEST_PROJECT}, their_token)
    assert response.status_code == 403
    [error] = response.json()["errors"]
    assert error["field"] == "project"
    assert "project 'store'" in error["message"] and "token is of project 'shopnest'" in error["message"]
    assert not CiResult.objects.exists()


@pytest.mark.parametrize("value", [None, "", 7, ["store"]])
def test_a_project_that_is_no_slug_is_a_400(client, rubric, ci_token, value):
    response = post(client, payload() | {"project": value}, ci_token)
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "project"
    assert not CiResult.objects.exists()


def test_a_rubric_of_another_project_is_unknown_to_the_token(client, their_rubric, ci_token):
    # The store token names a slug only shopnest has: answered as a rubric that does not exist.
    response = post(client, payload() | {"project": TEST_PROJECT}, ci_token)
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"field": "rubrics[0].slug", "message": "no rubric 'return-policy' in project 'store'"}]
    assert not CiResult.objects.exists()


def test_a_command_older_than_projects_posts_into_the_tokens_project(client, rubric, their_rubric, their_token):
    # No `project` field (evalhub-gate 0.5.0 and older, on a file exported before projects): the token decides.
    response = post(client, payload(), their_token)
    assert response.status_code == 201 and CiResult.objects.get().rubric == their_rubric
