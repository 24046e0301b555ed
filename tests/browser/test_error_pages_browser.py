"""The 403 and 404 pages in a browser: the site's look, the reason, a way back, no CSP complaint.

Screenshots go to /tmp/shots/ (error-403.png, error-404.png).
"""

import pytest
from django.urls import reverse

from tests.browser.helpers import browser_page, log_in, shot
from tests.conftest import TEST_PROJECT

pytestmark = pytest.mark.browser


def test_a_reviewer_sees_why_and_finds_the_way_back(live_server, reviewer, dataset, rubric):
    with browser_page(capture_csp=True, viewport={"width": 1200, "height": 700}) as page:
        log_in(page, live_server, "rita", lands_on=reverse("labeling:queue_start", args=[TEST_PROJECT]))

        page.goto(live_server.url + reverse("labeling:rubric_list", args=[TEST_PROJECT]))
        assert page.locator("h1").inner_text() == "You may not do this"
        assert "Only the project's leads may do this." in page.locator("main").inner_text()
        shot(page, "error-403.png")

        page.goto(live_server.url + reverse("labeling:dataset_detail", args=[TEST_PROJECT, "nothing-here"]))
        assert page.locator("h1").inner_text() == "There is nothing here"
        shot(page, "error-404.png")
        page.click("text=Go to your start page")
        page.wait_for_url(live_server.url + reverse("labeling:queue_start", args=[TEST_PROJECT]))
        assert page.csp_errors == []


def test_a_locked_out_login_says_why_and_for_how_long(live_server, reviewer, settings):
    settings.AXES_FAILURE_LIMIT = 2
    with browser_page(capture_csp=True, viewport={"width": 1200, "height": 700}) as page:
        log_in(page, live_server, "rita", "wrong", lands_on=None)
        page.wait_for_selector(".errors")
        log_in(page, live_server, "rita", "wrong", lands_on=None)
        page.wait_for_selector("h1:has-text('Too many failed logins')")
        assert "for 15 minutes" in page.locator("main").inner_text()
        shot(page, "login-locked-out.png")
        assert page.csp_errors == []
