"""Agent outputs and traces are untrusted: markup in them renders as text on every page that shows it."""

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from labeling.importing import Format
from labeling.importing.cases import cases_import
from labeling.models import Case, Label
from tests.conftest import TEST_PROJECT

pytestmark = pytest.mark.django_db

SCRIPT = '<script>alert("owned")</script>'
IMG = "<img src=x onerror=alert(1)>"
ESCAPED = ("&lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt;", "&lt;img src=x onerror=alert(1)&gt;")


def hostile_case() -> dict:
    return {
        "external_id": "x<b>1</b>",
        "input": SCRIPT,
        "output": IMG,
        "trace": {
            "toolCalls": [{"name": SCRIPT, "argument": {"q": IMG}, "result": SCRIPT}],
            "retrievedSources": [IMG],
            "context": SCRIPT,
            IMG: SCRIPT,
        },
        "golden_answer": IMG,
        "expected_behaviour": SCRIPT,
        "expected_tool": IMG[:60],
        "expected_tool_argument": [SCRIPT],
        "expected_source": SCRIPT,
        "category": IMG,
        "metadata": {SCRIPT: IMG},
    }


@pytest.fixture
def case(dataset) -> Case:
    content = (json.dumps(hostile_case()) + "\n").encode()
    cases_import(dataset=dataset, stream=io.BytesIO(content), fmt=Format.JSONL)
    return Case.objects.get()


def assert_inert(body: str) -> None:
    assert SCRIPT not in body and IMG not in body
    assert "<b>1</b>" not in body
    assert all(escaped in body for escaped in ESCAPED)


def test_the_case_page_shows_markup_as_text(lead_client, case, rubric, reviewer):
    Label.objects.create(case=case, rubric=rubric, reviewer=reviewer, verdict="fail", note=SCRIPT + IMG,
                         content_hash=case.content_hash)
    response = lead_client.get(reverse("labeling:case_detail", args=[TEST_PROJECT, case.pk]))
    assert "script-src 'self'" in response["Content-Security-Policy"]
    assert_inert(response.content.decode())


def test_the_case_page_shows_markup_as_text_to_reviewers(client, case, reviewer):
    client.force_login(reviewer)
    assert_inert(client.get(reverse("labeling:case_detail", args=[TEST_PROJECT, case.pk])).content.decode())


def test_the_case_list_shows_markup_as_text(lead_client, case, dataset):
    url = reverse("labeling:dataset_detail", args=[TEST_PROJECT, dataset.slug])
    assert_inert(lead_client.get(url).content.decode())
    partial = lead_client.get(url, {"category": IMG}, headers={"HX-Request": "true"}).content.decode()
    assert SCRIPT not in partial and IMG not in partial and ESCAPED[0] in partial


def test_import_errors_show_markup_as_text(lead_client, dataset):
    bad = {"external_id": SCRIPT, "input": IMG, "output": 1}
    content = (json.dumps(bad) + "\n" + json.dumps(bad) + "\n").encode()
    response = lead_client.post(reverse("labeling:dataset_import", args=[TEST_PROJECT, dataset.slug]), {
        "kind": "cases", "cases-file": SimpleUploadedFile(f"{IMG}.jsonl", content),
    })
    body = response.content.decode()
    assert response.context["rejected"]["errors"]
    assert SCRIPT not in body and IMG not in body
