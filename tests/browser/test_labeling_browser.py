"""A reviewer labels from the keyboard in headless Chromium; the database holds exactly what they chose.

Labels three cases (p, then a note and f, then p), skips one (s), undoes one (u), all without a page
reload; then checks the rows. Screenshots of the labeling page go to /tmp/shots/ (EVALHUB_SHOTS).
"""

import os
from pathlib import Path

import pytest
from django.db import connections

from labeling.models import Label, Rubric, Skip
from tests.conftest import PASSWORD
from tests.labeling.queue_helpers import make_cases

# Playwright's sync API runs an event loop in this thread; the ORM calls in the test are still plain sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
SHOTS = Path(os.environ.get("EVALHUB_SHOTS", "/tmp/shots"))


@pytest.fixture
def page():
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (scripts/test.sh does) to run browser tests.")
    from playwright.sync_api import sync_playwright

    # Close the connection opened before Playwright's loop, or the test database cannot be dropped.
    connections.close_all()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1360, "height": 900})
        page = context.new_page()
        # Chromium reports a Content-Security-Policy violation (an inline script or style) on the console.
        page.csp_errors = []
        page.on("console", lambda message: "Content Security Policy" in message.text
                and page.csp_errors.append(message.text))
        yield page
        context.close()
        browser.close()
        connections.close_all()


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    # caret="initial": hiding the caret makes Playwright inject a style, which the CSP (rightly) blocks.
    page.screenshot(path=str(SHOTS / name), full_page=True, caret="initial")


def showing(page, case) -> None:
    """Wait until the case panel shows this case (htmx swapped it in)."""
    page.wait_for_selector(f'#queue-case input[name="case"][value="{case.pk}"]', state="attached", timeout=10_000)


def test_a_reviewer_labels_skips_and_undoes_from_the_keyboard(live_server, page, transactional_db, dataset, reviewer):
    rubric = Rubric.objects.create(
        slug="return-policy", name="Does the answer follow the return policy?",
        criteria="Pass when the answer states the 30-day return window correctly.",
    )
    cases = make_cases(dataset, 6)

    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", reviewer.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/label/")  # reviewers land on their queues
    page.click(f"a[href='/label/{dataset.slug}/{rubric.slug}/']")
    page.wait_for_function("window.htmx !== undefined")
    showing(page, cases[0])
    shot(page, "labeling-queue.png")
    page.evaluate("window.__notReloaded = true")  # gone if any step reloads the page

    page.keyboard.press("p")
    showing(page, cases[1])
    page.keyboard.press("n")
    page.keyboard.type("The window is 30 days, not 14.")
    page.keyboard.press("Escape")
    page.keyboard.press("f")
    showing(page, cases[2])
    page.keyboard.press("p")
    showing(page, cases[3])
    page.keyboard.press("s")
    showing(page, cases[4])
    page.keyboard.press("u")  # takes back the pass on cases[2] and shows it again
    showing(page, cases[2])
    page.wait_for_selector("#queue-progress strong:text-is('2')")
    page.keyboard.press("?")
    page.wait_for_selector("#queue-help[open]")
    shot(page, "labeling-queue-help.png")
    page.keyboard.press("Escape")

    assert page.evaluate("window.__notReloaded") is True
    assert page.csp_errors == []
    labels = {(label.case_id, label.verdict, label.note) for label in Label.objects.filter(reviewer=reviewer)}
    assert labels == {(cases[0].pk, "pass", ""), (cases[1].pk, "fail", "The window is 30 days, not 14.")}
    assert list(Skip.objects.filter(reviewer=reviewer).values_list("case_id", flat=True)) == [cases[3].pk]
    assert Label.objects.count() == 2


def test_the_queue_works_without_javascript(live_server, transactional_db, dataset, reviewer):
    """Plain forms: the same page with JavaScript off still labels and moves on."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium to run browser tests.")
    from playwright.sync_api import sync_playwright

    rubric = Rubric.objects.create(slug="tone", name="Is the tone polite?", criteria="Pass when polite.")
    cases = make_cases(dataset, 2)
    connections.close_all()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(java_script_enabled=False)
        page = context.new_page()
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", reviewer.username)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.goto(f"{live_server.url}/label/{dataset.slug}/{rubric.slug}/")
        page.click("button[value=fail]")
        showing(page, cases[1])
        context.close()
        browser.close()
    connections.close_all()
    assert list(Label.objects.values_list("case_id", "verdict")) == [(cases[0].pk, "fail")]
