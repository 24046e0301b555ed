"""The calibration report at size, in headless Chromium at 1440 px: a run with every panel (300 cases, K = 3,
disagreements over many pages, 110 flipped cases, not-evaluated judgments, contested cases, the threshold
explorer, bias probes) answers "can this judge be trusted" in its first view, stays under 3,000 px with its
panels folded, and loses nothing: each panel opens, and a filtered or paged disagreements table comes back open.

Screenshots (light and dark, folded and with a panel open) go to tests.browser.helpers.SHOTS (report_size_*.png).
"""

import random

import pytest
from playwright.sync_api import expect

from judges.configs import services as config_services
from judges.models import Judgment
from tests.browser.helpers import STORE, browser_page, log_in, shot
from tests.conftest import PASSWORD, make_user
from tests.judges.helpers import behavioral_spec, semantic_spec
from tests.judges.report_factories import label, make_cases, make_run

pytestmark = pytest.mark.browser

CASES = 300
CATEGORIES = ("policy", "tools", "combined", "edge", "adversarial", "paraphrase", "shipping", "billing")
FOLDED_MAX_PX = 3000
SECOND_OPINION = {
    "role": "second_opinion", "provider": "anthropic", "model": "claude-haiku-4-5-20251001",
    "base_url_env": "EVALHUB_JUDGE_ANTHROPIC_URL", "api_key_env": "EVALHUB_JUDGE_API_KEY", "when": {"mode": "always"},
}
REASON = ("The answer names the 30-day return window and the receipt, as the policy says, but it also promises a "
          "refund to the original card within two days, which the policy does not say; the rest follows it. ") * 2


@pytest.fixture
def page():
    with browser_page(viewport={"width": 1440, "height": 1000}) as page:
        yield page


def build_big_report(dataset, rubric, lead):
    """300 cases, K = 3, on a semantic + behavioral judge with a second opinion: about a fifth of the cases
    disagree, 110 flip, every 12th case has a repeat not evaluated, every 9th case is contested."""
    rita = make_user("rita")
    rng = random.Random(11)
    cases = make_cases(dataset, [(f"case-{i:04}", CATEGORIES[i % len(CATEGORIES)]) for i in range(CASES)])
    outcomes = {}
    for i, case in enumerate(cases):
        human = "fail" if i % 3 == 0 else "pass"
        other = "pass" if human == "fail" else "fail"
        label(case, rubric, rita, human)
        if i < 110:
            outcomes[case] = [human, other, human]
        elif i % 5 == 0:
            outcomes[case] = [other] * 3
        else:
            outcomes[case] = [human] * 3
        if i % 12 == 7:
            outcomes[case][2] = "not_evaluated"
    spec = {**behavioral_spec(secondary=SECOND_OPINION), **semantic_spec(pass_at=0.8, fail_below=0.4),
            "layers": ["semantic", "behavioral"]}
    config = config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)
    run = make_run(config, dataset, lead, outcomes)
    rows = list(Judgment.objects.filter(run=run).select_related("case"))
    for j in rows:
        j.similarity = round(rng.uniform(0.2, 1.0), 4)
        j.reason = REASON if j.outcome != "not_evaluated" else ""
        if int(j.case.external_id[-4:]) % 9 == 0 and j.outcome != "not_evaluated":
            j.contested, j.secondary_outcome = True, "pass" if j.outcome == "fail" else "fail"
    Judgment.objects.bulk_update(rows, ["similarity", "reason", "contested", "secondary_outcome"])
    return run


def height(page) -> int:
    return page.evaluate("() => document.documentElement.scrollHeight")


def test_the_report_of_a_large_run_fits_folded_and_loses_nothing(live_server, page, dataset, rubric, lead):
    run = build_big_report(dataset, rubric, lead)
    log_in(page, live_server, lead.username, PASSWORD)
    url = f"{live_server.url}{STORE}/runs/{run.pk}/report/"
    errors = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.goto(url)
        folded = height(page)
        print(f"report height, {scheme}, folded: {folded} px")
        shot(page, f"report_size_folded_{scheme}.png")
        assert folded < FOLDED_MAX_PX, f"the folded report is {folded} px tall"

    # The first view (1440 × 1000) answers "can this judge be trusted": the verdict, agreement against the
    # floor and ceiling, false passes and fails, flips.
    for testid in ("verdict", "agreement-band", "agreement", "false-pass", "false-fail", "flips"):
        box = page.locator(f"[data-testid={testid}]").bounding_box()
        assert box["y"] + box["height"] < 1000, f"{testid} is below the first view"
    assert "Not promotable: 3 of 12 rules not met" in page.inner_text("[data-testid=verdict]")

    # Every panel folds with its key figure in view, and opens on what it folded.
    summaries = {
        "rules": "9 of 12 met", "by_category": "8 categories · lowest agreement", "by_split": "2 splits",
        "explorer": "this run's setting: pass_at 0.80", "disagreements": "148 cases where a repeat differs",
        "contested": "34 cases", "flipped": "110 cases · flip rate 36.7 %", "not-evaluated": "25 judgments",
        "probes": "none finished",
    }
    for fold, key in summaries.items():
        summary = page.locator(f"[data-testid=fold-{fold}] > summary")
        assert key in summary.inner_text(), (fold, summary.inner_text())
    for fold, content in (("rules", "[data-testid=rules]"), ("by_kind", "table.groups"),
                          ("explorer", "[data-testid=explorer-chart]"), ("contested", "[data-testid=contested-cases]"),
                          ("flipped", "[data-testid=flipped]"), ("not-evaluated", "[data-testid=not-evaluated]"),
                          ("probes", "[data-testid=probes] form")):
        shown = page.locator(f"[data-testid=fold-{fold}] {content}")
        expect(shown).to_be_hidden()
        page.click(f"[data-testid=fold-{fold}] > summary")
        expect(shown).to_be_visible()
    # Long lists show 20 rows, and every listed one after "show all".
    expect(page.locator("[data-testid=contested-cases] tbody tr")).to_have_count(20)
    page.click("[data-testid=contested-all] > summary")
    expect(page.locator("[data-testid=fold-contested] tr[data-case]")).to_have_count(34)
    expect(page.locator("[data-testid=not-evaluated] tbody tr")).to_have_count(20)
    page.click("[data-testid=not-evaluated-all] > summary")
    expect(page.locator("[data-testid=fold-not-evaluated] tbody tr")).to_have_count(25)
    expect(page.locator("[data-testid=flipped] li")).to_have_count(100)
    assert "and 10 more" in page.inner_text("[data-testid=fold-flipped]")
    print(f"report height, every panel open: {height(page)} px")

    # The disagreements, 20 to a page: paging swaps the table inside its open fold; the pushed URL reloads
    # with the fold open (a link that works without JavaScript does too).
    page.goto(url)
    page.click("[data-testid=fold-disagreements] > summary")
    rows = page.locator("#disagreements tbody tr[data-case]")
    expect(rows).to_have_count(20)
    assert "Page 1 of 8 · 148 cases" in page.inner_text("#disagreements")
    page.click("#disagreements >> text=Next →")
    page.wait_for_url("**page=2**")
    expect(page.locator("#disagreements")).to_contain_text("Page 2 of 8")
    page.emulate_media(color_scheme="light")
    page.reload()
    expect(rows.first).to_be_visible()
    shot(page, "report_size_disagreements_open_light.png")
    page.emulate_media(color_scheme="dark")
    shot(page, "report_size_disagreements_open_dark.png")
    page.goto(url + "?pass_at=0.9")
    expect(page.locator("[data-testid=explorer-chart]")).to_be_visible()

    # A link to a panel (as "send contested cases" redirects to #contested) opens its fold (Chromium does).
    page.goto(url + "#contested")
    expect(page.locator("[data-testid=contested-cases]")).to_be_visible()
    assert errors == [], errors
