"""A lead picks the case the editor's prompt preview renders, and reads the prompt whole at 1440 px.

No worker and no provider: a preview builds the prompt and sends nothing. Screenshots (light and dark) go
to EVALHUB_SHOTS.
"""

import pytest
from playwright.sync_api import expect

from judges.configs import services as config_services
from judges.models import JudgeConfig, Run
from labeling.models import Case
from tests.browser.helpers import STORE, browser_page, log_in, shot
from tests.judges.helpers import behavioral_spec, make_cases

pytestmark = pytest.mark.browser

# One unbroken 400-character word: it must wrap inside the preview, not run off its side.
LONG_WORD = "refund" * 66 + "!"


@pytest.fixture
def page():
    with browser_page(viewport={"width": 1440, "height": 1000}) as page:
        yield page


def test_a_lead_picks_the_case_the_preview_renders(live_server, page, dataset, other_dataset, rubric, lead):
    make_cases(dataset, 12)
    Case.objects.filter(dataset=dataset, external_id="c011").update(input=f"Can I return this? {LONG_WORD}")
    make_cases(other_dataset, 2, prefix="o")
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    Run.objects.create(config=config, dataset=dataset, created_by=lead)  # the rubric's dataset: the preview's
    prompt = page.get_by_test_id("prompt-user")
    chosen = page.locator("label.case-choice.chosen")

    log_in(page, live_server, lead.username)
    page.goto(f"{live_server.url}{STORE}/rubrics/{rubric.slug}/judges/new/")

    # The first case of the dataset the rubric ran on is previewed at once.
    expect(chosen).to_contain_text("c000")
    expect(prompt).to_contain_text("Where is my order ORD-0?")

    # A search narrows the list (the chosen case stays listed); a click previews the case picked.
    page.fill("#id_preview_q", "c011")
    expect(page.get_by_test_id("case-choice")).to_have_count(2)
    page.get_by_test_id("case-choice").filter(has_text="c011").click()
    expect(chosen).to_contain_text("c011")
    expect(prompt).to_contain_text(LONG_WORD[:40])

    # The whole prompt is readable: wide, wrapped, nothing cut off at the side.
    box = prompt.bounding_box()
    assert box["width"] >= 600, box
    assert prompt.evaluate("e => e.scrollWidth <= e.clientWidth && e.scrollHeight <= e.clientHeight")
    shot(page, "config_preview_light.png")
    page.emulate_media(color_scheme="dark")
    shot(page, "config_preview_dark.png")
    page.emulate_media(color_scheme="light")

    # An edited template previews with the case still chosen.
    page.fill("#id_prompt_template", "Only {question}\n{answer}")
    page.get_by_test_id("preview-button").click()
    expect(prompt).to_contain_text("Only Can I return this?")
    expect(chosen).to_contain_text("c011")

    # Enter in the search previews; it never saves a version.
    page.fill("#id_preview_q", "c01")
    expect(page.get_by_test_id("case-choice")).to_have_count(2)  # c010, c011
    with page.expect_response(lambda r: r.request.method == "POST") as pressed:
        page.press("#id_preview_q", "Enter")
    assert pressed.value.status == 200 and pressed.value.request.headers.get("hx-request") == "true"
    assert "action=preview" in pressed.value.request.post_data
    assert JudgeConfig.objects.count() == 1
    expect(chosen).to_contain_text("c011")

    # Another dataset starts on its own first case.
    page.select_option("#id_preview_dataset", "other")
    expect(chosen).to_contain_text("o000")
    expect(page.locator(".preview-card .errors")).to_have_count(0)

    # The saved version's page has the same picker, below the spec, as wide as the page.
    page.goto(f"{live_server.url}{STORE}/judges/{config.pk}/")
    page.get_by_test_id("case-choice").filter(has_text="c003").click()
    expect(chosen).to_contain_text("c003")
    expect(prompt).to_contain_text("Where is my order ORD-3?")
    assert prompt.bounding_box()["width"] >= 700
    page.select_option("#id_preview_dataset", "other")
    expect(chosen).to_contain_text("o000")
