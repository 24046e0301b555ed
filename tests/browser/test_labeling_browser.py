"""A reviewer labels from the keyboard in headless Chromium; the database holds exactly what they chose.

Labels three cases (p, then a note and f, then p), skips one (s), undoes one (u), all without a page
reload; then checks the rows. Screenshots of the labeling page go to /tmp/shots/ (EVALHUB_SHOTS).
"""

import pytest

from labeling.models import Label, Rubric, Skip
from tests.browser import helpers
from tests.browser.helpers import STORE, browser_page, log_in
from tests.conftest import PASSWORD
from tests.labeling.queue_helpers import give_label, make_cases

pytestmark = pytest.mark.browser


@pytest.fixture
def page():
    """This module's page: 1360 × 900, and the console's CSP violations collected in page.csp_errors."""
    with browser_page(viewport={"width": 1360, "height": 900}, capture_csp=True) as page:
        yield page


def shot(page, name: str) -> None:
    # caret="initial": hiding the caret makes Playwright inject a style, which the CSP (rightly) blocks.
    helpers.shot(page, name, caret="initial")


def showing(page, case) -> None:
    """Wait until the case panel shows this case (htmx swapped it in)."""
    page.wait_for_selector(f'#queue-case input[name="case"][value="{case.pk}"]', state="attached", timeout=10_000)


def test_a_reviewer_labels_skips_and_undoes_from_the_keyboard(live_server, page, transactional_db, dataset, reviewer):
    rubric = Rubric.objects.create(
        project=dataset.project, slug="return-policy", name="Does the answer follow the return policy?",
        criteria="Pass when the answer states the 30-day return window correctly.",
    )
    cases = make_cases(dataset, 6)

    log_in(page, live_server, reviewer.username, PASSWORD, lands_on=f"{STORE}/label/")  # reviewers land on their queues
    page.click(f"a[href='{STORE}/label/{dataset.slug}/{rubric.slug}/']")
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
    rubric = Rubric.objects.create(project=dataset.project, slug="tone", name="Is the tone polite?",
                                   criteria="Pass when polite.")
    cases = make_cases(dataset, 2)
    with browser_page(java_script_enabled=False) as page:
        log_in(page, live_server, reviewer.username, PASSWORD, lands_on=None)
        page.goto(f"{live_server.url}{STORE}/label/{dataset.slug}/{rubric.slug}/")
        page.click("button[value=fail]")
        showing(page, cases[1])
    assert list(Label.objects.values_list("case_id", "verdict")) == [(cases[0].pk, "fail")]


def count_swaps(page) -> None:
    page.evaluate("window.settled = 0; document.body.addEventListener('htmx:afterSettle', () => window.settled++)")


def press(page, key: str) -> None:
    """A key, then the case panel it asked for swapped in (a key with no button on the page sends nothing)."""
    if page.locator(f'#queue-case [data-key="{key}"]').count() == 0:
        page.keyboard.press(key)
        return
    settled = page.evaluate("window.settled")
    page.keyboard.press(key)
    page.wait_for_function("n => window.settled > n", arg=settled)


def test_undo_reaches_only_this_sittings_labels(live_server, page, transactional_db, dataset, reviewer):
    """s, u, s, u, … after one label takes back that label and nothing from an earlier sitting."""
    rubric = Rubric.objects.create(project=dataset.project, slug="tone", name="Is the tone polite?",
                                   criteria="Pass when polite.")
    earlier = [give_label(case, rubric, reviewer, "fail") for case in make_cases(dataset, 3, prefix="earlier")]
    fresh = make_cases(dataset, 3, prefix="today")
    log_in(page, live_server, reviewer.username, PASSWORD, lands_on=f"{STORE}/label/")
    page.goto(f"{live_server.url}{STORE}/label/{dataset.slug}/{rubric.slug}/")
    page.wait_for_function("window.htmx !== undefined")
    count_swaps(page)
    showing(page, fresh[0])
    assert page.locator(".undo-form").count() == 0  # nothing labeled in this sitting yet

    press(page, "p")
    showing(page, fresh[1])
    for key in "sususuuu":
        press(page, key)
    assert page.locator(".undo-form").count() == 0
    assert set(Label.objects.values_list("pk", flat=True)) == {label.pk for label in earlier}
    shot(page, "labeling-undo-sitting.png")


def test_a_resized_note_box_breaks_no_csp_rule_when_the_next_case_swaps_in(live_server, page, transactional_db,
                                                                           dataset, reviewer):
    rubric = Rubric.objects.create(project=dataset.project, slug="tone", name="Is the tone polite?",
                                   criteria="Pass when polite.")
    cases = make_cases(dataset, 3)
    log_in(page, live_server, reviewer.username, PASSWORD, lands_on=f"{STORE}/label/")
    page.goto(f"{live_server.url}{STORE}/label/{dataset.slug}/{rubric.slug}/")
    page.wait_for_function("window.htmx !== undefined")
    count_swaps(page)
    page.evaluate("""window.violations = [];
        document.addEventListener("securitypolicyviolation", e => window.violations.push(e.violatedDirective))""")
    for case in cases[1:]:
        # What dragging the box's corner does: the browser writes style="height: …" on it.
        page.locator("#label-note").evaluate("note => { note.style.height = '12rem'; }")
        page.locator("#queue-case button[value=pass]").click()
        showing(page, case)
    press(page, "u")
    assert page.evaluate("window.violations") == []
    assert page.csp_errors == []
