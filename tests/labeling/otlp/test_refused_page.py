"""The lead's page of refused traces: count, why and when, per dataset, from what the receiver answered."""

import pytest
from django.urls import reverse

from evalhub.models import ApiToken, Scope
from labeling.models import Dataset
from tests.conftest import store_project
from tests.labeling.otlp.helpers import genai_trace, protobuf_body, recording_tracer, silent_trace

URL = "/api/otlp/v1/traces?dataset=store-support"


@pytest.mark.django_db
def test_the_page_counts_what_the_receiver_refused_by_reason(client, dataset, lead, reviewer):
    token = ApiToken.issue(project=store_project(), name="agent", scopes=[Scope.CASES_WRITE], created_by=lead)[1]
    headers = {"Authorization": f"Bearer {token}"}
    tracer, exporter = recording_tracer()
    silent_ids = [silent_trace(tracer), silent_trace(tracer)]
    genai_trace(tracer)
    body = protobuf_body(exporter.get_finished_spans())
    client.post(URL, data=body, content_type="application/x-protobuf", headers=headers)
    client.post(URL, data=body, content_type="application/x-protobuf", headers=headers)  # sent again
    client.post(URL, data=b"\xff not protobuf", content_type="application/x-protobuf", headers=headers)
    other = Dataset.objects.create(project=dataset.project, slug="other", name="Other")
    page_url = reverse("labeling:dataset_otlp_refused", args=[dataset.project.slug, dataset.slug])

    client.force_login(lead)
    page = client.get(page_url)
    text = page.content.decode()

    assert page.status_code == 200
    rows = {refusal.why: refusal for refusal in page.context["refusals"]}
    no_messages = next(r for why, r in rows.items() if why.startswith("has no messages"))
    assert (no_messages.traces, no_messages.spans, no_messages.requests) == (4, 8, 2)
    assert no_messages.example_trace_id in silent_ids
    again = next(r for why, r in rows.items() if why.startswith("is a case of this dataset already"))
    assert (again.traces, again.spans) == (1, 5)
    unreadable = next(r for why, r in rows.items() if why.startswith("The body is not OTLP traces"))
    assert (unreadable.status, unreadable.requests, unreadable.traces) == (400, 1, 0)
    assert no_messages.example_trace_id in text and "has no messages" in text
    assert 'data-label="Why:"' in text  # each cell names itself on a phone (table.stack-on-phone)
    # Per dataset: another dataset's page shows none of it.
    assert "Nothing refused" in client.get(reverse("labeling:dataset_otlp_refused",
                                                   args=[dataset.project.slug, other.slug])).content.decode()
    # The import page links to it.
    import_page = client.get(reverse("labeling:dataset_import", args=[dataset.project.slug, dataset.slug]))
    assert page_url in import_page.content.decode()
    client.force_login(reviewer)
    assert client.get(page_url).status_code == 403
