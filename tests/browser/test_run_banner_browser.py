"""The "run started" banner follows the run: it says "queued" while no worker has it, and once a real worker
has finished the run it says so, with no "queued" left on the page. A contract-only config: no provider.

Screenshots of the run page before and after, light and dark, go to EVALHUB_SHOTS.
"""

import pytest
from playwright.sync_api import expect

from judges.configs import services as config_services
from tests.browser.helpers import STORE, browser_page, celery_worker, log_in, shot
from tests.judges.helpers import CONTRACT_SPEC, make_cases

pytestmark = [pytest.mark.browser, pytest.mark.worker]


@pytest.fixture
def page():
    with browser_page(viewport={"width": 1440, "height": 1000}) as page:
        yield page


def shots(page, name: str) -> None:
    shot(page, f"{name}_light.png")
    page.emulate_media(color_scheme="dark")
    shot(page, f"{name}_dark.png")
    page.emulate_media(color_scheme="light")


def test_the_queued_banner_turns_into_the_finished_run(live_server, page, tmp_path, dataset, rubric, lead):
    make_cases(dataset, 10)  # × 2 repeats (the form's default): 20 judgments
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    banner = page.get_by_test_id("live-banner")

    log_in(page, live_server, lead.username)
    page.goto(f"{live_server.url}{STORE}/judges/{config.pk}/run/")
    page.click("text=Start the run")
    page.wait_for_url(f"{live_server.url}{STORE}/runs/*/")

    # No worker yet: the banner says the run started, then, polled, that it waits in the queue.
    expect(banner).to_contain_text("started from this form")
    expect(banner).to_contain_text("is queued: it starts when a worker picks it up.")
    shots(page, "run_banner_queued")

    with celery_worker(tmp_path, "banner"):
        expect(page.get_by_test_id("run-status")).to_have_text("finished", timeout=60_000)
        expect(banner).to_contain_text("finished: 20 judgments", timeout=10_000)
    expect(banner).not_to_contain_text("queued")
    expect(banner).to_have_attribute("data-working", "no")  # polling stopped
    expect(page.locator("main")).not_to_contain_text("queued")
    banner.get_by_role("link", name="its calibration report").wait_for()
    shots(page, "run_banner_finished")
