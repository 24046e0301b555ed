"""A monitor's page in a real browser, on a desktop and on a phone: the chart (band, raw rate dashed) draws with
no CSP violation, and the windows' table scrolls inside its card rather than the page sideways."""

import pytest

from judges.monitoring.services import message_add, monitor_create
from tests.browser.helpers import STORE, browser_page, log_in, shot
from tests.conftest import PASSWORD
from tests.judges.monitoring.factories import fabricated_windows, observed

pytestmark = pytest.mark.browser


@pytest.fixture
def watched(db, project, lead, reviewer):
    dataset, rubric, _ = observed(project=project, lead=lead)
    monitor = monitor_create(project=project, slug="ships", rubric=rubric, dataset=dataset, sample=0.5,
                             labels_per_window=150, expected_cases=2000, by=lead)
    fabricated_windows(monitor=monitor, reviewer=reviewer, days=14, cases_per_day=1000,
                       rates=[0.8] * 7 + [0.7] * 7, judge_pass=lambda ok: 0.95 if ok else 0.55, labeled_share=0.9)
    monitor.baseline = [w.start.date().isoformat() for w in monitor.windows.order_by("start")[:7]]
    monitor.save(update_fields=["baseline"])
    message_add(monitor=monitor, kind="drop", key="drop:x", subject="ships: the agent's pass rate dropped",
                body="Corrected pass rate 70.1 %.")
    return monitor


@pytest.mark.parametrize("name,viewport", [("desktop", {"width": 1400, "height": 1000}),
                                           ("phone", {"width": 390, "height": 844})])
def test_the_monitor_page_reads_on_desktop_and_phone(live_server, watched, lead, name, viewport):
    with browser_page(capture_csp=True, viewport=viewport) as page:
        log_in(page, live_server, lead.username, PASSWORD)
        page.goto(f"{live_server.url}{STORE}/monitors/ships/")
        assert page.locator("polygon.monitor-band").count() == 1
        assert page.locator("polyline.monitor-raw").count() == 1
        assert page.locator("[data-window]").count() == 14
        shot(page, f"monitor-{name}.png")
        # The page itself never scrolls sideways; a wide table scrolls inside its card.
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
        assert page.csp_errors == []
        page.goto(f"{live_server.url}{STORE}/")
        assert page.locator('[data-monitor="ships"]').count() == 1
        shot(page, f"monitor-overview-{name}.png", full_page=False)
        page.goto(f"{live_server.url}{STORE}/monitors/ships/")
        shot(page, f"monitor-{name}-first-screen.png", full_page=False)
