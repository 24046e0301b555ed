"""A lead opens a run's calibration report, filters it to false passes, and opens a case.

The dashboard is pytest-django's live server; the run's judgments and labels are written straight to
the test database (the run machinery has its own browser test). Screenshots of the report, filtered
report and the rubric's versions chart go to /tmp/shots/.
"""

import pytest

from tests.browser.helpers import SHOTS, STORE, log_in, shot
from tests.conftest import PASSWORD, make_user
from tests.judges.report_factories import label, make_cases, make_config, make_run

pytestmark = pytest.mark.browser

CATEGORIES = ("policy", "tools", "combined", "edge")


def build_report(dataset, rubric, lead):
    """40 cases, K = 3: mostly right, 3 false-pass cases, 2 false-fail, 3 flips, one timeout, one dispute."""
    rita, rob = make_user("rita"), make_user("rob")
    cases = make_cases(dataset, [(f"case-{i:03}", CATEGORIES[i % 4]) for i in range(40)])
    judgments = {}
    for i, case in enumerate(cases):
        human = "fail" if i % 3 == 0 else "pass"
        label(case, rubric, rita, human)
        if i % 5 == 0:  # a second reviewer on some cases, disagreeing once
            label(case, rubric, rob, human if i != 10 else ("pass" if human == "fail" else "fail"))
        other = "pass" if human == "fail" else "fail"
        outcomes = [human] * 3
        if i in (3, 9, 15):  # human fail, judge pass: false passes
            outcomes = ["pass"] * 3
        elif i in (4, 8):  # human pass, judge fail
            outcomes = ["fail"] * 3
        elif i in (20, 22, 26):  # flips
            outcomes = [human, other, human]
        elif i == 31:
            outcomes = [human, human, "not_evaluated"]
        judgments[case] = outcomes
    config = make_config(rubric, lead, behavioral=True)
    run = make_run(config, dataset, lead, judgments, reasons={
        ("case-003", 1): "The answer states the 30-day window <b>correctly</b>.",
    }, cost_usd="0.0342", input_tokens=51234, output_tokens=4120, provider_calls=119, cache_hits=1)
    return run, {c.external_id: c for c in cases}


def test_a_lead_reads_a_report_filters_to_false_passes_and_opens_a_case(live_server, page, dataset, rubric, lead):
    run, cases = build_report(dataset, rubric, lead)

    log_in(page, live_server, lead.username, PASSWORD)

    errors = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(f"{live_server.url}{STORE}/runs/{run.pk}/report/")
    verdict = page.inner_text("[data-testid=verdict]")
    # case-010's two reviewers disagree (a dispute: no human verdict), so 39 cases, 116 evaluated judgments;
    # wrong: 9 false passes, 6 false fails and 3 flipped repeats → 98 / 116. Only the flip rule fails (3 / 39).
    assert "Not promotable: 1 of 12 rules not met" in verdict
    assert page.inner_text("[data-testid=agreement]") == "84.5 %"
    assert page.inner_text("[data-testid=false-pass]") == "9"
    assert page.inner_text("[data-testid=reviewer-agreement]").startswith("87.5 %")
    assert "floor 80 %" in page.inner_html("[data-testid=agreement-band]")
    page.click("[data-testid=fold-rules] > summary")  # the panels behind the figures are folded
    unmet = page.locator("tr.rule-unmet").all_inner_texts()
    assert len(unmet) == 1 and unmet[0].startswith("flip rate\t7.7 %")
    shot(page, "report.png")
    shot(page, "report_top.png", full_page=False)

    # Filter to false passes: htmx swaps the table (and pushes the URL), no page reload.
    page.click("[data-testid=fold-disagreements] > summary")
    page.select_option("#filter-only", "false_pass")
    page.wait_for_url("**only=false_pass**")
    page.wait_for_function(
        "document.querySelectorAll('#disagreements tbody tr[data-case]').length === 3"
    )
    shown = page.locator("#disagreements tbody tr[data-case]").evaluate_all(
        "rows => rows.map(r => r.dataset.case)"
    )
    assert shown == ["case-003", "case-009", "case-015"]
    # The judge's reason is shown as text, never as markup.
    assert "<b>correctly</b>" in page.inner_text("#disagreements")
    page.locator("#disagreements").scroll_into_view_if_needed()
    shot(page, "report_false_passes.png", full_page=False)

    # Open a case from the table.
    page.click("#disagreements >> text=case-009")
    page.wait_for_url(f"{live_server.url}{STORE}/cases/{cases['case-009'].pk}/")
    assert "case-009" in page.inner_text("main")
    assert errors == [], errors  # no CSP violation or script error on the way

    # The versions chart on the rubric's config page: v1's run, and a better v2.
    v2 = make_config(rubric, lead, note="v2")
    run2 = make_run(v2, dataset, lead, {case: [outcome] * 3 for case, outcome in (
        (c, "fail" if int(c.external_id[-3:]) % 3 == 0 else "pass") for c in cases.values()
    ) if case.external_id not in ("case-003", "case-004")} | {cases["case-003"]: ["pass"] * 3,
                                                              cases["case-004"]: ["pass", "fail", "pass"]})
    page.goto(f"{live_server.url}{STORE}/rubrics/{rubric.slug}/judges/")
    page.wait_for_selector("[data-testid=versions-chart] svg")
    page.locator("[data-testid=versions-chart]").screenshot(path=str(SHOTS / "versions_chart.png"))

    # The two versions compared: v2 fixes the false passes and fails of v1 but case-003 and flips case-004.
    page.goto(f"{live_server.url}{STORE}/runs/compare/?a={run.pk}&b={run2.pk}")
    changed = page.locator("[data-testid=changes] tbody tr[data-case]").evaluate_all(
        "rows => rows.map(r => r.dataset.case)"
    )
    assert "case-009" in changed and "case-003" not in changed
    shot(page, "compare.png")
