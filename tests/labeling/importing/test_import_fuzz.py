"""Arbitrary JSON and bytes into every import path and the ingest API: a clear error or a clean import,
never an exception, never a partial write. Sized to run in seconds (max_examples per path below)."""

import csv
import io
import json
from io import BytesIO

import pytest
from django.db import transaction
from django.urls import reverse
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from evalhub.models import ApiToken, Scope, User
from judges.models import JudgeConfig, Judgment, Run
from judges.runs.importing import JUDGMENT_FIELDS, judgments_import
from labeling.importing import Format, ImportRejected
from labeling.importing.cases import cases_import
from labeling.importing.labels import LABEL_FIELDS, labels_import
from labeling.importing.reading import CASE_ALIASES, CASE_FIELDS
from labeling.models import Case, Label, Rubric
from tests.conftest import store_project
from tests.judges.helpers import make_cases

pytestmark = pytest.mark.django_db

FUZZ = settings(max_examples=100, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# Text with everything JSON text can carry: NUL, surrogates (lone ones come out as \udXXX escapes), emoji.
TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | TEXT  # floats include NaN and ±inf
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                    max_leaves=8)


def objects(fields: tuple[str, ...], ids: list[str]) -> st.SearchStrategy:
    """Rows that are often right or nearly so: the required fields as text (or anything), any other
    known field (or alias) with any value, and sometimes an unknown key."""
    word = st.sampled_from([*ids, "pass", "fail", "not_evaluated", "rita"])
    value = JSON | word
    return st.one_of(
        st.fixed_dictionaries({name: word | TEXT for name in fields[:3]},
                              optional={name: st.integers(1, 3) | value for name in fields[3:]}),
        st.dictionaries(st.sampled_from(fields) | TEXT, value, max_size=len(fields)),
    )


def as_text(value) -> st.SearchStrategy[str]:
    return st.sampled_from([True, False]).map(lambda ascii_only: json.dumps(value, ensure_ascii=ascii_only))


HAZARD_TEXT = st.sampled_from([
    '{"external_id": "a", "input": "q", "output": "x", "external_id": "b"}', "NaN", "1e999", '"\\ud800"',
    "[" * 65 + "]" * 65, "[" * 5000, "{", "", " ", "\ufeff{}", '{"id": "a", "external_id": "a"}',
])


HAZARD_VALUE = st.sampled_from(["NaN", "-Infinity", "1e999", '"\\ud800"', '"\\udfff\\ud800"', "[" * 65 + "]" * 65,
                                '{"k": 1, "k": 2}', '"\\u0000"'])
# A row that is right but for one hazard in the field that holds JSON (or text): {"k": <hazard>}.
GOOD_ROWS = {
    "cases": ({"input": "q", "output": "a"}, "metadata", '{{"k": {}}}'),
    "labels": ({"reviewer": "rita", "verdict": "pass"}, "note", "{}"),
    "judgments": ({"repeat": 1, "verdict": "pass"}, "scores", '{{"s": {}}}'),
}


def hazard_row(kind: str, ids: list[str]) -> st.SearchStrategy[str]:
    row, carrier, wrap = GOOD_ROWS[kind]
    return st.tuples(st.sampled_from(ids), HAZARD_VALUE).map(
        lambda pair: json.dumps({"external_id": pair[0], **row})[:-1] + f', "{carrier}": {wrap.format(pair[1])}}}'
    )


def lines(kind: str, fields: tuple[str, ...], ids: list[str]) -> st.SearchStrategy[str]:
    row = objects(fields, ids).flatmap(as_text)
    mixed = st.lists(row | hazard_row(kind, ids) | JSON.flatmap(as_text) | HAZARD_TEXT, max_size=5)
    alone = hazard_row(kind, ids).map(lambda text: [text])  # nothing else in the file to reject it first
    return (st.lists(row, min_size=1, max_size=3) | alone | mixed).map(lambda texts: "\n".join(texts))


def csv_text(fields: tuple[str, ...], ids: list[str]) -> st.SearchStrategy[str]:
    cell = TEXT | st.sampled_from(ids) | JSON.flatmap(as_text) | HAZARD_TEXT
    header = st.lists(st.sampled_from(fields), min_size=1, unique=True)
    return header.flatmap(lambda names: st.lists(st.lists(cell, min_size=len(names), max_size=len(names)),
                                                 max_size=4).map(lambda rows: _csv(names, rows)))


def _csv(header: list[str], rows: list[list[str]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def content(kind: str, fields, ids) -> st.SearchStrategy[tuple[Format, bytes]]:
    return st.one_of(
        lines(kind, fields, ids).map(lambda text: (Format.JSONL, text.encode("utf-8", "surrogatepass"))),
        csv_text(fields, ids).map(lambda text: (Format.CSV, text.encode("utf-8", "surrogatepass"))),
        st.tuples(st.sampled_from(list(Format)), st.binary(max_size=200)),
    )


def attempt(write, count) -> None:
    """Run one import in a savepoint that is rolled back: it imports cleanly or is rejected with nothing
    written. Any other exception fails the test."""
    with transaction.atomic():
        before = count()
        try:
            write()
            event("imported")
        except ImportRejected as rejected:
            event("rejected")
            assert rejected.errors and all(str(error) for error in rejected.errors)
            assert count() == before, "a rejected import wrote something"
        transaction.set_rollback(True)


CASE_NAMES = (*CASE_FIELDS, *CASE_ALIASES)


@FUZZ
@given(data=content("cases", CASE_NAMES, ["a", "b"]))
def test_cases_import_fuzz(dataset, data):
    fmt, raw = data
    attempt(lambda: cases_import(dataset=dataset, stream=BytesIO(raw), fmt=fmt),
            lambda: Case.objects.count())


@pytest.fixture
def cases(dataset):
    return make_cases(dataset, 2)


@FUZZ
@given(data=content("labels", (*LABEL_FIELDS, "id"), ["c000", "c001"]))
def test_labels_import_fuzz(dataset, cases, data):
    fmt, raw = data
    attempt(lambda: labels_import(dataset=dataset, rubric_slug="fuzz", stream=BytesIO(raw), fmt=fmt),
            lambda: (Label.objects.count(), Rubric.objects.count(), User.objects.count()))


@FUZZ
@given(data=content("judgments", (*JUDGMENT_FIELDS, "id"), ["c000", "c001"]))
def test_judgments_import_fuzz(dataset, cases, rubric, lead, data):
    fmt, raw = data
    attempt(lambda: judgments_import(dataset=dataset, rubric=rubric, stream=BytesIO(raw), fmt=fmt,
                                     source_name="fuzz.jsonl", by=lead),
            lambda: (Run.objects.count(), Judgment.objects.count(), JudgeConfig.objects.count()))


@pytest.fixture
def token(lead) -> str:
    return ApiToken.issue(project=store_project(), name="ingest", scopes=[Scope.CASES_WRITE], created_by=lead)[1]


API_BODY = st.one_of(
    st.lists(objects(CASE_NAMES, ["a", "b"]) | JSON, max_size=4).flatmap(as_text),
    objects(CASE_NAMES, ["a"]).flatmap(as_text),
    st.lists(objects(CASE_NAMES, ["a"]).flatmap(as_text) | hazard_row("cases", ["a", "b"]) | HAZARD_TEXT,
             max_size=4).map(
        lambda items: "[" + ", ".join(items) + "]"),
).map(lambda text: text.encode("utf-8", "surrogatepass")) | st.binary(max_size=200)


@FUZZ
@given(body=API_BODY)
def test_ingest_api_fuzz(client, dataset, token, body):
    url = reverse("labeling:api_cases_ingest", args=[dataset.slug])
    with transaction.atomic():
        response = client.post(url, data=body, content_type="application/json",
                               headers={"Authorization": f"Bearer {token}"})
        assert response.status_code in (201, 400), response.content[:300]
        assert response["Content-Type"] == "application/json"
        payload = response.json()
        if response.status_code == 400:
            assert payload["errors"] and all(error["message"] for error in payload["errors"])
            assert not Case.objects.exists(), "a refused batch wrote something"
        else:
            assert Case.objects.count() == payload["created"]
        event(str(response.status_code))
        transaction.set_rollback(True)
