"""A lead starts a run in the browser against the fake provider and watches its progress to the end.

The dashboard is pytest-django's live server; the work is done by a real Celery worker process (Redis
broker) reading the same test database, exactly as in production. Screenshots of the config editor,
the start form with its estimate and the run page go to /tmp/shots/.
"""

import re
import time
from decimal import Decimal

import pytest
from django.db import connection
from playwright.sync_api import expect

from judges.configs import services as config_services
from judges.models import Judgment, ModelPrice, Run
from tests.browser.helpers import STORE, celery_worker, log_in, shot
from tests.conftest import PASSWORD
from tests.judges.helpers import MODEL, behavioral_spec, make_cases

pytestmark = [pytest.mark.browser, pytest.mark.worker]

CASES, REPEATS = 30, 2


@pytest.fixture
def worker(live_server, tmp_path, fake_provider):
    """A real Celery worker (with beat) on the test database and this test's Redis db; killed afterwards."""
    with celery_worker(tmp_path, "browser", EVALHUB_JUDGE_OPENAI_URL=fake_provider.openai_base_url,
                       EVALHUB_JUDGE_API_KEY="sk-test-not-a-real-key") as proc:
        yield proc


def test_a_lead_starts_a_run_and_watches_it_to_the_end(live_server, worker, page, dataset, rubric, lead,
                                                        fake_provider):
    make_cases(dataset, CASES)
    spec = behavioral_spec(policy="Orders ship in 2 days.")
    config = config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)
    ModelPrice.objects.create(model=MODEL, input_per_mtok=Decimal("0.15"), output_per_mtok=Decimal("0.60"),
                              updated_by=lead)
    # Slow enough to watch: 60 calls of 150 ms, two at a time; answers shorter than 28 characters fail.
    fake_provider.control(latency_ms=150, rule={"kind": "answer_min_length", "chars": 28})

    log_in(page, live_server, lead.username, PASSWORD)

    # The editor, with the prompt preview filled in from a case.
    page.goto(f"{live_server.url}{STORE}/rubrics/{rubric.slug}/judges/new/")
    page.fill("#id_preview_q", "c004")
    page.locator("[data-testid=case-choice]", has_text="c004").click()
    expect(page.get_by_test_id("prompt-user")).to_contain_text("Order ORD-4 shipped yesterday.")
    shot(page, "config_editor.png")

    # The config page, then the start form with its estimate.
    page.goto(f"{live_server.url}{STORE}/judges/{config.pk}/")
    assert config.config_hash in page.inner_text("[data-testid=config-hash]")
    page.click("text=Start a run")
    page.fill("#id_repeats", str(REPEATS))
    page.fill("#id_concurrency", "2")
    page.wait_for_function(
        "document.querySelector('[data-testid=estimate-judgments]').innerText.includes('= 60')"
    )
    assert page.inner_text("[data-testid=estimate-cost]").startswith("$")
    # Typing follows through: the concurrency changes the rounds, the repeats the judgments.
    page.fill("#id_concurrency", "3")
    expect(page.locator("[data-testid=estimate-time]")).to_contain_text("3 at a time")
    assert "20 rounds" in page.inner_text("[data-testid=estimate-time]")
    page.fill("#id_concurrency", "2")
    expect(page.locator("[data-testid=estimate-time]")).to_contain_text("2 at a time")
    # The fresh-run checkbox sits on its label's line, before it (_field.html's layout of a single checkbox).
    box, label = page.locator("#id_fresh").bounding_box(), page.locator("label[for=id_fresh]").bounding_box()
    assert box["x"] < label["x"] and abs((box["y"] + box["height"] / 2) - (label["y"] + label["height"] / 2)) < 10
    shot(page, "run_start_estimate.png")
    page.click("text=Start the run")

    # The run page: progress updates live, without reloading, until the run is finished.
    page.wait_for_url(f"{live_server.url}{STORE}/runs/*/")
    run = Run.objects.get()
    seen = set()
    mid_shot = False
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        status = page.inner_text("[data-testid=run-status]")
        done = int(page.inner_text("[data-testid=run-done]").split("/")[0])
        seen.add(done)
        if 0 < done < CASES * REPEATS and not mid_shot:
            shot(page, "run_progress.png")
            mid_shot = True
        if status == "finished":
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"the run did not finish; progress seen: {sorted(seen)}")

    assert page.inner_text("[data-testid=run-done]") == f"{CASES * REPEATS} / {CASES * REPEATS}"
    assert any(0 < d < CASES * REPEATS for d in seen), f"no intermediate progress was shown: {sorted(seen)}"
    # The table reloads once the run is finished (the 286 answer's run-finished event): one row per case,
    # its two repeats side by side.
    # The finished table is the one that no longer polls: sorting before it lands would race its swap.
    expect(page.locator("#judgments")).not_to_have_attribute("hx-trigger", re.compile("every"))
    expect(page.locator("[data-testid=repeat-verdict]")).to_have_count(CASES * REPEATS)
    assert page.locator("[data-testid=case-row]").count() == CASES
    # Sorting by failing repeats puts the failing cases (every third) first, without a reload.
    page.click("[data-testid=sort-fails]")
    page.wait_for_url("**sort=-fails**")
    expect(page.locator("[data-testid=case-row] td a").first).to_have_text("c000")
    fails_in_row = "[data-testid=repeat-verdict].verdict-fail"
    assert page.locator("[data-testid=case-row]").nth(9).locator(fails_in_row).count() == 2
    assert page.locator("[data-testid=case-row]").nth(10).locator(fails_in_row).count() == 0
    shot(page, "run_finished.png", full_page=False)

    connection.close()  # read what the worker committed
    run.refresh_from_db()
    pairs = list(Judgment.objects.filter(run=run).values_list("case_id", "repeat"))
    assert len(pairs) == len(set(pairs)) == run.total == CASES * REPEATS
    assert (run.status, run.done, run.provider_calls) == (Run.Status.FINISHED, 60, 60)
    # Cases with an empty answer (every third) fail the fake's rule; the rest pass.
    assert run.judgments.filter(outcome="fail").count() == 20
