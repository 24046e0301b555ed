"""A lead starts bias probes from a run's report and reads what moved, in headless Chromium.

The judge is the fake provider over HTTP, scripted as a verbose-loving judge (it passes answers of 120
characters or more); work runs eagerly inside the live server, so the probes finish within the POST.
Screenshots go to /tmp/shots/ (probes_panel.png, probes_moved.png).
"""

import pytest

from judges.configs import services as config_services
from judges.runs import services
from labeling.models import Case, Label, case_split, labeled_content_hash
from tests.browser.helpers import SHOTS, STORE, log_in
from tests.conftest import PASSWORD, make_user
from tests.judges.helpers import behavioral_spec

pytestmark = pytest.mark.browser

LONG = ("Thanks for your order. I looked up the purchase and the policy for it, and here is what applies in "
        "your case: ")


def test_a_lead_probes_a_run_and_opens_a_moved_case(live_server, page, settings, fake_provider, dataset, rubric,
                                                    lead):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    fake_provider.control(rule={"kind": "answer_min_length", "chars": 120})
    rita = make_user("rita")
    short = {"pass": "Yes: within 30 days, with the receipt.", "fail": "We never take returns."}
    for i in range(12):
        human = "fail" if i % 3 == 0 else "pass"
        output = (LONG if i % 2 else "") + short[human]  # long answers pass, short ones fail
        external_id = f"case-{i:03}"
        case = Case.objects.create(
            dataset=dataset, external_id=external_id, input=f"Can I return order {i}?", output=output,
            split=case_split(external_id), metadata={"agent_model": "gpt-4o-2024-08-06"},
            content_hash=labeled_content_hash(input=f"Can I return order {i}?", output=output, trace={}),
        )
        Label.objects.create(case=case, rubric=rubric, reviewer=rita, verdict=human, content_hash=case.content_hash)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    run = services.run_start(config=config, dataset=dataset, repeats=2, concurrency=4, spend_cap_usd=None, by=lead)

    log_in(page, live_server, lead.username, PASSWORD)
    errors = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)

    page.goto(f"{live_server.url}{STORE}/runs/{run.pk}/report/")
    assert "self-preference" in page.inner_text("[data-testid=fold-probes] > summary")  # seen while folded
    page.click("[data-testid=fold-probes] > summary")
    probes = page.locator("#probes")
    assert "openai model family" in probes.locator("[data-testid=self-preference]").inner_text()
    probes.locator("input[value=sycophancy]").uncheck()
    probes.locator("button[type=submit]").click()  # htmx swaps the panel; the probes ran in the POST
    page.wait_for_selector("[data-testid=moved-share-verbosity]")
    # The six short answers fail in the run and pass once padded; the fails of the injection probe
    # (human fails: case-000, 003, 006, 009) stay as the length decides, padded or not.
    assert page.inner_text("[data-testid=moved-share-verbosity]") == "50.0 %"
    assert page.inner_text("[data-testid=moved-verbosity]") == "6"
    assert "0 to pass" in page.inner_text("[data-testid=moved-injection]")
    SHOTS.mkdir(parents=True, exist_ok=True)
    probes.screenshot(path=str(SHOTS / "probes_panel.png"))

    page.click("[data-testid=moved-cases-verbosity] > summary")
    row = page.locator("[data-testid=moved-cases-verbosity] tr[data-case=case-000]")
    row.locator("summary").click()
    assert "Thank you for reaching out" in row.locator("pre.variant-text").inner_text()
    probes.screenshot(path=str(SHOTS / "probes_moved.png"))
    row.locator("a").click()
    page.wait_for_url("**/cases/**")
    assert "case-000" in page.inner_text("main")
    assert errors == [], errors
