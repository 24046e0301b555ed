"""The audit log: every change with who, when, from, to, the run, its figures and the reason; never editable."""

import pytest
from django.urls import reverse

from judges.models import RubricEvent
from judges.promotion.services import rubric_demote, rubric_promote, rubric_thresholds_change
from labeling.models import Rubric
from tests.conftest import TEST_PROJECT, make_user, store_project
from tests.judges.promotion_factories import REASON, evidence_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(rubric, dataset, lead, reviewer):
    run = evidence_run(rubric, dataset, lead, reviewer)
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)
    other_lead = make_user("leo", role="lead")
    rubric_demote(rubric=rubric, to_stage="draft", reason="Criteria <b>rewrite</b> pending.", by=other_lead)
    rubric_thresholds_change(rubric=rubric, reason="Tighter floor.", by=lead, agreement_floor=0.85)
    return run


def test_it_lists_every_change_newest_first_with_who_what_and_why(lead_client, history):
    text = lead_client.get(reverse("judges:audit_log", args=[TEST_PROJECT])).text
    rows = text.split('<tr data-kind="')[1:]
    assert [row.split('"')[0] for row in rows] == ["thresholds", "demote", "promote"]
    thresholds, demote, promote = rows
    assert "agreement_floor</span>: 0.8 → <strong>0.85</strong>" in thresholds and "Tighter floor." in thresholds
    assert "leo" in demote and "Criteria &lt;b&gt;rewrite&lt;/b&gt; pending." in demote  # escaped, never markup
    assert ">observe</span> → <span class=\"badge stage-draft\">draft<" in demote
    assert f"run {history.pk}</a>" in promote and "lena" in promote and REASON in promote
    assert "agreement 95.0 %" in promote and "n 40" in promote


def test_it_filters_by_rubric_and_kind(lead_client, history, lead):
    Rubric.objects.create(project=store_project(), slug="tone", name="Tone?", criteria="Polite.")
    tone = Rubric.objects.get(slug="tone")
    rubric_thresholds_change(rubric=tone, reason="Loosen.", by=lead, min_cases=20)
    text = lead_client.get(reverse("judges:audit_log", args=[TEST_PROJECT]) + "?rubric=tone").text
    assert text.count('<tr data-kind="') == 1 and "Loosen." in text
    text = lead_client.get(reverse("judges:audit_log", args=[TEST_PROJECT]) + "?kind=promote").text
    assert text.count('<tr data-kind="promote"') == 1 and text.count('<tr data-kind="') == 1


def _kinds(text: str) -> list[str]:
    return [row.split('"')[0] for row in text.split('<tr data-kind="')[1:]]


def test_it_searches_the_reason_and_who_and_orders_the_log(lead_client, history):
    url = reverse("judges:audit_log", args=[TEST_PROJECT])
    assert _kinds(lead_client.get(url, {"q": "tighter"}).text) == ["thresholds"]
    assert _kinds(lead_client.get(url, {"q": "leo"}).text) == ["demote"]
    assert _kinds(lead_client.get(url, {"sort": "when"}).text) == ["promote", "demote", "thresholds"]
    assert _kinds(lead_client.get(url, {"sort": "who"}).text) == ["thresholds", "promote", "demote"]  # lena, leo
    assert _kinds(lead_client.get(url, {"sort": "reason"}).text) == ["thresholds", "demote", "promote"]  # default


@pytest.mark.parametrize("query", [{}, {"q": "e", "sort": "rubric"}])
def test_the_log_runs_the_same_queries_however_many_entries(lead_client, history, lead, django_assert_num_queries,
                                                            query, rubric):
    for _ in range(5):
        rubric_thresholds_change(rubric=rubric, reason="Again.", by=lead, agreement_floor=0.9)
        rubric_thresholds_change(rubric=rubric, reason="Back.", by=lead, agreement_floor=0.85)
    # session, user, the door (membership and project), the rubrics' slugs, the count, the page
    # of entries with rubric, who and run
    with django_assert_num_queries(6):
        lead_client.get(reverse("judges:audit_log", args=[TEST_PROJECT]), query)


def test_the_admin_shows_entries_but_cannot_add_change_or_delete_them(client, admin_user, history):
    client.force_login(admin_user)
    event = RubricEvent.objects.filter(kind="promote").get()
    assert client.get(reverse("admin:judges_rubricevent_changelist")).status_code == 200
    assert client.get(reverse("admin:judges_rubricevent_add")).status_code == 403
    assert client.get(reverse("admin:judges_rubricevent_delete", args=[event.pk])).status_code == 403
    change = client.get(reverse("admin:judges_rubricevent_change", args=[event.pk]))
    assert change.status_code == 200 and 'name="_save"' not in change.text  # view only
    response = client.post(reverse("admin:judges_rubricevent_change", args=[event.pk]), {"reason": "rewritten"})
    assert response.status_code == 403
    response = client.post(reverse("admin:judges_rubricevent_changelist"),
                           {"action": "delete_selected", "_selected_action": [event.pk], "post": "yes"})
    assert RubricEvent.objects.count() == 3
    event.refresh_from_db()
    assert event.reason == REASON


def test_stage_and_thresholds_are_read_only_in_the_rubric_admin(client, admin_user, rubric):
    client.force_login(admin_user)
    page = client.get(reverse("admin:labeling_rubric_change", args=[rubric.pk])).text
    assert 'name="stage"' not in page and 'name="fail_closed"' not in page and 'name="min_cases"' not in page
