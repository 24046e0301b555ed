"""A dataset's redaction on every way cases come in: the page's upload (JSONL and CSV), import_cases, the
ingest API. The stored rows, the server log and the error messages carry no original: read back here."""

import csv
import io
import json
import logging
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.db import connection
from django.urls import reverse

from evalhub.models import ApiToken, Scope
from labeling.disputes.selectors import counting_labels
from labeling.importing.cases import cases_import_objects
from labeling.models import Case, DatasetEvent, Label
from tests.conftest import TEST_PROJECT, store_project

pytestmark = pytest.mark.django_db

# One value of each kind (synthetic: test card and IBAN, reserved phone and address ranges).
ORIGINALS = {
    "email": "jane.doe@example.com",
    "phone": "+44 20 7946 0958",
    "card": "4111 1111 1111 1111",
    "iban": "DE89 3704 0044 0532 0130 00",
    "ip": "192.0.2.44",
    "secret": "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
}
ALL = " ".join(ORIGINALS.values())
NEAR_MISSES = "order 4111111111111112, IBAN DE89370400440532013001"


def case(external_id: str = "t-1") -> dict:
    """Every kind in the input, the output, the trace (context, a tool's argument and result), the metadata
    and the expectations."""
    return {
        "external_id": external_id, "input": f"Me: {ALL}", "output": f"Noted {ORIGINALS['email']}. {NEAR_MISSES}",
        "trace": {"context": f"CRM: {ALL}",
                  "toolCalls": [{"name": "refund", "argument": {"to": ORIGINALS["email"], "card": ORIGINALS["card"]},
                                 "result": {"ok": True, "log": ALL}}]},
        "golden_answer": f"Refund to {ORIGINALS['email']}.", "expected_behaviour": f"Never echo {ORIGINALS['card']}.",
        "expected_tool": "refund", "expected_tool_argument": {"to": ORIGINALS["email"], "card": ORIGINALS["card"]},
        "metadata": {"references": [f"Refunded {ORIGINALS['iban']}"], "customer": {"ip": ORIGINALS["ip"],
                                                                                 "phone": ORIGINALS["phone"]}},
    }


def stored_text() -> str:
    """Every column of every stored case, as the database returns it."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {Case._meta.db_table}")
        return json.dumps(cursor.fetchall(), default=str, ensure_ascii=False)


def assert_no_original(text: str) -> None:
    for kind, value in ORIGINALS.items():
        assert value not in text, kind
        assert value.replace(" ", "") not in text, kind


def assert_redacted(stored: Case) -> None:
    assert stored.input == "Me: [EMAIL_1] [PHONE_1] [CARD_1] [IBAN_1] [IP_1] [SECRET_1]"
    assert stored.output == f"Noted [EMAIL_1]. {NEAR_MISSES}"  # near-misses untouched
    assert stored.trace["toolCalls"][0]["argument"] == stored.expected_tool_argument == {
        "to": "[EMAIL_1]", "card": "[CARD_1]"}
    assert stored.trace["toolCalls"][0]["result"]["log"] == stored.trace["context"][len("CRM: "):]
    assert stored.metadata == {"references": ["Refunded [IBAN_1]"], "customer": {"ip": "[IP_1]", "phone": "[PHONE_1]"}}
    assert (stored.golden_answer, stored.expected_behaviour) == ("Refund to [EMAIL_1].", "Never echo [CARD_1].")


@pytest.fixture
def redacting(dataset, lead):
    from labeling.datasets.services import dataset_set_redaction

    dataset_set_redaction(dataset=dataset, kinds=list(ORIGINALS), by=lead)
    return dataset


@pytest.fixture
def server_log(caplog):
    caplog.set_level(logging.DEBUG)  # every logger, every level: what the server would write
    return caplog


def jsonl(*objects) -> bytes:
    return "".join(json.dumps(o) + "\n" for o in objects).encode()


def csv_bytes(*objects) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(objects[0]))
    writer.writeheader()
    for obj in objects:
        writer.writerow({k: json.dumps(v) if isinstance(v, dict | list) else v for k, v in obj.items()})
    return out.getvalue().encode()


def upload(client, dataset, content: bytes, name: str):
    return client.post(reverse("labeling:dataset_import", args=[TEST_PROJECT, dataset.slug]),
                       {"kind": "cases", "cases-file": SimpleUploadedFile(name, content)})


def ingest(client, dataset, body, token: str):
    return client.post(reverse("labeling:api_cases_ingest", args=[dataset.slug]), data=json.dumps(body),
                       content_type="application/json", headers={"Authorization": f"Bearer {token}"})


@pytest.fixture
def write_token(lead) -> str:
    return ApiToken.issue(project=store_project(), name="ingest", scopes=[Scope.CASES_WRITE], created_by=lead)[1]


def test_the_page_upload_stores_no_original(lead_client, redacting, server_log):
    response = upload(lead_client, redacting, jsonl(case("a"), case("b")), "cases.jsonl")
    assert response.status_code == 302
    assert_redacted(Case.objects.get(external_id="a"))
    assert_no_original(stored_text())
    assert_no_original(server_log.text)


def test_a_csv_upload_stores_no_original(lead_client, redacting, server_log):
    assert upload(lead_client, redacting, csv_bytes(case("a")), "cases.csv").status_code == 302
    assert_redacted(Case.objects.get())
    assert_no_original(stored_text() + server_log.text)


def test_import_cases_stores_no_original(redacting, tmp_path, capsys, server_log):
    path = tmp_path / "cases.jsonl"
    path.write_bytes(jsonl(case()))
    call_command("import_cases", redacting.slug, str(path))
    assert_redacted(Case.objects.get())
    assert_no_original(stored_text() + server_log.text + capsys.readouterr().out)


def test_the_ingest_api_stores_no_original(client, redacting, write_token, server_log):
    assert ingest(client, redacting, [case("a"), case("b")], write_token).status_code == 201
    assert_redacted(Case.objects.get(external_id="b"))
    assert_no_original(stored_text() + server_log.text)


def test_a_rejected_line_is_reported_without_the_original(client, lead_client, redacting, write_token, tmp_path,
                                                           server_log):
    # A repeated key is an error that quotes the key; here the key is an address.
    bad = '{"external_id": "x", "input": "q", "output": "a", "metadata": {"%s": 1, "%s": 2}}' % (
        (ORIGINALS["email"],) * 2)
    api = client.post(reverse("labeling:api_cases_ingest", args=[redacting.slug]), data=f"[{bad}]",
                      content_type="application/json", headers={"Authorization": f"Bearer {write_token}"})
    page = upload(lead_client, redacting, (bad + "\n").encode(), "cases.jsonl")
    path = tmp_path / "bad.jsonl"
    path.write_text(bad + "\n")
    with pytest.raises(CommandError) as command:
        call_command("import_cases", redacting.slug, str(path))

    assert api.status_code == 400 and "the key '[EMAIL_1]' is repeated" in api.content.decode()
    assert "[EMAIL_1]" in page.content.decode()
    assert_no_original(api.content.decode() + page.content.decode() + str(command.value) + server_log.text)
    assert not Case.objects.exists()


def test_without_redaction_the_text_is_stored_as_it_came(dataset):
    cases_import_objects(dataset=dataset, objects=[case()])
    assert Case.objects.get().input == f"Me: {ALL}"


def test_a_redacted_case_reimported_is_unchanged(redacting):
    cases_import_objects(dataset=redacting, objects=[case()])
    again = cases_import_objects(dataset=redacting, objects=[case()], update=True)
    assert str(again) == "0 created, 0 updated, 1 unchanged"


# --- the setting, and the cases already stored ---------------------------------------------------------------


def test_a_lead_sets_the_redaction_on_the_dataset_page_and_it_is_audited(lead_client, dataset, lead):
    url = reverse("labeling:dataset_redaction", args=[TEST_PROJECT, dataset.slug])
    response = lead_client.post(url, {"action": "save", "redact": ["email", "card"]})

    assert response.status_code == 302
    dataset.refresh_from_db()
    assert dataset.redact_kinds == ("email", "card")
    event = DatasetEvent.objects.get()
    assert (event.kind, event.by, event.detail) == ("redaction_set", lead, "redact email, card (was nothing)")
    page = lead_client.get(reverse("labeling:dataset_detail", args=[TEST_PROJECT, dataset.slug])).content.decode()
    assert "redact email, card (was nothing)" in page
    checked = set(re.findall(r'name="redact" value="(\w+)"[^>]*checked', page))
    assert checked == {"email", "card"}


def test_an_unknown_kind_is_refused_and_nothing_changes(lead_client, dataset):
    response = lead_client.post(reverse("labeling:dataset_redaction", args=[TEST_PROJECT, dataset.slug]),
                                {"action": "save", "redact": ["email", "name"]}, follow=True)
    assert "Choose among the redaction kinds shown." in response.content.decode()
    dataset.refresh_from_db()
    assert dataset.redact == "" and not DatasetEvent.objects.exists()


def test_reviewers_cannot_set_or_apply_redaction(reviewer_client, dataset):
    for action in ("save", "apply"):
        response = reviewer_client.post(reverse("labeling:dataset_redaction", args=[TEST_PROJECT, dataset.slug]),
                                        {"action": action, "redact": ["email"]})
        assert response.status_code == 403
    dataset.refresh_from_db()
    assert dataset.redact == "" and not DatasetEvent.objects.exists()


def test_stored_cases_change_only_when_a_lead_applies_the_redaction(lead_client, dataset, rubric, reviewer):
    cases_import_objects(dataset=dataset, objects=[case("a"), {"external_id": "plain", "input": "q", "output": "a"}])
    for stored in Case.objects.all():
        Label.objects.create(case=stored, rubric=rubric, reviewer=reviewer, verdict="pass",
                             content_hash=stored.content_hash)
    url = reverse("labeling:dataset_redaction", args=[TEST_PROJECT, dataset.slug])
    lead_client.post(url, {"action": "save", "redact": list(ORIGINALS)})
    assert Case.objects.get(external_id="a").input == f"Me: {ALL}"  # not rewritten silently

    response = lead_client.post(url, {"action": "apply"}, follow=True)

    assert "1 case changed" in response.content.decode()
    assert_redacted(Case.objects.get(external_id="a"))
    assert_no_original(stored_text())
    counting = set(counting_labels(rubric=rubric).values_list("case__external_id", flat=True))
    assert counting == {"plain"}  # the rewritten case's label stopped counting, like any content change
    assert list(DatasetEvent.objects.values_list("kind", "detail"))[0] == (
        "redaction_applied", "email, phone, card, iban, ip, secret redacted from the stored cases: 1 changed")


def test_applying_with_no_kind_chosen_is_refused(lead_client, dataset):
    response = lead_client.post(reverse("labeling:dataset_redaction", args=[TEST_PROJECT, dataset.slug]),
                                {"action": "apply"}, follow=True)
    assert "This dataset redacts nothing" in response.content.decode()
    assert not DatasetEvent.objects.exists()


# --- what a token reads about a dataset ------------------------------------------------------------------------


@pytest.mark.parametrize("scope, status", [(Scope.CASES_READ, 200), (Scope.CASES_WRITE, 200), (Scope.GATES_READ, 403)])
def test_a_cases_token_reads_the_datasets_redaction(client, redacting, lead, scope, status):
    token = ApiToken.issue(project=store_project(), name="ci", scopes=[scope], created_by=lead)[1]
    response = client.get(reverse("labeling:api_dataset", args=[redacting.slug]),
                          headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == status
    if status == 200:
        assert response.json() == {"dataset": redacting.slug, "name": redacting.name, "redact": list(ORIGINALS)}
    else:
        assert response.json() == {"error": "This token lacks the scope 'cases:read' or 'cases:write'."}


def test_the_dataset_endpoint_needs_a_token(client, lead_client, redacting):
    assert client.get(reverse("labeling:api_dataset", args=[redacting.slug])).status_code == 401
    assert lead_client.get(reverse("labeling:api_dataset", args=[redacting.slug])).status_code == 401
