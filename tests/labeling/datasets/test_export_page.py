import csv
import io

import pytest
from django.http import StreamingHttpResponse
from django.urls import reverse

from labeling.datasets.exporting import cases_export
from labeling.importing import Format
from labeling.importing.cases import cases_import_objects
from labeling.models import Case, Label
from tests.conftest import TEST_PROJECT

pytestmark = pytest.mark.django_db


@pytest.fixture
def labeled(dataset, rubric, reviewer):
    cases_import_objects(dataset=dataset, objects=[
        {"external_id": f"c{i}", "input": "q", "output": f"answer {i}", "category": "policy"} for i in range(3)
    ])
    for case in Case.objects.all():
        Label.objects.create(case=case, rubric=rubric, reviewer=reviewer, verdict="pass",
                             content_hash=case.content_hash)


def download(client, dataset, kind, **params):
    return client.get(reverse("labeling:dataset_export", args=[TEST_PROJECT, dataset.slug, kind]), params)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_it_streams_the_cases_in_their_import_format(lead_client, dataset, labeled, fmt):
    response = download(lead_client, dataset, "cases", format=fmt)

    assert isinstance(response, StreamingHttpResponse)
    assert response["Content-Disposition"] == f'attachment; filename="store-support-cases.{fmt}"'
    assert b"".join(response.streaming_content).decode() == "".join(cases_export(dataset=dataset,
                                                                                 fmt=Format(fmt)))


def test_it_downloads_a_rubrics_labels(lead_client, dataset, rubric, labeled):
    response = download(lead_client, dataset, "labels", rubric=rubric.slug, format="csv")
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows == [["external_id", "reviewer", "verdict", "note"]] + [[f"c{i}", "rita", "pass", ""] for i in range(3)]
    assert "labels-return-policy.csv" in response["Content-Disposition"]


def test_it_downloads_the_report(lead_client, dataset, rubric, labeled):
    response = download(lead_client, dataset, "report")
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0][-1] == "return-policy" and [row[-1] for row in rows[1:]] == ["pass"] * 3
    assert response["Content-Type"].startswith("text/csv")


@pytest.mark.parametrize(("kind", "params"), [("everything", {}), ("cases", {"format": "xml"}),
                                              ("labels", {"rubric": "nope"})])
def test_unknown_exports_are_404(lead_client, dataset, kind, params):
    assert download(lead_client, dataset, kind, **params).status_code == 404


def test_the_dataset_page_links_to_the_exports(lead_client, dataset, rubric, labeled):
    body = lead_client.get(reverse("labeling:dataset_detail", args=[TEST_PROJECT, dataset.slug])).content.decode()
    assert f'action="{reverse("labeling:dataset_export", args=[TEST_PROJECT, dataset.slug, "cases"])}"' in body
    assert reverse("labeling:dataset_export", args=[TEST_PROJECT, dataset.slug, "report"]) in body
    assert f'<option value="{rubric.slug}">' in body


def test_it_neutralises_formulas_by_default_and_writes_them_raw_only_when_asked(lead_client, dataset, rubric,
                                                                                reviewer):
    cases_import_objects(dataset=dataset, objects=[{"external_id": "c1", "input": "=1+1", "output": "@SUM(A1)"}])
    default = download(lead_client, dataset, "cases", format="csv")
    raw = download(lead_client, dataset, "cases", format="csv", raw_formulas="1")
    rows = list(csv.reader(io.StringIO(b"".join(default.streaming_content).decode())))
    assert rows[1][1:3] == ["'=1+1", "'@SUM(A1)"]
    assert 'filename="store-support-cases.csv"' in default["Content-Disposition"]
    assert list(csv.reader(io.StringIO(b"".join(raw.streaming_content).decode())))[1][1:3] == ["=1+1", "@SUM(A1)"]
    assert 'filename="store-support-cases-raw-formulas.csv"' in raw["Content-Disposition"]
    # JSONL is not opened in spreadsheets: the box changes nothing there.
    jsonl = download(lead_client, dataset, "cases", format="jsonl", raw_formulas="1")
    assert b"".join(jsonl.streaming_content).decode() == "".join(cases_export(dataset=dataset, fmt=Format.JSONL))


def test_the_dataset_page_offers_raw_csv_as_the_opt_in(lead_client, dataset, rubric, labeled):
    body = lead_client.get(reverse("labeling:dataset_detail", args=[TEST_PROJECT, dataset.slug])).content.decode()
    assert body.count('name="raw_formulas"') == 2  # cases and labels
    assert "unsafe to open in a spreadsheet" in body and "neutralise_formulas" not in body
