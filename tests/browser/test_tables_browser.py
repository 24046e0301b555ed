"""Pages that stay usable at size, light and dark: the run page of a 2,000-case run stays under 2,700 px
tall, sorting its grouped table happens in place, and every page this work changed is screenshotted at
1440 px in both colour schemes (to /tmp/shots/, looked at by a person)."""

import random
import re

import pytest
from playwright.sync_api import expect

from evalhub.models import Role
from judges.configs import services as config_services
from judges.models import Judgment, Run
from judges.runs.tallies import case_tallies_refresh
from labeling.importing.reading import case_split, labeled_content_hash
from labeling.models import Case, Label
from tests.browser.helpers import STORE, browser_page, log_in, shot
from tests.browser.test_reviewer_pages_browser import PHONE, no_wider_than_the_screen
from tests.conftest import PASSWORD, make_user
from tests.judges.helpers import behavioral_spec

pytestmark = pytest.mark.browser

CASES, REPEATS = 2000, 3


@pytest.fixture
def page():
    with browser_page(viewport={"width": 1440, "height": 1000}) as page:
        yield page


@pytest.fixture
def big_run(dataset, rubric, reviewer):
    """A finished run of 2,000 cases × 3 repeats, written directly (the engine is not what is tested)."""
    lead = make_user("lena", role=Role.LEAD)
    cases = Case.objects.bulk_create(
        Case(dataset=dataset, external_id=f"order-status-{i:05d}", input=f"Where is order {i}?",
             output=f"Order {i} shipped.", split=case_split(f"order-status-{i:05d}"),
             category="tools" if i % 2 else "policy",
             content_hash=labeled_content_hash(input=f"Where is order {i}?", output=f"Order {i} shipped.", trace={}))
        for i in range(CASES)
    )
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    run = Run.objects.create(config=config, dataset=dataset, created_by=lead, repeats=REPEATS, total=CASES * REPEATS,
                             done=CASES * REPEATS, status=Run.Status.FINISHED)
    rng = random.Random(7)
    Judgment.objects.bulk_create(
        Judgment(run=run, case=case, repeat=repeat, layer="behavioral", latency_ms=rng.randint(300, 1500),
                 outcome=rng.choice(["pass", "pass", "pass", "fail"]),
                 reason="The answer gives the order's status as the tool returned it, and nothing more." * 2)
        for case in cases for repeat in range(1, REPEATS + 1)
    )
    case_tallies_refresh(run_id=run.pk)
    Label.objects.bulk_create(
        Label(case=case, rubric=rubric, reviewer=reviewer, verdict="pass", content_hash=case.content_hash)
        for case in cases[:200]
    )
    return lead, run


def test_the_run_page_of_a_2000_case_run_stays_short_and_sorts_in_place(live_server, page, big_run):
    lead, run = big_run
    log_in(page, live_server, lead.username, PASSWORD)
    page.goto(f"{live_server.url}{STORE}/runs/{run.pk}/")

    expect(page.locator("[data-testid=case-row]")).to_have_count(50)
    height = page.evaluate("() => document.documentElement.scrollHeight")
    # 50 case rows, the figures and the pass-rate card, whatever the run's size: no table of 2,000 rows.
    assert height < 2700, f"the run page is {height} px tall"
    assert "Page 1 of 40 · 2000 cases" in page.inner_text("#judgments")
    shot(page, "tables_run_2000_light.png")

    page.click("[data-testid=sort-latency]")  # slowest first
    page.wait_for_url("**sort=-latency**")
    expect(page.locator("th[aria-sort=descending]")).to_contain_text("Latency")
    first = int(page.locator("[data-testid=case-row]").first.locator("td.num").nth(3).inner_text().split()[0])
    assert first >= 1400

    page.emulate_media(color_scheme="dark")
    page.goto(f"{live_server.url}{STORE}/runs/{run.pk}/")
    expect(page.locator("[data-testid=case-row]")).to_have_count(50)
    assert page.evaluate("() => getComputedStyle(document.body).backgroundColor") == "rgb(18, 21, 28)"
    shot(page, "tables_run_2000_dark.png")


def test_screenshots_of_the_changed_pages_light_and_dark(live_server, page, big_run, dataset, rubric, reviewer):
    lead, run = big_run
    pages = {
        "run_list": f"{STORE}/runs/",
        "dataset_cases": f"{STORE}/datasets/{dataset.slug}/?q=order-status-001",
        "config": f"{STORE}/judges/{run.config_id}/",
        "config_editor": f"{STORE}/rubrics/{rubric.slug}/judges/new/",
        "run_start": f"{STORE}/judges/{run.config_id}/run/",
        "promotion_thresholds": f"{STORE}/rubrics/{rubric.slug}/promotion/",
        "audit_log": f"{STORE}/promotion/audit/",
        "report": f"{STORE}/runs/{run.pk}/report/",
    }
    log_in(page, live_server, lead.username, PASSWORD)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for name, path in pages.items():
            response = page.goto(f"{live_server.url}{path}")
            assert response.status == 200, (name, response.status)
            shot(page, f"tables_{name}_{scheme}.png")
    page.goto(f"{live_server.url}{STORE}/runs/")
    expect(page.locator("[data-testid=run-agreement]").first).to_have_text(re.compile(r"^\d+\.\d %$"), timeout=20_000)

    page.context.clear_cookies()
    log_in(page, live_server, reviewer.username, PASSWORD, lands_on=None)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.goto(f"{live_server.url}{STORE}/label/")
        expect(page.locator("[data-testid=queue-left]").first).to_be_visible()
        shot(page, f"tables_queue_start_{scheme}.png")
        page.goto(f"{live_server.url}{STORE}/label/history/")
        shot(page, f"tables_history_{scheme}.png")


def test_a_leads_pages_fit_a_phone_their_tables_scrolling_in_place(live_server, big_run, dataset, rubric):
    lead, run = big_run
    Judgment.objects.filter(run=run, repeat=1, case__external_id="order-status-00001").update(
        outcome="not_evaluated", error="provider_error: the judge's provider answered 503 three times in a row")
    pages = ["/", *(STORE + path for path in [
        "/runs/", f"/runs/{run.pk}/", f"/runs/{run.pk}/report/", "/promotion/", f"/rubrics/{rubric.slug}/promotion/",
        f"/rubrics/{rubric.slug}/judges/", f"/datasets/{dataset.slug}/", "/promotion/audit/"])]
    with browser_page(viewport=PHONE) as page:
        log_in(page, live_server, lead.username, PASSWORD)
        for path in pages:
            assert page.goto(f"{live_server.url}{path}").status == 200, path
            no_wider_than_the_screen(page, PHONE["width"])
        shot(page, "tables_audit_390.png")
