"""A lead opens the report of a semantic run, reads the threshold explorer, tries a stricter pass_at, and
saves it as a new config version through the editor. Screenshots: /tmp/shots/explorer*.png.

The judgments (with similarities spread like a real embeddings model's) are written straight to the test
database; the engine's and the run's own tests cover how they are made.
"""

import random

import pytest

from judges.configs import services as config_services
from judges.models import Judgment
from tests.browser.helpers import STORE, log_in, shot
from tests.conftest import PASSWORD, make_user
from tests.judges.helpers import behavioral_spec, semantic_spec
from tests.judges.report_factories import label, make_cases, make_run

pytestmark = pytest.mark.browser


def build_semantic_run(dataset, rubric, lead):
    """60 cases: human passes mostly similar to their references, human fails mostly not; pass at 0.8,
    fail below 0.4, the judge's (mostly right) verdicts between the two."""
    rita = make_user("rita")
    rng = random.Random(7)
    cases = make_cases(dataset, [(f"case-{i:03}", "policy") for i in range(60)])
    outcomes, similarities = {}, {}
    for i, case in enumerate(cases):
        human = "fail" if i % 3 == 0 else "pass"
        label(case, rubric, rita, human)
        s = round(min(1.0, max(0.0, rng.gauss(0.82 if human == "pass" else 0.5, 0.12))), 4)
        similarities[case.pk] = s
        if s >= 0.8:
            outcome = "pass"
        elif s < 0.4:
            outcome = "fail"
        else:
            outcome = human if rng.random() < 0.85 else ("pass" if human == "fail" else "fail")
        outcomes[case] = [outcome]
    spec = {**behavioral_spec(), **semantic_spec(pass_at=0.8, fail_below=0.4), "layers": ["semantic", "behavioral"]}
    config = config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)
    run = make_run(config, dataset, lead, outcomes)
    rows = list(Judgment.objects.filter(run=run))
    for j in rows:
        j.similarity = similarities[j.case_id]
        j.layer = "behavioral" if 0.4 <= j.similarity < 0.8 else "semantic"
    Judgment.objects.bulk_update(rows, ["similarity", "layer"])
    return run


def test_a_lead_explores_thresholds_and_saves_a_new_version(live_server, page, dataset, rubric, lead):
    run = build_semantic_run(dataset, rubric, lead)
    log_in(page, live_server, lead.username, PASSWORD)
    errors = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)

    page.goto(f"{live_server.url}{STORE}/runs/{run.pk}/report/")
    page.click("[data-testid=fold-explorer] > summary")  # the report's panels are folded
    explorer = page.locator("[data-testid=threshold-explorer]")
    explorer.scroll_into_view_if_needed()
    chart = page.locator("[data-testid=explorer-chart]")
    assert chart.locator("polyline").count() >= 3  # agreement, true pass rate, true fail rate
    assert chart.locator("rect.chart-saved").count() > 50
    labels = chart.locator("text.chart-mark").all_text_contents()
    assert "pass_at 0.80 (run)" in labels and "fail_below 0.40 (run)" in labels and "floor 80 %" in labels
    rows = page.locator("[data-testid=explorer-table] tbody tr").all_inner_texts()
    assert rows[0].startswith("this run's") and rows[1].startswith("chosen")
    explorer.screenshot(path=str(_shots() / "explorer.png"), caret="initial")

    # A stricter pass_at: htmx swaps the explorer alone and pushes the URL.
    page.fill("#explorer-pass-at", "0.9")
    page.click("[data-testid=explorer-form] button")
    page.wait_for_url("**pass_at=0.9&fail_below=0.40")
    page.wait_for_selector("text=pass_at 0.90 (chosen)")
    chosen = page.locator("[data-testid=explorer-table] tr[data-setting=chosen]").inner_text()
    assert "0.90" in chosen
    # caret="initial": hiding the caret injects a style, which the Content-Security-Policy refuses.
    page.locator("[data-testid=threshold-explorer]").screenshot(path=str(_shots() / "explorer_chosen.png"),
                                                                caret="initial")
    shot(page, "explorer_report.png")
    assert errors == []

    # Save as a new config version: the editor opens prefilled; saving makes v2.
    page.click("[data-testid=explorer-save]")
    page.wait_for_url("**/new/**")
    assert page.input_value("#id_semantic_pass_at") == "0.9"
    assert page.input_value("#id_semantic_fail_below") == "0.4"
    page.click("button[value=save]")
    page.wait_for_selector("text=Saved return-policy v2")
    assert errors == []


def _shots():
    from tests.browser.helpers import SHOTS

    SHOTS.mkdir(parents=True, exist_ok=True)
    return SHOTS
