"""Disputes: ties and disagreements with every label and note; a lead's adjudication decides."""

import pytest
from django.urls import reverse

from labeling.disputes.selectors import cases_with_human_verdict
from labeling.models import Adjudication, CaseTally, LabelRequest
from tests.conftest import TEST_PROJECT, make_user
from tests.labeling.queue_helpers import HTMX, change_content, give_label, make_cases


def disputes_url(dataset, rubric, status: str = "") -> str:
    url = reverse("labeling:disputes", args=[TEST_PROJECT, dataset.slug, rubric.slug])
    return f"{url}?status={status}" if status else url


def action_url(name: str, dataset, rubric, case) -> str:
    return reverse(f"labeling:{name}", args=[TEST_PROJECT, dataset.slug, rubric.slug, case.pk])


@pytest.fixture
def disputed(dataset, rubric, reviewer, second_reviewer):
    """tie (1-1), split (2-1), agreed (2-0), changed (a disagreement that no longer counts)."""
    third = make_user("third")
    tie, split, agreed, changed = make_cases(dataset, 4)
    give_label(tie, rubric, reviewer, "pass", "RITA-SAYS-PASS")
    give_label(tie, rubric, second_reviewer, "fail", "ROB-SAYS-FAIL")
    for who, verdict in ((reviewer, "fail"), (second_reviewer, "fail"), (third, "pass")):
        give_label(split, rubric, who, verdict)
    give_label(agreed, rubric, reviewer, "pass")
    give_label(agreed, rubric, second_reviewer, "pass")
    give_label(changed, rubric, reviewer, "pass")
    give_label(changed, rubric, second_reviewer, "fail")
    change_content(changed, "New content: both labels stop counting.")
    return tie, split, agreed, changed


def test_it_lists_open_disputes_ties_first_with_every_label_and_note(lead_client, dataset, rubric, disputed):
    tie, split, _, _ = disputed
    response = lead_client.get(disputes_url(dataset, rubric))
    cases = list(response.context["page"])
    assert [c.pk for c in cases] == [tie.pk, split.pk]
    assert [c.human_verdict for c in cases] == [None, "fail"]
    body = response.content.decode()
    assert "RITA-SAYS-PASS" in body and "ROB-SAYS-FAIL" in body and "tie: no verdict" in body
    assert response.context["counts"] == {"open": 2, "decided": 0}


def test_the_dispute_card_shows_the_trace_golden_answer_and_expectations_escaped(
    lead_client, dataset, rubric, reviewer, second_reviewer
):
    tool_case, _ = make_cases(dataset, 2, prefix="tool")
    tool_case.output = "<script>alert('answer')</script>"
    tool_case.trace = {"toolCalls": [{"name": "refund_order", "argument": {"order_id": "ORD-<b>7</b>"},
                                      "result": "<img src=x onerror=alert(1)>"}],
                       "retrievedSources": ["returns-policy"]}
    tool_case.expected_tool, tool_case.expected_tool_argument = "lookup_order", {"order_id": "ORD-7"}
    tool_case.expected_source = "returns-policy-v2"
    tool_case.save()
    give_label(tool_case, rubric, reviewer, "pass")
    give_label(tool_case, rubric, second_reviewer, "fail")
    body = lead_client.get(disputes_url(dataset, rubric)).content.decode()
    card = body[body.index(f'id="dispute-{tool_case.pk}"'):]
    for shown in ("refund_order", "returns-policy", "Yes, within 30 days.", "State the window.", "lookup_order",
                  "&quot;order_id&quot;: &quot;ORD-7&quot;", "returns-policy-v2"):
        assert shown in card, shown
    assert "<script>alert" not in body and "<img src=x" not in body and "<b>7</b>" not in body
    assert "&lt;script&gt;alert" in card and "&lt;img src=x onerror=alert(1)&gt;" in card
    # The card an adjudication swaps in carries them too.
    row = lead_client.post(action_url("adjudicate", dataset, rubric, tool_case), {"verdict": "fail"},
                           headers=HTMX).content.decode()
    assert "refund_order" in row and "&quot;order_id&quot;: &quot;ORD-7&quot;" in row and "returns-policy-v2" in row


def test_adjudication_decides_the_human_verdict_with_who_and_when(lead_client, lead, dataset, rubric, disputed):
    tie = disputed[0]
    response = lead_client.post(action_url("adjudicate", dataset, rubric, tie),
                                {"verdict": "fail", "note": "Rob is right"}, headers=HTMX)
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith(f'<article class="card dispute" id="dispute-{tie.pk}"')
    assert "decided" in body and lead.username in body and "Rob is right" in body
    # The tabs' counts come along out of band: one dispute fewer open, one decided.
    assert '<nav class="tabs" id="dispute-tabs" aria-label="Which disputes" hx-swap-oob="true">' in body
    assert "Open (1)" in body and "Decided (1)" in body
    decision = Adjudication.objects.get(case=tie, rubric=rubric)
    assert (decision.verdict, decision.decided_by, decision.note) == ("fail", lead, "Rob is right")
    assert cases_with_human_verdict(rubric=rubric).get(pk=tie.pk).human_verdict == "fail"
    listed = lead_client.get(disputes_url(dataset, rubric))
    assert [c.pk for c in listed.context["page"]] == [disputed[1].pk]
    assert [c.pk for c in lead_client.get(disputes_url(dataset, rubric, "decided")).context["page"]] == [tie.pk]


def test_adjudicating_again_replaces_the_decision(lead_client, lead, dataset, rubric, disputed):
    tie = disputed[0]
    lead_client.post(action_url("adjudicate", dataset, rubric, tie), {"verdict": "fail"})
    other_lead = make_user("leo", role="lead")
    lead_client.force_login(other_lead)
    response = lead_client.post(action_url("adjudicate", dataset, rubric, tie), {"verdict": "pass", "note": "no"})
    assert response.status_code == 302
    decision = Adjudication.objects.get()
    assert (decision.verdict, decision.decided_by) == ("pass", other_lead)


def test_a_lead_can_overrule_a_majority(lead_client, dataset, rubric, disputed):
    split = disputed[1]
    lead_client.post(action_url("adjudicate", dataset, rubric, split), {"verdict": "pass"})
    assert cases_with_human_verdict(rubric=rubric).get(pk=split.pk).human_verdict == "pass"


def test_requesting_another_label_from_the_disputes_page(lead_client, lead, dataset, rubric, disputed):
    tie = disputed[0]
    response = lead_client.post(action_url("request_label", dataset, rubric, tie), {"reason": "tie"}, headers=HTMX)
    body = response.content.decode()
    assert "another label is requested" in body and "waiting for another label" in body
    # The tie has two labels while the rubric asks for one: it now wants exactly one more than it has.
    tally = CaseTally.objects.get(case=tie, rubric=rubric)
    assert rubric.labels_per_case + tally.requested == tally.labels + 1
    requests = LabelRequest.objects.count()
    assert LabelRequest.objects.filter(requested_by=lead, reason="tie").count() == requests
    response = lead_client.post(action_url("request_label", dataset, rubric, tie), headers=HTMX)
    assert "already requested" in response.content.decode()
    assert LabelRequest.objects.count() == requests


def test_reviewers_may_not_see_or_decide_disputes(reviewer_client, dataset, rubric, disputed):
    tie = disputed[0]
    assert reviewer_client.get(disputes_url(dataset, rubric)).status_code == 403
    assert reviewer_client.post(action_url("adjudicate", dataset, rubric, tie), {"verdict": "pass"}).status_code == 403
    assert reviewer_client.post(action_url("request_label", dataset, rubric, tie)).status_code == 403
    assert reviewer_client.get(reverse("labeling:disputes_index", args=[TEST_PROJECT])).status_code == 403
    assert not Adjudication.objects.exists() and not LabelRequest.objects.exists()


def test_the_index_counts_open_disputes_per_dataset_and_rubric(lead_client, dataset, rubric, disputed):
    rows = lead_client.get(reverse("labeling:disputes_index", args=[TEST_PROJECT])).context["queues"]
    assert [(r["dataset"].slug, r["rubric"].slug, r["open"]) for r in rows] == [(dataset.slug, rubric.slug, 2)]


def test_a_bad_adjudication_changes_nothing(lead_client, dataset, rubric, disputed):
    response = lead_client.post(action_url("adjudicate", dataset, rubric, disputed[0]), {"verdict": "maybe"})
    assert response.status_code == 400
    assert not Adjudication.objects.exists()


def test_it_searches_and_orders_disputes(lead_client, dataset, rubric, disputed):
    tie, split, _, _ = disputed
    url = disputes_url(dataset, rubric)

    def listed(**query):
        return [c.pk for c in lead_client.get(url, query).context["page"]]

    assert listed(q=split.external_id) == [split.pk]
    assert listed(sort="-labels") == [split.pk, tie.pk]  # three labels before two
    assert listed(sort="-ties") == [split.pk, tie.pk]  # ties last
    assert listed(sort="-case") == sorted([tie.pk, split.pk], key=lambda pk: -pk)
    assert listed(sort="human_verdict") == [tie.pk, split.pk]  # not offered: ties first
    assert "No dispute matches “zzz”." in lead_client.get(url, {"q": "zzz"}).content.decode()


@pytest.mark.parametrize("n", [2, 12])
@pytest.mark.parametrize("query", [{}, {"q": "c", "sort": "-labels"}])
def test_the_disputes_page_runs_the_same_queries_however_many_disputes(
    lead_client, dataset, rubric, reviewer, second_reviewer, django_assert_num_queries, n, query
):
    for case in make_cases(dataset, n):
        give_label(case, rubric, reviewer, "pass", "note")
        give_label(case, rubric, second_reviewer, "fail")
    # 2 session and user, 1 membership (the project's door), 1 dataset, 1 rubric, 1 count and 1 page of
    # disputes, 1 labels with reviewers, 1 adjudications, 1 tab counts = 10.
    with django_assert_num_queries(10):
        response = lead_client.get(disputes_url(dataset, rubric), query)
    assert len(response.context["page"].object_list) == n


def test_a_leads_adjudication_note_is_stored_redacted_when_the_dataset_redacts(dataset, rubric, lead):
    # A lead's note may quote the case as a reviewer's may: it is stored (so shown and exported) as the case is.
    from labeling.datasets.services import dataset_set_redaction
    from labeling.disputes.services import adjudicate

    dataset_set_redaction(dataset=dataset, kinds=["email", "phone"], by=lead)
    case = make_cases(dataset, 1)[0]
    adjudicate(case=case, rubric=rubric, verdict="fail", by=lead,
               note="Customer jane@example.com asked to be called on +1 415 555 0132.")
    note = Adjudication.objects.get(case=case, rubric=rubric).note
    assert "jane@example.com" not in note and "555" not in note
    assert "[EMAIL_1]" in note and "[PHONE_1]" in note
