"""A newcomer's first hour, in the browser: the demo as scripts/start.sh leaves it (load_demo through a
running stand-in, a worker with the demo's variables), the lead's overview, the gate rubric's report and
CI results, and a new behavioral run started from the demo and watched to the end. No provider key.

Screenshots at 1440 px go to /tmp/shots/ (newcomer_*.png).
"""

import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from evalhub.demo.judges import DEMO_KEY_ENV, DEMO_URL_ENV, STRICT_NOTE
from evalhub.demo.projects import DEMO_PASSWORD, STORE_PROJECT
from judges.models import Run
from tests.browser.helpers import browser_page, celery_worker, log_in, shot

pytestmark = [pytest.mark.browser, pytest.mark.worker]

WIDE = {"width": 1440, "height": 1000}
STORE = f"/p/{STORE_PROJECT}"  # lena leads the demo's store project: her pages are under it


@pytest.fixture
def page():
    with browser_page(viewport=WIDE) as page:
        yield page


@pytest.fixture
def demo(db, fake_provider_server, monkeypatch):
    """The demo as start.sh loads it: the stand-in running, its variables set, then load_demo."""
    fake_provider_server.reset()
    monkeypatch.setenv(DEMO_URL_ENV, fake_provider_server.openai_base_url)
    monkeypatch.setenv(DEMO_KEY_ENV, "stand-in-needs-no-key")
    call_command("load_demo", stdout=StringIO())
    yield fake_provider_server
    fake_provider_server.reset()


@pytest.fixture
def worker(live_server, tmp_path, demo):
    """A real Celery worker on the test database with the demo's variables, as start.sh starts it."""
    with celery_worker(tmp_path, "newcomer") as proc:  # the demo variables are in os.environ
        yield proc


def test_a_newcomer_follows_the_demo_story_and_runs_a_behavioral_judge(live_server, worker, page):
    log_in(page, live_server, "lena", DEMO_PASSWORD, lands_on=f"{STORE}/")  # her one project's overview

    # The overview: every rubric's state and what needs attention first.
    overview = page.locator("[data-testid=rubric-overview]")
    gate_row = overview.locator("tr[data-rubric=tool-use]")
    warn_row = overview.locator("tr[data-rubric=return-policy]")
    assert "gate" in gate_row.inner_text() and "relaxed" in gate_row.inner_text()
    assert "warn" in warn_row.inner_text() and "floor 80.0 %" in warn_row.inner_text()
    attention = page.inner_text("[data-testid=attention]")
    assert "open dispute" in attention and "relaxed thresholds" in attention
    shot(page, "newcomer_overview.png")

    # The gate rubric's evidence report, then its promotion page with the CI results evalhub-gate posted.
    gate_row.locator("text=report").click()
    page.wait_for_url(f"{live_server.url}{STORE}/runs/*/report/")
    assert "tool-use" in page.inner_text("main")
    shot(page, "newcomer_gate_report.png")
    page.goto(f"{live_server.url}{STORE}/")
    gate_row.locator(".badge[class*=ci-outcome]").click()
    ci = page.locator("[data-testid=ci-results]")
    ci.wait_for()
    assert "CI run" in ci.inner_text()
    shot(page, "newcomer_gate_ci.png")

    # A new run of the demo's behavioral judge, started from its page, judged by the worker through the stand-in.
    strict = Run.objects.select_related("config").get(config__note=STRICT_NOTE, parent__isnull=True)
    page.goto(f"{live_server.url}{STORE}/judges/{strict.config_id}/")
    assert "Scripted stand-in, not a model" in page.inner_text("[data-testid=stand-in-note]")
    page.click("text=Start a run")
    page.fill("#id_repeats", "3")  # repeats 1 and 2 are cached from the demo's run: the third asks the stand-in
    page.click("text=Start the run")
    page.wait_for_url(f"{live_server.url}{STORE}/runs/*/")
    deadline = time.monotonic() + 120
    while page.inner_text("[data-testid=run-status]") != "finished":
        assert time.monotonic() < deadline, f"the run did not finish: {page.inner_text('[data-testid=run-done]')}"
        time.sleep(0.3)
    shot(page, "newcomer_run_finished.png", full_page=False)
    # The run says who answered once its answers are in: the stand-in marked every one of them.
    page.reload()
    assert "Scripted stand-in, not a model" in page.inner_text("[data-testid=stand-in-note]")

    connection.close()  # read what the worker committed
    run = Run.objects.order_by("-pk").first()
    assert run.pk != strict.pk and run.config_id == strict.config_id
    assert (run.status, run.done, run.not_evaluated) == (Run.Status.FINISHED, run.total, 0)
    assert run.provider_calls > 0 and run.cache_hits > 0
    assert "scripted stand-in" in run.judgments.first().reason
