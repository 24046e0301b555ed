"""A lead puts a rubric at observe with no evidence, tries to promote it to warn on weak evidence, reads why it is
refused, then promotes on good evidence.

Headless Chromium against pytest-django's live server; runs and labels are written straight to the
test database. Screenshots of the refused promotion, the promoted rubric with its CI results, the
overview and the audit log go to /tmp/shots/.
"""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from judges.models import CiResult
from tests.browser.helpers import STORE, log_in, shot
from tests.conftest import PASSWORD
from tests.judges.promotion_factories import evidence_run
from tests.judges.report_factories import make_config

pytestmark = pytest.mark.browser


def ci_history(rubric, config_hash: str, *, budget: bool = False) -> None:
    """A week of CI results, one a day, newest last: mostly passing, one failure, one provider outage;
    with `budget`, where the budget went (the cache makes repeated cases free)."""
    now = timezone.now()
    for day, (passed, failed, ne) in enumerate([(40, 0, 0), (39, 1, 0), (40, 0, 0), (12, 0, 28), (40, 0, 0)]):
        outcome = "warning" if failed else "not_evaluated" if ne else "pass"
        calls = 40 - 8 * day if ne == 0 else 12
        spent = {"calls": calls, "cache_hits": 40 - calls, "input_tokens": 1100 * calls, "output_tokens": 60 * calls,
                 "cost_usd": Decimal(calls) * Decimal("0.000201"), "contested": failed,
                 "latency_ms_p50": 800 + 10 * day, "latency_ms_p95": 2100 + 50 * day} if budget else {}
        CiResult.objects.create(
            rubric=rubric, config_hash=config_hash, stage="warn", outcome=outcome, passed=passed, failed=failed,
            not_evaluated=ne, total=passed + failed + ne, exit_code=0, token_name="github-actions",
            commit=f"{day:02}aa11bb22cc", ref="main", received_at=now - timedelta(days=5 - day), **spent,
        )


def test_a_refused_promotion_shows_its_reasons(live_server, page, dataset, rubric, lead, reviewer):
    config = make_config(rubric, lead, behavioral=True)
    weak = evidence_run(rubric, dataset, lead, reviewer, config=config, repeats=1, wrong=10, prefix="weak")
    good = evidence_run(rubric, dataset, lead, reviewer, config=config, prefix="good")

    log_in(page, live_server, lead.username, PASSWORD)
    errors = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)

    page.click("nav >> text=Promotion")
    page.click(f"tr[data-rubric={rubric.slug}] >> text=Promote / demote")
    page.wait_for_url(f"{live_server.url}{STORE}/rubrics/{rubric.slug}/promotion/")

    # Observe needs no evidence: a config version and a reason.
    page.select_option("[data-testid=observe] #id_config", str(config.pk))
    page.fill("[data-testid=observe] #id_reason", "Start recording its verdicts in CI.")
    page.click("[data-testid=observe] button[type=submit]")
    page.wait_for_selector("text=entered observe")
    assert "calibration: null" in page.inner_text("[data-testid=ci-config]")

    # On the weak run: refused, with each failing rule's number, the run's figure and the threshold.
    page.select_option("[data-testid=promote] #id_run", str(weak.pk))
    page.fill("[data-testid=promote] #id_reason", "Looks fine to me.")
    page.click("[data-testid=promote] button[type=submit]")
    refusal = page.locator("[data-testid=refusal]")
    refusal.wait_for()
    assert "Promotion to warn refused: 2 of 12 rules not met" in refusal.inner_text()
    reasons = page.locator("[data-testid=refusal-reasons] li").all_inner_texts()
    assert reasons == [
        f"Rule 4: repeats K — run {weak.pk} has 1, needs ≥ 2",
        f"Rule 5: agreement (floor) — run {weak.pk} has 75.0 %, needs ≥ 80.0 %",
    ]
    assert "observe" in page.inner_text("[data-testid=stage-now]")
    # The form keeps what was typed, so the lead can pick another run.
    assert page.input_value("[data-testid=promote] #id_reason") == "Looks fine to me."
    shot(page, "promotion_refused.png")

    # On the good run: promoted, and the page shows the evidence; then a week of CI results on the page (the
    # chart swaps by htmx when the period changes).
    page.select_option("[data-testid=promote] #id_run", str(good.pk))
    page.fill("[data-testid=promote] #id_reason", f"Run {good.pk}: 95 % agreement over 40 cases, K = 2.")
    page.click("[data-testid=promote] button[type=submit]")
    page.wait_for_selector("text=promoted from observe to warn")
    assert f"run {good.pk}" in page.inner_text("[data-testid=evidence]")
    assert "warn" in page.inner_text("[data-testid=stage-now]")
    ci_history(rubric, good.config.config_hash)
    page.reload()
    assert page.locator(".ci-bar").count() == 5
    page.select_option("#ci-days", "7")
    page.wait_for_function("document.querySelector('#ci-days').value === '7'")
    assert page.locator(".ci-bar").count() == 5
    shot(page, "promotion_page.png")

    page.goto(f"{live_server.url}{STORE}/promotion/")
    assert "evidence holds" in page.inner_text(f"tr[data-rubric={rubric.slug}]")
    shot(page, "promotion_overview.png")
    page.goto(f"{live_server.url}{STORE}/promotion/audit/")
    assert page.locator("tr[data-kind=promote]").count() == 2
    shot(page, "audit_log.png")
    # No CSP violation or script error on the way; the refused form's own answer is a 400, by design.
    assert [e for e in errors if "status of 400" not in e] == [], errors
    assert len(errors) == 1


def test_a_stale_gate_is_renewed_without_switching_it_off(live_server, page, dataset, rubric, lead, reviewer):
    from judges.promotion.services import rubric_promote

    run = evidence_run(rubric, dataset, lead, reviewer)
    for stage in ("observe", "warn"):
        rubric_promote(rubric=rubric, to_stage=stage, run=run, reason="Calibrated.", by=lead)
    ci_history(rubric, run.config.config_hash, budget=True)
    # A re-import changes a judged case: the evidence no longer judges what stands.
    case = dataset.cases.order_by("id").first()
    case.output = "changed by a re-import"
    case.content_changed_at = timezone.now()
    case.save(update_fields=["output", "content_changed_at"])
    fresh = evidence_run(rubric, dataset, lead, reviewer, config=run.config, prefix="fresh")

    log_in(page, live_server, lead.username, PASSWORD)
    errors = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(f"{live_server.url}{STORE}/rubrics/{rubric.slug}/promotion/")
    recalibration = page.inner_text("[data-testid=recalibration]")
    assert "Recalibration needed" in recalibration and "1 case changed since this run finished" in recalibration
    assert "$0.0016" in page.inner_text("[data-testid=ci-table]")  # the newest: 8 calls, the rest cached
    shot(page, "promotion_recalibration.png")

    renew = page.locator("[data-testid=renew]")
    renew.locator("select").select_option(str(fresh.pk))
    renew.locator("textarea").fill(f"Run {fresh.pk} judged the re-imported cases: the evidence holds again.")
    renew.locator("button[type=submit]").click()
    page.wait_for_selector(f"text=evidence at warn renewed on run {fresh.pk}")
    assert page.locator("[data-testid=recalibration]").count() == 0
    assert "warn" in page.inner_text("[data-testid=stage-now]")
    assert "Renewed" in page.inner_text("[data-testid=evidence]")
    shot(page, "promotion_renewed.png")
    assert errors == [], errors
