import pytest
from django.urls import reverse

from labeling.importing.cases import cases_import_objects
from labeling.models import Adjudication, Case, Dataset, Label, Rubric
from tests.conftest import TEST_PROJECT, make_user, store_project

pytestmark = pytest.mark.django_db

CASE = {
    "external_id": "ret-001",
    "input": "Can I return shoes after 40 days?",
    "output": "No: returns are accepted within 30 days.",
    "trace": {
        "toolCalls": [{"name": "lookup_order", "argument": {"order": 42}, "result": {"delivered_days_ago": 40}},
                      {"name": "notify", "result": "sent"}],
        "retrievedSources": ["policy-returns", "faq-7"],
        "context": "Returns: 30 days from delivery.",
        "latency_ms": 812,
    },
    "golden_answer": "Returns close after 30 days.",
    "expected_behaviour": "Decline politely.",
    "expected_tool": "lookup_order",
    "expected_tool_argument": None,
    "expected_source": "policy-returns",
    "category": "policy",
    "metadata": {"agent_model": "gpt-4o-mini-2024-07-18"},
}


@pytest.fixture
def case(dataset) -> Case:
    cases_import_objects(dataset=dataset, objects=[CASE])
    return Case.objects.get(external_id="ret-001")


def url(case) -> str:
    return reverse("labeling:case_detail", args=[TEST_PROJECT, case.pk])


def test_it_shows_the_case_readably(lead_client, case):
    body = lead_client.get(url(case)).content.decode()
    for text in ("Can I return shoes after 40 days?", "No: returns are accepted within 30 days.",
                 "lookup_order", "&quot;order&quot;: 42", "&quot;delivered_days_ago&quot;: 40", "notify", "sent",
                 "policy-returns", "faq-7", "Returns: 30 days from delivery.", "latency_ms", "812",
                 "Returns close after 30 days.", "Decline politely.", "gpt-4o-mini-2024-07-18", "policy",
                 case.split):
        assert text in body, text
    assert "not checked" not in body  # a JSON null argument is checked: it shows as null
    assert "<pre>null</pre>" in body


def test_it_shows_the_trace_as_the_labeling_page_does(lead_client, reviewer_client, case, rubric):
    from tests.labeling.queue_helpers import queue_url

    for response in (lead_client.get(url(case)), reviewer_client.get(queue_url(case.dataset, rubric))):
        assert "labeling/_trace.html" in [template.name for template in response.templates]
        assert '<ol class="tool-calls">' in response.content.decode()
    body = lead_client.get(url(case)).content.decode()
    assert '<p class="empty">No argument.</p>' in body  # the notify call has a result, no argument


HOSTILE = {
    "external_id": "hostile", "input": "<script>alert('input')</script>", "output": "fine",
    "golden_answer": "<script>alert('golden')</script>\nsecond line",
    "expected_behaviour": "<img src=x onerror=alert('behaviour')>",
    "expected_tool": "<b>tool</b>", "expected_tool_argument": {"<k>": "</pre><script>alert('arg')</script>"},
    "expected_source": "<i>source</i>",
    "metadata": {"references": ["<b>ref one</b>", "ref two"], "note": "<u>note</u>", "score": 3,
                 "<key>": {"nested": "<svg onload=alert('meta')>"}},
}


def test_it_shows_expectations_and_metadata_as_readable_fields_escaped(lead_client, dataset):
    cases_import_objects(dataset=dataset, objects=[HOSTILE])

    body = lead_client.get(url(Case.objects.get(external_id="hostile"))).content.decode()

    for raw in ("<script>alert", "<img src=x", "<b>tool</b>", "<i>source</i>", "<b>ref one</b>", "<u>note</u>",
                "<svg onload", "<key>", "</pre><script>"):
        assert raw not in body, raw
    expectations = body[body.index('data-testid="expectations"'):body.index('data-testid="metadata"')]
    assert '<div class="text-block">&lt;script&gt;alert(&#x27;golden&#x27;)&lt;/script&gt;\nsecond line</div>' in (
        expectations)  # prose as prose, wrapped, not a JSON blob
    assert "&lt;img src=x onerror=alert(&#x27;behaviour&#x27;)&gt;" in expectations
    assert "&lt;b&gt;tool&lt;/b&gt;" in expectations and "&lt;i&gt;source&lt;/i&gt;" in expectations
    assert "&quot;&lt;k&gt;&quot;: &quot;&lt;/pre&gt;&lt;script&gt;" in expectations
    metadata = body[body.index('data-testid="metadata"'):]
    assert '<li class="text-block">&lt;b&gt;ref one&lt;/b&gt;</li><li class="text-block">ref two</li>' in metadata
    assert '<div class="text-block">&lt;u&gt;note&lt;/u&gt;</div>' in metadata
    assert '<span class="mono">3</span>' in metadata
    assert '<dt class="mono">&lt;key&gt;</dt>' in metadata and "&lt;svg onload=alert(&#x27;meta&#x27;)&gt;" in metadata


def test_it_says_what_is_not_expected(lead_client, dataset):
    cases_import_objects(dataset=dataset, objects=[{"external_id": "bare", "input": "hi", "output": ""}])
    body = lead_client.get(url(Case.objects.get(external_id="bare"))).content.decode()
    for text in ("The agent gave no answer.", "No tool was called.", "Nothing was retrieved.",
                 "no tool call is expected", "not checked", "retrieval is not checked"):
        assert text in body, text


def test_leads_see_every_label_per_rubric(lead_client, case, rubric, reviewer, second_reviewer, lead):
    Label.objects.create(case=case, rubric=rubric, reviewer=reviewer, verdict="pass", note="cites 30 days",
                         content_hash=case.content_hash)
    Label.objects.create(case=case, rubric=rubric, reviewer=second_reviewer, verdict="fail",
                         content_hash="0" * 64)
    tone = Rubric.objects.create(project=store_project(), slug="tone", name="Is the tone polite?", criteria="")
    Adjudication.objects.create(case=case, rubric=tone, verdict="fail", decided_by=lead, note="rude")

    response = lead_client.get(url(case))

    groups = response.context["label_groups"]
    assert [g["rubric"].slug for g in groups] == ["return-policy", "tone"]
    assert [(label.reviewer.username, label.verdict, label.counts) for label in groups[0]["labels"]] == [
        ("rita", "pass", True), ("rob", "fail", False),
    ]
    body = response.content.decode()
    assert "cites 30 days" in body and "stale" in body and "Adjudicated" in body and "rude" in body


def test_reviewers_see_the_case_but_no_label_or_verdict(client, case, rubric, reviewer, second_reviewer, lead):
    Label.objects.create(case=case, rubric=rubric, reviewer=second_reviewer, verdict="fail", note="secret note",
                         content_hash=case.content_hash)
    Adjudication.objects.create(case=case, rubric=rubric, verdict="pass", decided_by=lead)
    client.force_login(reviewer)

    response = client.get(url(case))

    assert response.status_code == 200 and response.context["label_groups"] is None
    body = response.content.decode()
    assert CASE["output"] in body
    for hidden in ("rob", "secret note", "verdict-", "Adjudicated", ">Labels</h2>"):
        assert hidden not in body, hidden


def test_a_case_of_an_unassigned_dataset_is_404(client, outsider, case):
    client.force_login(outsider)
    assert client.get(url(case)).status_code == 404
    assert client.get(reverse("labeling:case_detail", args=[TEST_PROJECT, 999999])).status_code == 404


@pytest.mark.parametrize("n", [1, 5, 15])
def test_the_query_count_does_not_grow_with_labels(lead_client, case, django_assert_num_queries, n, lead):
    rubrics = Rubric.objects.bulk_create(Rubric(project=case.dataset.project, slug=f"r{i}", name="Q?", criteria="")
                                         for i in range(3))
    for i in range(n):
        user = make_user(f"reviewer{i}")
        for rubric in rubrics:
            Label.objects.create(case=case, rubric=rubric, reviewer=user, verdict="pass", content_hash="x")
    Adjudication.objects.create(case=case, rubric=rubrics[0], verdict="pass", decided_by=lead)
    # session + user, the membership (+ project), the user's projects (the menu), the case with its dataset,
    # labels (+ rubric, reviewer), adjudications (+ rubric, lead)
    with django_assert_num_queries(6):
        lead_client.get(url(case))


# --- projects: a case is seen from its own project only ------------------------------------------------------------


def test_a_lead_of_another_project_gets_404_for_the_case(client, other_lead, case):
    client.force_login(other_lead)
    assert client.get(url(case)).status_code == 404
    # Through their own project's pages too: the case is not of it.
    assert client.get(reverse("labeling:case_detail", args=["shopnest", case.pk])).status_code == 404


def test_a_case_of_another_project_is_404_under_this_one(lead_client, other_project):
    theirs = Dataset.objects.create(project=other_project, slug="store-support", name="Theirs")
    cases_import_objects(dataset=theirs, objects=[CASE])

    response = lead_client.get(reverse("labeling:case_detail", args=[TEST_PROJECT, Case.objects.get().pk]))

    assert response.status_code == 404 and CASE["output"] not in response.content.decode()
