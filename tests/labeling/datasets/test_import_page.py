import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from labeling.models import Case, Label
from tests.conftest import TEST_PROJECT

pytestmark = pytest.mark.django_db


def jsonl(*objects) -> bytes:
    return "".join(json.dumps(o) + "\n" for o in objects).encode()


def upload(client, dataset, content: bytes, name="cases.jsonl", kind="cases", **fields):
    data = {"kind": kind, f"{kind}-file": SimpleUploadedFile(name, content)}
    data |= {f"{kind}-{key}": value for key, value in fields.items()}
    return client.post(reverse("labeling:dataset_import", args=[TEST_PROJECT, dataset.slug]), data)


def test_it_shows_both_upload_forms(lead_client, dataset, rubric):
    body = lead_client.get(reverse("labeling:dataset_import", args=[TEST_PROJECT, dataset.slug])).content.decode()
    assert 'name="cases-file"' in body and 'name="cases-update"' in body
    assert 'name="labels-file"' in body and f'value="{rubric.slug}"' in body
    assert 'enctype="multipart/form-data"' in body


def test_it_imports_cases_and_reports_counts(lead_client, dataset):
    response = upload(lead_client, dataset, jsonl({"external_id": "a", "input": "q", "output": "x"},
                                                  {"external_id": "b", "input": "q", "output": "y"}))

    assert response["Location"] == reverse("labeling:dataset_detail", args=[TEST_PROJECT, dataset.slug])
    assert dataset.cases.count() == 2
    page = lead_client.get(response["Location"]).content.decode()
    assert "Imported cases.jsonl: 2 created, 0 updated, 0 unchanged." in page


def test_it_lists_every_error_by_line_and_imports_nothing(lead_client, dataset):
    content = b'external_id,input,output,trace\r\na,q,x,\r\nb,q,,"[1]"\r\na,q,y,\r\n,q,z,\r\n'

    response = upload(lead_client, dataset, content, name="cases.csv")

    assert response.status_code == 200
    assert [(e.row, e.field) for e in response.context["rejected"]["errors"]] == [
        (3, "trace"), (4, "external_id"), (5, "external_id"),
    ]
    body = response.content.decode()
    assert "cases.csv was rejected: 3 errors, nothing was imported" in body
    assert "<strong>line 4</strong> <code>external_id</code>: &#x27;a&#x27; appears twice" in body
    assert not Case.objects.exists()


def test_the_update_checkbox_updates_existing_cases(lead_client, dataset):
    upload(lead_client, dataset, jsonl({"external_id": "a", "input": "q", "output": "old"}))
    content = jsonl({"external_id": "a", "input": "q", "output": "new"})

    refused = upload(lead_client, dataset, content)
    assert "already exists" in refused.content.decode()

    upload(lead_client, dataset, content, update="on")
    assert Case.objects.get().output == "new"


def test_it_imports_labels_for_a_rubric(lead_client, dataset, rubric):
    upload(lead_client, dataset, jsonl({"external_id": "a", "input": "q", "output": "x"}))
    response = upload(lead_client, dataset, b"external_id,reviewer,verdict,note\r\na,newbie,Pass,\r\n",
                      name="labels.csv", kind="labels", rubric=rubric.slug)
    assert response.status_code == 302
    assert list(Label.objects.values_list("reviewer__username", "verdict", "rubric__slug")) == [
        ("newbie", "pass", rubric.slug)
    ]


def test_it_needs_a_known_format(lead_client, dataset):
    content = jsonl({"external_id": "a", "input": "q", "output": "x"})
    response = upload(lead_client, dataset, content, name="cases.txt")
    assert "extension" in str(response.context["case_form"].errors["format"])
    assert upload(lead_client, dataset, content, name="cases.txt", format="jsonl").status_code == 302


def test_it_refuses_a_file_over_the_limit_before_reading_it(lead_client, dataset, settings):
    settings.EVALHUB_IMPORT_MAX_BYTES = 10
    response = upload(lead_client, dataset, jsonl({"external_id": "a", "input": "q", "output": "x"}))
    assert "the limit is 10" in str(response.context["case_form"].errors["file"])
    assert not Case.objects.exists()
