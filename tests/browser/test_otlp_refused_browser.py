"""The lead's page of refused OTLP traces on a phone (390 px): nothing wider than the screen, each cell naming
itself; screenshotted for a person to look at."""

import pytest
from django.utils import timezone

from evalhub.models import Role
from labeling.models import OtlpRefusal
from tests.browser.helpers import STORE, browser_page, log_in, shot
from tests.browser.test_reviewer_pages_browser import PHONE, no_wider_than_the_screen
from tests.conftest import PASSWORD, make_user

pytestmark = pytest.mark.browser


def test_the_refused_traces_page_reads_on_a_phone(live_server, transactional_db, dataset):
    lead = make_user("lena", role=Role.LEAD)
    now = timezone.now()
    OtlpRefusal.objects.create(
        dataset=dataset, day=now.date(), why="has no messages", status=200, traces=412, spans=1_236, requests=9,
        detail="has no messages: no gen_ai.input.messages / gen_ai.output.messages, gen_ai.* message events, "
               "llm.input_messages / llm.output_messages or input.value / output.value",
        example_trace_id="4bf92f3577b34da6a3ce929d0e0e4736", first_at=now, last_at=now)
    OtlpRefusal.objects.create(
        dataset=dataset, day=now.date(), status=429, traces=900, spans=900, requests=3, first_at=now, last_at=now,
        why="the dataset held as many traces waiting for their root span as it may (EVALHUB_OTLP_MAX_WAITING)")

    with browser_page(viewport=PHONE) as page:
        log_in(page, live_server, lead.username, PASSWORD)
        page.goto(f"{live_server.url}{STORE}/datasets/{dataset.slug}/otlp-refused/")
        assert "latest: has no messages: no gen_ai.input.messages" in page.inner_text("[data-testid=otlp-refusals]")
        no_wider_than_the_screen(page, PHONE["width"])
        shot(page, "otlp_refused_390.png")
