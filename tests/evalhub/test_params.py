"""The one rule for ids, numbers and text in a request (evalhub/params.py), through the pages and APIs that
answered 500 before it: a NUL is 400, a malformed id 404, a number out of range 400 with a message."""

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from evalhub.models import ApiToken, Scope
from evalhub.params import object_id, whole
from judges.models import CiResult, JudgeConfig
from labeling.importing.cases import cases_import_objects
from labeling.models import Case, Dataset
from tests.conftest import TEST_PROJECT
from tests.judges.configs.test_views import form_data
from tests.judges.report_factories import make_config, make_run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("value", ["²", "-1", " 1", "1e3", "9" * 5000, str(2**63), "", "0"])
def test_it_takes_no_id_but_plain_ascii_digits_within_a_bigint(value):
    assert object_id(value) is None


def test_it_takes_ids_and_numbers_as_before():
    assert (object_id("1"), object_id(str(2**63 - 1)), whole("0"), whole(str(2**31 - 1))) == (1, 2**63 - 1, 0,
                                                                                                2**31 - 1)
    assert whole(str(2**31)) is None


@pytest.mark.parametrize("url", ["/label/history/?q=%00", "/label/history/?dataset=%00", "/runs/?q=%00",
                                 "/promotion/audit/?q=%00"])
def test_a_nul_in_a_search_or_filter_is_400_not_500(lead_client, dataset, url):
    response = lead_client.get(url)
    assert response.status_code == 400
    assert "holds a NUL character" in response.content.decode()


def test_a_nul_in_a_form_field_is_400(lead_client, dataset, rubric):
    case = cases_import_objects(dataset=dataset, objects=[{"external_id": "c1", "input": "q", "output": "a"}])
    url = reverse("labeling:request_label", args=[TEST_PROJECT, dataset.slug, rubric.slug, Case.objects.get().pk])
    assert case and lead_client.post(url, {"reason": "why\x00"}).status_code == 400


def test_the_kinds_filter_carried_in_a_form_field_refuses_a_nul(lead_client, dataset):
    url = reverse("labeling:dataset_kinds", args=[TEST_PROJECT, dataset.slug])
    response = lead_client.post(url, {"set_kind": "ood", "scope": "filtered", "filter_query": "q=%00"})
    assert response.status_code == 400


@pytest.mark.parametrize("value", ["²", "9" * 5000, "9" * 20])
def test_a_malformed_case_id_in_the_queue_is_404(reviewer_client, dataset, rubric, value):
    url = reverse("labeling:queue", args=[TEST_PROJECT, dataset.slug, rubric.slug])
    assert reviewer_client.get(url, {"case": value}).status_code == 404


@pytest.mark.parametrize("value", ["#²", "#" + "9" * 5000])
def test_the_runs_search_for_an_odd_id_finds_none(lead_client, value):
    assert lead_client.get(reverse("judges:run_list", args=[TEST_PROJECT]), {"q": value}).status_code == 200


@pytest.mark.parametrize("value", ["1e309", "nan", "²", "9" * 5000])
def test_a_since_out_of_range_is_400_with_a_message(lead_client, dataset, rubric, lead, value):
    run = make_run(make_config(rubric, lead), dataset, lead, {}, status="queued")
    response = lead_client.get(reverse("judges:run_progress", args=[TEST_PROJECT, run.pk]), {"since": value})
    assert response.status_code == 400
    assert "since must be a number from 0 to" in response.content.decode()


def test_a_since_the_page_wrote_still_works(lead_client, dataset, rubric, lead):
    run = make_run(make_config(rubric, lead), dataset, lead, {}, status="queued")
    url = reverse("judges:run_progress", args=[TEST_PROJECT, run.pk])
    assert lead_client.get(url, {"since": "1718000000"}).status_code == 200


def test_a_preview_of_a_policy_version_in_superscript_is_no_500(lead_client, rubric, dataset):
    url = reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug])
    response = lead_client.post(url, form_data(action="preview", policy_ref="returns@²"), headers={"HX-Request": "1"})
    assert response.status_code == 200


@pytest.mark.parametrize(("field", "value", "message"), [
    ("json_schema", '{"$schema": {"a": 1}, "type": "object"}', "$schema must be a string"),
    ("json_schema", '{"$schema": 1}', "$schema must be a string"),
    ("params", '{"temperature": 0, "stop": ["\\u0000"]}', "NUL character"),
    ("json_schema", '{"type": "object", "title": "\\u0000"}', "NUL character"),
    # Patterns run on RE2: a backreference is what it cannot take (1,000 nested groups it compiles, in linear time).
    ("must_match", "(a)\\1", "RE2 cannot take pattern 1"),
])
def test_the_config_editor_refuses_what_it_cannot_store_or_compile(lead_client, rubric, field, value, message):
    response = lead_client.post(reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug]),
                                form_data(**{field: value}))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not JudgeConfig.objects.exists()


def test_the_engine_names_a_regex_too_deep_to_compile():
    from judges.engine.fields import regexes
    with pytest.raises(ValueError, match="must_match: invalid regular expression"):
        regexes({"must_match": ["(" * 1000 + ")" * 1000]}, "must_match")


def test_back_that_is_no_path_goes_to_the_disputes_page(lead_client, dataset, rubric):
    cases_import_objects(dataset=dataset, objects=[{"external_id": "c1", "input": "q", "output": "a"}])
    url = reverse("labeling:adjudicate", args=[TEST_PROJECT, dataset.slug, rubric.slug, Case.objects.get().pk])
    response = lead_client.post(url, {"verdict": "pass", "back": "foo"})
    assert response.status_code == 302
    assert response["Location"] == reverse("labeling:disputes", args=[TEST_PROJECT, dataset.slug, rubric.slug])
    page = reverse("labeling:disputes", args=[TEST_PROJECT, dataset.slug, rubric.slug]) + "?status=decided"
    assert lead_client.post(url, {"verdict": "fail", "back": page})["Location"] == page


def test_import_cases_refuses_the_reserved_slug_new(tmp_path):
    file = tmp_path / "cases.jsonl"
    file.write_text(json.dumps({"external_id": "c1", "input": "q", "output": "a"}) + "\n")
    with pytest.raises(CommandError, match="reserved"):
        call_command("import_cases", "new", str(file), stdout=io.StringIO())
    assert not Dataset.objects.filter(slug="new").exists()


def _ci_payload(**rubric) -> dict:
    return {"schema": "evalhub.ci-results/v1", "exit_code": 0, "rubrics": [{
        "slug": "return-policy", "stage": "observe", "config_hash": "0" * 64, "outcome": "pass",
        "passed": 1, "failed": 0, "not_evaluated": 0, "total": 1, **rubric}]}


@pytest.mark.parametrize(("payload", "field"), [
    (_ci_payload(passed=2**31, total=2**31), "rubrics[0].passed"),
    (_ci_payload(slug="return\x00policy"), None),
    ({**_ci_payload(), "commit": "abc\x00"}, None),
    (_ci_payload(failed_cases=["c\x00"]), None),
])
def test_ci_results_refuse_counts_over_an_integer_column_and_nul_strings(client, rubric, lead, payload, field):
    _, token = ApiToken.issue(project=rubric.project, name="ci", scopes=[Scope.RESULTS_WRITE], created_by=lead)
    response = client.post(reverse("judges:api_ci_results"), json.dumps(payload), content_type="application/json",
                           headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 400, response.content
    assert field in [error["field"] for error in response.json()["errors"]]
    assert not CiResult.objects.exists()


def test_the_case_api_checks_its_filters_before_it_streams(client, dataset, lead):
    cases_import_objects(dataset=dataset, objects=[{"external_id": "c1", "input": "q", "output": "a"}])
    _, token = ApiToken.issue(project=dataset.project, name="read", scopes=[Scope.CASES_READ], created_by=lead)
    url = reverse("labeling:api_cases_ingest", args=[dataset.slug])
    headers = {"Authorization": f"Bearer {token}"}
    response = client.get(url, {"category": "\x00"}, headers=headers)
    assert response.status_code == 400 and not response.streaming
    assert response.json()["errors"][0]["field"] == "category"
    response = client.get(url, {"sample": "9" * 5000, "seed": "s"}, headers=headers)
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "sample"
