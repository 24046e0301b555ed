"""`evalhub-gate check --redact KIND…`: the judge (the stand-in, over real HTTP) and the reports see only the
redacted text; and the client that reads a dataset's redaction kinds from the server."""

import json

import pytest

from evalhub.models import ApiToken, Scope
from judges.gate.messages import ConfigError
from judges.gate.server import fetch_redaction
from labeling.datasets.services import dataset_set_redaction
from tests.conftest import store_project
from tests.judges.gate.test_cli import PASS_RULE, gate_rubric, run

EMAIL, CARD, PHONE = "jane.doe@example.com", "4111 1111 1111 1111", "+44 20 7946 0958"


def personal_case(external_id: str) -> dict:
    return {
        "external_id": external_id, "input": f"I am {EMAIL}, call {PHONE}. Can I return shoes?",
        "output": f"Yes, {EMAIL}: returns are accepted within 30 days; refund to card {CARD}.",
        "trace": {"context": f"Customer {EMAIL}",
                  "toolCalls": [{"name": "refund", "argument": {"card": CARD}, "result": f"sent to {EMAIL}"}]},
        "golden_answer": f"Returns within 30 days, {EMAIL}.", "category": "policy",
    }


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("EVALHUB_TOKEN", raising=False)
    return tmp_path


def test_the_judge_and_the_reports_see_only_placeholders(workdir, fake_provider):
    fake_provider.control(rule=PASS_RULE)
    code = run(workdir, [gate_rubric()], [personal_case("c-1"), personal_case("c-2")],
               "--redact", "email", "card", "phone", "--json", "results.json")

    assert code == 0  # the verdicts stand: "30 days" is still in the answer
    prompts = [request["prompt"] for request in fake_provider.requests()]
    assert len(prompts) == 2
    for prompt in prompts:
        assert EMAIL not in prompt and CARD not in prompt and PHONE not in prompt
        assert "Yes, [EMAIL_1]: returns are accepted within 30 days; refund to card [CARD_1]." in prompt
        assert "I am [EMAIL_1], call [PHONE_1]." in prompt
    report = (workdir / "results.json").read_text()
    assert EMAIL not in report and CARD not in report


def test_without_redact_the_judge_sees_the_text_as_it_is(workdir, fake_provider):
    fake_provider.control(rule=PASS_RULE)
    run(workdir, [gate_rubric()], [personal_case("c-1")])
    assert EMAIL in fake_provider.requests()[0]["prompt"]


def test_an_unknown_kind_is_a_usage_error(workdir, fake_provider, capsys):
    assert run(workdir, [gate_rubric()], [personal_case("c-1")], "--redact", "names") == 2
    assert "invalid choice: 'names'" in capsys.readouterr().err
    assert fake_provider.requests() == []


@pytest.mark.django_db(transaction=True)
def test_the_client_reads_the_datasets_kinds_from_the_server(live_server, dataset, lead):
    dataset_set_redaction(dataset=dataset, kinds=["card", "email"], by=lead)
    token = ApiToken.issue(project=store_project(), name="ci", scopes=[Scope.CASES_READ], created_by=lead)[1]

    assert fetch_redaction(live_server.url, dataset.slug, token=token) == ("email", "card")
    with pytest.raises(ConfigError, match="HTTP 404"):
        fetch_redaction(live_server.url, "no-such-set", token=token)
    wrong = ApiToken.issue(project=store_project(), name="gates", scopes=[Scope.GATES_READ], created_by=lead)[1]
    with pytest.raises(ConfigError, match="HTTP 403.*lacks the scope 'cases:read' or 'cases:write'"):
        fetch_redaction(live_server.url, dataset.slug, token=wrong)


def test_the_client_refuses_a_kind_it_cannot_redact(monkeypatch):
    monkeypatch.setattr("judges.gate.server.http_request", lambda request, what: json.dumps(
        {"dataset": "s", "redact": ["email", "passport"]}).encode())
    with pytest.raises(ConfigError, match="cannot redact passport"):
        fetch_redaction("https://evalhub.example", "s", token="t")
