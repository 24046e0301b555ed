"""A reviewer's pages on a phone (390 × 844) and at 1440 px: nothing wider than the screen, the navigation in
reach, and on the labeling page the verdict buttons on the first screen; on a phone the trace comes before the
expectations and the instructions.

Screenshots of every reviewer page at both sizes go to /tmp/shots/ (EVALHUB_SHOTS).
"""

import pytest

from labeling.models import Label, Rubric
from tests.browser import helpers
from tests.browser.helpers import STORE, browser_page, log_in
from tests.labeling.queue_helpers import give_label, make_case, make_cases

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1440, "height": 900}
LONG_ANSWER = ("Thanks for reaching out! Items bought in our store can be returned within 30 days of delivery, "
               "as long as they are unused and in their original packaging. ") * 4


def a_long_case(dataset):
    """A case as agents write them: a long answer and a trace of several tool calls with JSON results."""
    case = make_case(dataset, "support-ticket-with-a-rather-long-external-identifier-0001", output=LONG_ANSWER)
    case.trace = {
        "toolCalls": [{"name": f"lookup_order_{i}", "argument": {"order_id": f"ORD-{i:05}", "include": ["lines"]},
                       "result": {"status": "delivered",
                                  "lines": [{"sku": f"SKU-{i}-{j}", "qty": j} for j in range(4)]}}
                      for i in range(4)],
        "retrievedSources": ["returns-policy-v3", "shipping-faq", "warranty-terms"],
    }
    case.save()
    return case


# The elements that reach past the screen's right edge, named for the failure message.
OVERFLOWING = """width => [...document.querySelectorAll("body *")]
  .filter(el => el.getBoundingClientRect().right > width || el.scrollWidth > el.clientWidth + 1)
  .slice(0, 8)
  .map(el => `${el.tagName.toLowerCase()}.${el.className} (${Math.round(el.getBoundingClientRect().right)})`)"""


def no_wider_than_the_screen(page, width: int) -> None:
    scroll_width = page.evaluate("document.documentElement.scrollWidth")
    assert scroll_width <= width, (f"{page.url} lays out {scroll_width} px wide on a {width} px screen: "
                                   f"{page.evaluate(OVERFLOWING, width)}")


def on_first_screen(page, selector: str, viewport: dict) -> None:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, selector
    assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"], (selector, box)
    assert box["y"] >= 0 and box["y"] + box["height"] <= viewport["height"], (selector, box)


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["390", "1440"])
def test_every_reviewer_page_fits_the_screen_with_its_actions_in_reach(live_server, transactional_db, dataset,
                                                                       reviewer, viewport):
    rubric = Rubric.objects.create(project=dataset.project, slug="return-policy",
                                   name="Does the answer follow the return policy?",
                                   criteria="Pass when the answer states the 30-day return window correctly.\n"
                                            "Fail when it invents a window or a fee.")
    Rubric.objects.create(project=dataset.project, slug="tone-and-politeness",
                          name="Is the answer polite and on topic?", criteria="Polite.")
    case = a_long_case(dataset)
    for earlier in make_cases(dataset, 3, prefix="earlier-case-"):
        give_label(earlier, rubric, reviewer, note="The window is 30 days; the answer says so clearly.")
    size = viewport["width"]
    with browser_page(viewport=viewport) as page:
        log_in(page, live_server, reviewer.username, lands_on=f"{STORE}/label/")
        for selector in ("a[href='/accounts/password/']", "button:text('Log out')"):
            on_first_screen(page, selector, viewport)
        no_wider_than_the_screen(page, size)
        on_first_screen(page, f"a[href='{STORE}/label/{dataset.slug}/{rubric.slug}/']", viewport)
        helpers.shot(page, f"reviewer-start-{size}.png")

        page.goto(f"{live_server.url}{STORE}/label/{dataset.slug}/{rubric.slug}/")
        page.wait_for_selector(f'#queue-case input[name="case"][value="{case.pk}"]', state="attached")
        no_wider_than_the_screen(page, size)
        for verdict in ("pass", "fail"):
            on_first_screen(page, f"#queue-case button[value={verdict}]", viewport)
        on_first_screen(page, "[data-testid=queue-left]", viewport)
        criteria, expected, trace = (page.locator(sel).first.bounding_box()["y"]
                                     for sel in (".criteria", "h2:text('Expected')", ".trace-card"))
        if viewport is PHONE:
            # What the agent did comes before the expectations and the instructions (before: after both, so a
            # reviewer of a tool rubric scrolled past them to see the tool calls).
            assert trace < expected < criteria
        else:  # side by side: the instructions on the first screen, beside the trace
            assert criteria < viewport["height"]
        helpers.shot(page, f"reviewer-queue-{size}.png", full_page=False)
        helpers.shot(page, f"reviewer-queue-{size}-whole.png")
        page.click("#queue-case button[value=pass]")  # the button on screen labels
        page.wait_for_selector("#queue-case .queue-done")
        helpers.shot(page, f"reviewer-queue-done-{size}.png")
        assert Label.objects.filter(case=case, reviewer=reviewer, verdict="pass").exists()

        for path, name in ((f"{STORE}/label/history/", "history"), (f"{STORE}/policies/", "policies"),
                           ("/accounts/password/", "password")):
            page.goto(f"{live_server.url}{path}")
            helpers.shot(page, f"reviewer-{name}-{size}.png")
            no_wider_than_the_screen(page, size)
