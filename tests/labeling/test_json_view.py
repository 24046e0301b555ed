"""Pages bound how deep and how much of a JSON value they render (the case page, the queue's trace): a wide,
long or deep value shows its start and says "… more" where it is cut."""

import json

import pytest
from django.urls import reverse

from labeling.importing.cases import cases_import_objects
from labeling.models import Case
from labeling.templatetags.json_view import MAX_CHARS, MAX_DEPTH, MAX_ITEMS, MAX_STRING, json_view
from tests.conftest import TEST_PROJECT
from tests.labeling.queue_helpers import queue_url

WIDE = list(range(1_000))
DEEP = [[[[[[[[[[["bottom"]]]]]]]]]]]  # 11 levels
LONG = "x" * 200_000


def test_a_small_value_reads_as_indented_json():
    value = {"order": 42, "items": [1, "two", None, {"ok": True}], "empty": {}, "text": "é"}
    assert json_view(value) == json.dumps(value, indent=2, ensure_ascii=False)
    assert json_view(None) == "null" and json_view("plain text") == "plain text"


def test_a_wide_value_shows_its_first_items_and_how_many_more():
    text = json_view({"ids": WIDE})
    assert f"  {MAX_ITEMS - 1},\n" in text and f"  {MAX_ITEMS},\n" not in text
    assert f"… {len(WIDE) - MAX_ITEMS:,} more" in text
    assert len(text) < 2_000
    keys = json_view({f"k{i}": i for i in range(500)})
    assert '"k49": 49' in keys and '"k50"' not in keys and "… 450 more" in keys


def test_a_deep_value_stops_at_the_depth_limit():
    text = json_view(DEEP)
    assert "bottom" not in text and "[… 1 items]" in text
    assert text.count("[") == MAX_DEPTH + 1


def test_long_strings_and_a_large_whole_are_cut():
    assert json_view(LONG) == "x" * MAX_CHARS + f"… ({len(LONG) - MAX_CHARS:,} more characters)"
    inside = json_view({"log": LONG})
    assert f"… ({len(LONG) - MAX_STRING:,} more characters)" in inside and len(inside) < MAX_STRING + 100
    # 50 × 50 strings of 2,000 characters would be 5 MB: the whole stops near MAX_CHARS.
    big = json_view([["y" * MAX_STRING] * MAX_ITEMS] * MAX_ITEMS)
    assert MAX_CHARS <= len(big) < MAX_CHARS + 3 * MAX_STRING and "more" in big


HUGE_CASE = {
    "external_id": "huge", "input": "Where is my order?", "output": "It shipped.",
    "trace": {"toolCalls": [{"name": f"tool{i}", "argument": {"ids": WIDE}, "result": DEEP} for i in range(80)],
              "retrievedSources": [f"doc-{i}" for i in range(300)], "context": LONG,
              **{f"extra{i}": WIDE for i in range(70)}},
    "expected_tool": "tool0", "expected_tool_argument": {"ids": WIDE},
    "metadata": {**{f"m{i}": DEEP for i in range(60)}, "log": LONG},
}


@pytest.fixture
def huge(dataset) -> Case:
    cases_import_objects(dataset=dataset, objects=[HUGE_CASE])
    return Case.objects.get()


@pytest.mark.django_db
def test_the_case_page_renders_a_huge_case_small(lead_client, huge):
    page = lead_client.get(reverse("labeling:case_detail", args=[TEST_PROJECT, huge.pk])).content.decode()

    assert len(page) < 400_000  # the raw value is ~1 MB of JSON, and grows without bound
    for text in ("… 30 more tool calls", "… 250 more", "… 20 more fields", "… 11 more fields",
                 f"… {len(WIDE) - MAX_ITEMS:,} more", "[… 1 items]", "more characters)"):
        assert text in page, text
    assert "tool49" in page and "tool50" not in page and "bottom" not in page


@pytest.mark.django_db
def test_the_queue_renders_a_huge_trace_small(client, dataset, rubric, reviewer, huge):
    client.force_login(reviewer)
    page = client.get(queue_url(dataset, rubric)).content.decode()

    assert "Where is my order?" in page and len(page) < 400_000
    for text in ("… 30 more tool calls", "… 250 more", "… 20 more fields", f"… {len(WIDE) - MAX_ITEMS:,} more",
                 "[… 1 items]", "more characters)"):
        assert text in page, text
