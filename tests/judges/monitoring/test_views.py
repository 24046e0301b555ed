"""The monitors' pages: a lead's list and form, a monitor's page (chart, windows, changes, messages), the channels
page that never shows a secret, the overview's line; reviewers get 403 (the isolation matrix covers the rest)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from judges.models import Channel, Monitor, MonitorMessage
from judges.monitoring.services import monitor_create
from tests.conftest import PASSWORD
from tests.judges.monitoring.factories import fabricated_windows, observed


@pytest.fixture
def watched(db, project, lead, reviewer):
    dataset, rubric, _ = observed(project=project, lead=lead)
    dataset.reviewers.add(reviewer)
    monitor = monitor_create(project=project, slug="ships", rubric=rubric, dataset=dataset, sample=0.5,
                             labels_per_window=150, expected_cases=2000, by=lead)
    return monitor


def test_it_shows_the_windows_the_change_and_the_chart(client, watched, reviewer):
    # 7 days at 0.80, then 2 at 0.55; the judge passes 95 % of passes and 40 % of failures.
    fabricated_windows(monitor=watched, reviewer=reviewer, days=9, cases_per_day=1000,
                       rates=[0.8] * 7 + [0.55] * 2, judge_pass=lambda ok: 0.95 if ok else 0.4)
    starts = [w.start.date().isoformat() for w in watched.windows.order_by("start")]
    client.login(username="lena", password=PASSWORD)
    response = client.post("/p/store/monitors/ships/baseline/", {"starts": starts[:7]})
    assert response.status_code == 302
    watched.refresh_from_db()
    assert watched.baseline == starts[:7]
    page = client.get("/p/store/monitors/ships/").content.decode()
    assert 'class="monitor-band"' in page and 'class="monitor-raw"' in page
    assert page.count('data-window="') == 9
    assert 'data-testid="worse"' in page  # the drop to 0.55 is sure against the baseline
    overview = client.get("/p/store/").content.decode()
    assert 'data-monitor="ships"' in overview and "↓" in overview


@pytest.mark.parametrize("days", [3, 12])
def test_the_page_reads_a_fixed_number_of_queries(client, watched, reviewer, days, django_assert_max_num_queries):
    """The windows' figures come from a few queries whatever the windows or cases (docs/monitoring.md)."""
    fabricated_windows(monitor=watched, reviewer=reviewer, days=days, cases_per_day=200, rates=[0.8] * days,
                       judge_pass=lambda ok: 0.9 if ok else 0.3)
    client.login(username="lena", password=PASSWORD)
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/p/store/monitors/ships/").status_code == 200
    assert len(queries) <= 25, [q["sql"][:120] for q in queries.captured_queries]


def test_a_reviewer_may_not_open_monitors(client, watched, reviewer):
    client.login(username="rita", password=PASSWORD)
    assert client.get("/p/store/monitors/").status_code == 403
    assert client.get("/p/store/monitors/ships/").status_code == 403


def test_a_lead_makes_a_monitor_and_bad_input_is_said(client, project, lead):
    dataset, rubric, _ = observed(project=project, lead=lead)
    client.login(username="lena", password=PASSWORD)
    bad = client.post("/p/store/monitors/", {"slug": "m", "rubric": rubric.slug, "dataset": dataset.slug,
                                             "sample_percent": "150", "window": "day", "concurrency": 4,
                                             "labels_per_window": 150, "expected_cases": 1000}, follow=True)
    assert bad.status_code == 200 and "No monitor made" in bad.content.decode()
    good = client.post("/p/store/monitors/", {"slug": "m", "rubric": rubric.slug, "dataset": dataset.slug,
                                              "sample_percent": "20", "window": "week", "concurrency": 4,
                                              "labels_per_window": 100, "expected_cases": 1000})
    assert good.status_code == 302
    monitor = Monitor.objects.get(slug="m")
    assert monitor.sample == pytest.approx(0.2) and monitor.window == "week"


def test_a_channel_names_its_variables_and_never_shows_a_value(client, project, lead, monkeypatch):
    monkeypatch.setenv("EVALHUB_CHANNEL_HOOK_URL", "https://hooks.example.com/very-secret-path")
    monkeypatch.setenv("EVALHUB_CHANNEL_HOOK_SECRET", "s3cr3t-value")
    client.login(username="lena", password=PASSWORD)
    refused = client.post("/p/store/monitors/channels/", {"name": "ops", "kind": "webhook",
                                                          "url_env": "DATABASE_URL", "secret_env": "DJANGO_SECRET_KEY"})
    assert "No channel added" in refused.content.decode() and not Channel.objects.exists()
    saved = client.post("/p/store/monitors/channels/", {"name": "ops", "kind": "webhook",
                                                        "url_env": "EVALHUB_CHANNEL_HOOK_URL",
                                                        "secret_env": "EVALHUB_CHANNEL_HOOK_SECRET"}, follow=True)
    page = saved.content.decode()
    assert "EVALHUB_CHANNEL_HOOK_URL" in page
    assert "very-secret-path" not in page and "s3cr3t-value" not in page
    channel = Channel.objects.get()
    assert "secret" not in (channel.addresses + channel.url_env.lower().replace("hook_secret", ""))
    assert MonitorMessage.objects.count() == 0
