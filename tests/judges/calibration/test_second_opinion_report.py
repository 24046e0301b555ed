"""Second opinions through the app: a real run on the fake provider (eager), its contested judgments
on the report page, "Send contested cases to reviewers", the reviewers' blind queue, and the cache.

The primary (OpenAI) passes everything; the second opinion (Anthropic) passes only `tools` cases, so
the two disagree on every `policy` case.
"""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from judges.calibration.selectors import run_figures
from judges.configs import services as config_services
from judges.engine.secondary import sample_share
from judges.models import Judgment, Run
from judges.runs import services
from judges.testing.fake_provider import STAND_IN
from labeling.models import CaseTally, LabelRequest
from tests.conftest import TEST_PROJECT
from tests.judges.helpers import MODEL, behavioral_spec, make_cases
from tests.judges.report_factories import label, make_config, make_run
from tests.judges.report_factories import make_cases as make_report_cases

SECOND = "claude-haiku-4-5-20251001"
SECOND_OPINION = {
    "role": "second_opinion", "provider": "anthropic", "model": SECOND, "base_url_env": "EVALHUB_JUDGE_ANTHROPIC_URL",
    "api_key_env": "EVALHUB_JUDGE_API_KEY", "when": {"mode": "always"},
}


@pytest.fixture
def eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.EVALHUB_CHUNK_CASES = 4


@pytest.fixture
def disagreeing(fake_provider):
    fake_provider.control(model=SECOND, rule={"kind": "category_in", "categories": ["tools"]})
    return fake_provider


def start(capture, config, dataset, lead) -> Run:
    with capture(execute=True):
        run = services.run_start(config=config, dataset=dataset, repeats=2, concurrency=3, spend_cap_usd=None, by=lead)
    run.refresh_from_db()
    return run


@pytest.fixture
def contested_run(eager, disagreeing, dataset, rubric, reviewer, lead, django_capture_on_commit_callbacks):
    """Six cases labeled by `reviewer` (c002 fail, the rest pass); c000, c002 and c004 are policy cases."""
    cases = make_cases(dataset, 6)
    for case in cases:
        label(case, rubric, reviewer, "fail" if case.external_id == "c002" else "pass")
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(secondary=SECOND_OPINION), by=lead)
    return start(django_capture_on_commit_callbacks, config, dataset, lead)


def report_url(run: Run) -> str:
    return reverse("judges:run_report", args=[TEST_PROJECT, run.pk])


def send_url(run: Run) -> str:
    return reverse("judges:run_send_contested", args=[TEST_PROJECT, run.pk])


def test_the_run_stores_which_judgments_the_second_opinion_contested(contested_run):
    rows = set(contested_run.judgments.filter(contested=True).values_list("case__external_id", "outcome",
                                                                            "secondary_outcome"))
    assert rows == {(e, "pass", "fail") for e in ("c000", "c002", "c004")}
    assert not contested_run.judgments.filter(contested=False).exclude(secondary_outcome="pass").exists()
    figures = run_figures(run=contested_run)
    assert (figures["contested"], figures["evaluated"], figures["contested_rate"]) == (6, 12, 0.5)
    assert figures["contested_cases"] == ["c000", "c002", "c004"]
    # The primary's verdict stands: agreement is the primary's (c002 is the one the humans failed).
    assert figures["agreement"] == 10 / 12


def test_a_second_run_of_the_same_config_is_all_cache_second_opinion_included(
    contested_run, disagreeing, dataset, lead, django_capture_on_commit_callbacks
):
    calls = disagreeing.stats()["total"]
    assert calls == 24  # 6 cases × 2 repeats × 2 judges
    again = start(django_capture_on_commit_callbacks, contested_run.config, dataset, lead)
    assert disagreeing.stats()["total"] == calls  # not one call
    assert (again.status, again.cache_hits, again.provider_calls) == (Run.Status.FINISHED, 12, 0)

    def contested(run):
        return set(run.judgments.filter(contested=True).values_list("case_id", "repeat", "secondary_outcome"))
    assert contested(again) == contested(contested_run)


def test_a_sampled_second_opinion_asks_on_the_same_cases_every_run_and_the_cache_holds(
    eager, fake_provider, dataset, rubric, lead, django_capture_on_commit_callbacks
):
    fake_provider.control(model=SECOND, rule={"kind": "always_fail"})  # every case it is asked on: contested
    cases = make_cases(dataset, 16)
    sampled = {c.external_id for c in cases if sample_share(c.external_id) < 0.5}
    assert 0 < len(sampled) < 16
    spec = behavioral_spec(secondary={**SECOND_OPINION, "when": {"mode": "sample", "share": 0.5}})
    config = config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)

    first = start(django_capture_on_commit_callbacks, config, dataset, lead)
    assert fake_provider.stats()["by_model"] == {MODEL: 32, SECOND: 2 * len(sampled)}

    def asked(run):
        return set(run.judgments.exclude(secondary_outcome="").values_list("case__external_id", "repeat"))
    assert asked(first) == {(e, r) for e in sampled for r in (1, 2)}
    assert set(first.judgments.filter(contested=True).values_list("case__external_id", flat=True)) == sampled

    again = start(django_capture_on_commit_callbacks, config, dataset, lead)
    assert (again.provider_calls, again.cache_hits) == (0, 32)
    assert fake_provider.stats()["total"] == 32 + 2 * len(sampled)  # not one call more
    assert asked(again) == asked(first)


def test_the_command_and_the_api_carry_the_contested_figures(contested_run):
    out = StringIO()
    call_command("calibration_report", str(contested_run.pk), stdout=out)
    assert "contested                   6 of 12 evaluated judgments (50.0 %)" in out.getvalue()
    out = StringIO()
    call_command("calibration_report", str(contested_run.pk), "--json", stdout=out)
    figures = json.loads(out.getvalue())
    assert (figures["contested"], figures["contested_rate"], figures["contested_cases"]) == (
        6, 0.5, ["c000", "c002", "c004"]
    )
    assert figures["by_category"]["policy"]["contested_rate"] == 1.0
    assert figures["by_category"]["tools"]["contested"] == 0


def test_the_report_shows_the_contested_rate_beside_agreement_and_lists_the_cases(lead_client, contested_run):
    response = lead_client.get(report_url(contested_run))
    html = response.content.decode()
    assert "Contested: 6 of 12 evaluated judgments (50.0 %)" in html
    assert SECOND in html
    rows = response.context["contested"]
    assert [row["external_id"] for row in rows] == ["c000", "c002", "c004"]
    assert rows[1]["human"] == "fail" and rows[0]["human"] == "pass"
    assert rows[0]["repeats"] == [
        {"repeat": r, "primary": "pass", "secondary": "fail", "adjudicator": None, "decided_by": "human"}
        for r in (1, 2)
    ]
    assert not any(row["requested"] for row in rows)
    assert 'data-testid="send-contested"' in html


def test_sending_contested_cases_asks_one_more_label_for_each_once(lead_client, contested_run, rubric):
    response = lead_client.post(send_url(contested_run), follow=True)
    assert response.redirect_chain[-1][0] == report_url(contested_run) + "#contested"
    html = response.content.decode()
    assert "Sent 3 contested cases to the reviewers&#x27; queue for return-policy" in html
    requests = LabelRequest.objects.filter(rubric=rubric)
    assert sorted(requests.values_list("case__external_id", flat=True)) == ["c000", "c002", "c004"]
    assert set(requests.values_list("reason", flat=True)) == {f"contested by second opinion (run {contested_run.pk})"}
    assert all(row["requested"] for row in response.context["contested"])
    for tally in CaseTally.objects.filter(rubric=rubric, case__external_id__in=["c000", "c002", "c004"]):
        assert (tally.labels, rubric.labels_per_case + tally.requested) == (1, 2)

    again = lead_client.post(send_url(contested_run), follow=True)  # a repeated click changes nothing
    assert "Sent 0 contested cases" in again.content.decode() and "(3 asked for already)" in again.content.decode()
    assert LabelRequest.objects.filter(rubric=rubric).count() == 3


def test_reviewers_may_not_send_contested_cases(reviewer_client, contested_run):
    assert reviewer_client.post(send_url(contested_run)).status_code == 403
    assert not LabelRequest.objects.exists()


def test_sending_needs_a_post(lead_client, contested_run):
    assert lead_client.get(send_url(contested_run)).status_code == 405


def test_contested_cases_reach_a_new_reviewer_blind_to_both_judges(
    lead_client, contested_run, dataset, rubric, reviewer, second_reviewer
):
    assert Judgment.objects.filter(run=contested_run, reason__contains=STAND_IN).exists()  # the marker is real
    queue = reverse("labeling:queue", args=[TEST_PROJECT, dataset.slug, rubric.slug])
    client = Client()  # lead_client is pytest-django's `client`: the reviewer needs a client of their own
    client.force_login(second_reviewer)
    assert client.get(queue).context["case"] is None  # every case has its one label: nothing to do yet

    lead_client.post(send_url(contested_run))
    served = []
    for _ in range(4):
        response = client.get(queue)
        case = response.context["case"]
        if case is None:
            break
        html = response.content.decode()
        # Neither judge's verdict nor reason, nor a hint that judges disagreed.
        assert STAND_IN not in html and SECOND not in html
        assert "contested" not in html.lower() and "second opinion" not in html.lower()
        served.append(case.external_id)
        client.post(reverse("labeling:queue_label", args=[TEST_PROJECT, dataset.slug, rubric.slug]),
                    {"case": case.pk, "verdict": "fail", "content_hash": case.content_hash})
    assert sorted(served) == ["c000", "c002", "c004"]
    client.force_login(reviewer)  # the reviewer who labeled them never gets them again
    assert client.get(queue).context["case"] is None


def test_a_config_without_a_second_opinion_says_so(lead_client, dataset, rubric, reviewer, lead):
    cases = make_report_cases(dataset, [("a", "policy"), ("b", "tools")])
    for case in cases:
        label(case, rubric, reviewer, "pass")
    run = make_run(make_config(rubric, lead), dataset, lead, {case: ["pass"] for case in cases})
    response = lead_client.get(report_url(run))
    html = response.content.decode()
    assert "No second opinion in this config" in html
    assert '<section class="card" id="contested"' not in html and response.context["contested"] == []
    lead_client.post(send_url(run))
    assert not LabelRequest.objects.exists()


@pytest.mark.parametrize("n", [4, 40])
def test_the_report_with_contested_cases_keeps_a_constant_query_count(
    lead_client, dataset, rubric, reviewer, lead, n, django_assert_num_queries
):
    cases = make_report_cases(dataset, [(f"c{i:03}", "policy") for i in range(n)])
    for case in cases:
        label(case, rubric, reviewer, "pass")
    config = make_config(rubric, lead)
    plain = make_run(config, dataset, lead, {case: ["pass", "pass"] for case in cases})
    run = make_run(config, dataset, lead, {case: ["pass", "pass"] for case in cases})
    Judgment.objects.filter(run=run, case__in=cases[::2]).update(contested=True, secondary_outcome="fail")
    with CaptureQueriesContext(connection) as baseline:
        lead_client.get(report_url(plain))
    # The same page as a run without contested judgments (test_report_views.py pins that count), plus
    # two: the contested cases' judgments, and which of them have a label request. Not one per case.
    with django_assert_num_queries(len(baseline) + 2):
        response = lead_client.get(report_url(run))
    assert len(response.context["contested"]) == min(n // 2, 100)
