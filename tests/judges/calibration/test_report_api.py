"""GET /api/runs/<id>/report with a runs:read token, and `manage.py calibration_report RUN_ID [--json]`."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from evalhub.models import ApiToken, Scope
from judges.calibration.selectors import run_figures
from judges.estimates.selectors import run_pass_rate
from judges.models import Run
from labeling.models import Case
from tests.conftest import TEST_PROJECT, store_project
from tests.judges.report_factories import label, make_cases, make_config, make_run

DESIGN_KEYS = {
    "n", "agreement", "agreement_ci95", "kappa", "false_pass", "false_pass_rate", "false_fail", "false_fail_rate",
    "true_pass_rate", "true_fail_rate", "flip_rate", "coverage", "by_category", "by_split", "reviewer_agreement",
}


@pytest.fixture
def run(dataset, rubric, reviewer, lead):
    a1, a2, a3 = make_cases(dataset, [("a1", "policy"), ("a2", "policy"), ("a3", "tools")])
    for case, verdict in ((a1, "pass"), (a2, "pass"), (a3, "fail")):
        label(case, rubric, reviewer, verdict)
    return make_run(make_config(rubric, lead, behavioral=True), dataset, lead, {  # a model judge: it flips
        a1: ["pass", "pass"], a2: ["pass", "fail"], a3: ["pass", "fail"],
    }, cost_usd="0.5", input_tokens=10, output_tokens=2)


def token(lead, *scopes: str, project=None) -> str:
    return ApiToken.issue(project=project or store_project(), name="ci", scopes=list(scopes), created_by=lead)[1]


def api_url(run_id: int) -> str:
    return reverse("judges:api_run_report", args=[run_id])


def test_it_answers_401_without_a_token(client, run):
    response = client.get(api_url(run.pk))
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_it_does_not_take_a_session_for_a_token(lead_client, run):
    assert lead_client.get(api_url(run.pk)).status_code == 401


def test_it_answers_403_for_a_token_without_runs_read(client, run, lead):
    raw = token(lead, Scope.GATES_READ, Scope.CASES_WRITE)
    assert client.get(api_url(run.pk), headers={"Authorization": f"Bearer {raw}"}).status_code == 403


def test_it_returns_the_figures_with_designs_keys(client, run, lead):
    raw = token(lead, Scope.RUNS_READ)
    response = client.get(api_url(run.pk), headers={"Authorization": f"Bearer {raw}"})
    assert response.status_code == 200
    body = response.json()
    assert DESIGN_KEYS <= set(body)
    stored = Run.objects.get(pk=run.pk)
    assert body == json.loads(json.dumps({**run_figures(run=stored), "pass_rate": run_pass_rate(run=stored)}))
    assert body["pass_rate"]["N"] == 3 and body["pass_rate"]["n_drawn"] == 0  # no audit sample yet
    # 4 matching of 6 evaluated judgments; JSON is unrounded.
    assert body["agreement"] == 4 / 6
    assert body["run"] == run.pk and body["repeats"] == 2
    assert body["tokens"] == {"input": 10, "output": 2} and body["cost_usd"] == 0.5


def test_it_answers_404_json_for_an_unknown_run(client, lead):
    raw = token(lead, Scope.RUNS_READ)
    response = client.get(api_url(999999), headers={"Authorization": f"Bearer {raw}"})
    assert response.status_code == 404 and "error" in response.json()


def test_it_refuses_other_methods(client, run, lead):
    raw = token(lead, Scope.RUNS_READ)
    response = client.post(api_url(run.pk), headers={"Authorization": f"Bearer {raw}"})
    assert response.status_code == 405 and response["Allow"] == "GET"


def test_it_refuses_a_revoked_token(client, run, lead):
    row, raw = ApiToken.issue(project=store_project(), name="ci", scopes=[Scope.RUNS_READ], created_by=lead)
    row.revoke()
    assert client.get(api_url(run.pk), headers={"Authorization": f"Bearer {raw}"}).status_code == 401


# ---- the command ----------------------------------------------------------------------------------


def test_the_command_prints_the_same_json_as_the_api(run, client, lead):
    out = StringIO()
    call_command("calibration_report", str(run.pk), "--json", stdout=out)
    printed = json.loads(out.getvalue())
    raw = token(lead, Scope.RUNS_READ)
    assert printed == client.get(api_url(run.pk), headers={"Authorization": f"Bearer {raw}"}).json()
    assert DESIGN_KEYS <= set(printed)


def test_the_command_prints_a_readable_summary(run):
    out = StringIO()
    call_command("calibration_report", str(run.pk), stdout=out)
    text = out.getvalue()
    assert f"Run {run.pk}: return-policy v1 on store-support, K = 2" in text
    assert "agreement                   66.7 %" in text
    assert "Not promotable:" in text
    assert "✗ cases with a human verdict: 3 (needs ≥ 30)" in text
    assert "✗ flip rate: 66.7 % (needs ≤ 5.0 %)" in text


def test_the_command_refuses_an_unknown_run(db):
    with pytest.raises(CommandError, match="No run 424242"):
        call_command("calibration_report", "424242")


def test_the_json_has_the_figures_by_kind_from_the_database(client, run, lead, lead_client):
    # a1 good (pass, pass on a human pass), a2 bad (pass, fail on a human pass), a3 none (pass, fail on a fail)
    Case.objects.filter(external_id="a1").update(kind="good")
    Case.objects.filter(external_id="a2").update(kind="bad")

    body = client.get(api_url(run.pk), headers={"Authorization": f"Bearer {token(lead, Scope.RUNS_READ)}"}).json()

    by_kind = body["by_kind"]
    assert list(by_kind) == ["bad", "good", "unset"]
    assert (by_kind["good"]["n"], by_kind["good"]["agreement"]) == (1, 1.0)
    assert (by_kind["bad"]["agreement"], by_kind["bad"]["false_fail"], by_kind["bad"]["flip_rate"]) == (0.5, 1, 1.0)
    assert (by_kind["unset"]["agreement"], by_kind["unset"]["false_pass"]) == (0.5, 1)
    assert body["missing_kinds"] == ["incomplete", "injection", "paraphrase"]
    page = lead_client.get(reverse("judges:run_report", args=[TEST_PROJECT, run.pk])).text
    assert 'data-testid="missing-kinds"' in page and "incomplete, injection, paraphrase" in page
    assert 'data-group="unset"' in page
