"""The drift check (docs/promotion.md, "Drift on new cases"): a periodic task judges a promoted rubric's current
cases with its evidence config; new cases cost calls, the rest come from the cache; on at least 20 new
cases whose agreement's Wilson upper bound is below the floor, the rubric needs recalibrating, until the
lead renews its evidence.

The worker test runs a real Celery worker with beat (the drift interval set to one second) against the
stand-in provider; the reason's boundaries are checked on DriftCheck rows, no worker needed.
"""

import os
import signal

import pytest
from django.db import connection
from django.urls import reverse

from judges.configs import services as config_services
from judges.drift.selectors import DRIFT_MIN_NEW_CASES, drift_reason
from judges.models import DriftCheck, Run
from judges.promotion.gate_config import gate_config
from judges.promotion.selectors import promotion_overview, promotion_rows
from judges.promotion.services import rubric_promote, rubric_renew
from judges.runs import services as run_services
from labeling.models import Case, Label, Rubric, case_split, labeled_content_hash
from tests.conftest import TEST_PROJECT, store_project
from tests.judges.workers import broker_url, start_worker, wait_for
from tests.judges.workers import empty_broker as empty

OLD, REPEATS = 60, 2
FLOOR_REASON = "new cases is"


def add_cases(dataset, rubric, reviewer, specs: list[tuple[str, str, str]]) -> None:
    """specs: (external_id, answer, human verdict). The stand-in passes an answer containing "ships"."""
    cases = Case.objects.bulk_create(
        Case(dataset=dataset, external_id=eid, input=f"Where is order {eid}?", output=answer,
             split=case_split(eid),
             content_hash=labeled_content_hash(input=f"Where is order {eid}?", output=answer, trace={}))
        for eid, answer, _ in specs
    )
    Label.objects.bulk_create(
        Label(case=case, rubric=rubric, reviewer=reviewer, verdict=verdict, content_hash=case.content_hash)
        for case, (_, _, verdict) in zip(cases, specs, strict=True)
    )


def finished(run: Run) -> bool:
    connection.close()  # a fresh read each poll
    return Run.objects.get(pk=run.pk).status == Run.Status.FINISHED


def recorded_check() -> DriftCheck | None:
    connection.close()
    return DriftCheck.objects.filter(checked_at__isnull=False).select_related("run").order_by("pk").first()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_it_judges_new_cases_only_and_needs_recalibration_until_renewed(
    tmp_path, dataset, rubric, lead, reviewer, fake_provider, settings, monkeypatch
):
    empty(broker_url("redis"))
    if not settings.CELERY_BROKER_URL.startswith("redis"):
        pytest.fail("This test needs CELERY_BROKER_URL=redis://… (scripts/test.sh sets it).")
    fake_provider.control(rule={"kind": "answer_contains", "text": "ships"})
    # 60 old cases, the judge right on all but one (a human-failed "ships" answer): agreement 59/60.
    add_cases(dataset, rubric, reviewer, [
        (f"old{i:02}", "Your order ships today." if i % 2 == 0 or i == 1 else "It is lost.",
         "pass" if i % 2 == 0 else "fail") for i in range(OLD)
    ])
    config = config_services.judge_config_save(
        rubric=rubric, by=lead,
        spec={"layers": ["behavioral"], "provider": "openai", "model": "gpt-4o-mini-2024-07-18",
              "base_url_env": "EVALHUB_JUDGE_OPENAI_URL", "api_key_env": "EVALHUB_JUDGE_API_KEY", "timeout_s": 5},
    )
    monkeypatch.setenv("EVALHUB_DRIFT_INTERVAL_SECONDS", "1")  # beat starts the drift check every second
    # No fresh sample here (tests/judges/drift/test_fresh_sample.py has its own): the calls counted are the new cases'.
    monkeypatch.setenv("EVALHUB_DRIFT_FRESH_SHARE", "0")
    worker = start_worker(tmp_path, "drift", broker=broker_url("redis"))
    try:
        evidence = run_services.run_start(config=config, dataset=dataset, repeats=REPEATS, concurrency=4,
                                          spend_cap_usd=None, by=lead)
        wait_for(lambda: finished(evidence), 60, "the evidence run to finish")
        # 20 new cases with verdicts after the evidence: the judge right on half (the Wilson upper bound of
        # 20 agreeing of 40 judgments is about 0.65, below the 0.80 floor). Added before the promotion, so
        # beat's first drift check already sees them.
        add_cases(dataset, rubric, reviewer, [
            (f"new{i:02}", "Your order ships today." if i % 4 in (0, 1) else "It is lost.",
             "pass" if i % 2 == 0 else "fail") for i in range(DRIFT_MIN_NEW_CASES)
        ])
        calls_before = fake_provider.stats()["total"]
        rubric_promote(rubric=rubric, to_stage="observe", run=evidence, reason="Calibrated.", by=lead)
        wait_for(lambda: recorded_check() is not None, 60, "beat's drift check to be recorded")
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()

    check = recorded_check()
    drift = check.run
    assert (drift.parent_id, drift.probe, drift.config_id, check.evidence_run_id) == (evidence.pk, "", config.pk,
                                                                                    evidence.pk)
    # New cases cost calls, the old ones come from the cache: the stand-in saw only the new ones.
    assert drift.provider_calls == DRIFT_MIN_NEW_CASES * REPEATS
    assert drift.cache_hits == OLD * REPEATS
    assert fake_provider.stats()["total"] - calls_before == DRIFT_MIN_NEW_CASES * REPEATS
    assert (check.new_n, check.new_agreement, check.all_n) == (DRIFT_MIN_NEW_CASES, 0.5, OLD + DRIFT_MIN_NEW_CASES)
    assert check.new_ci95[1] < rubric.agreement_floor
    assert check.all_agreement == pytest.approx((59 + 10) / 80)

    [row] = promotion_rows(rubrics=[rubric])
    assert len(row.recalibration) == 1 and FLOOR_REASON in row.recalibration[0]
    [entry] = gate_config(project=store_project())["rubrics"]
    assert entry["recalibration_needed"] is True and entry["recalibration_reasons"] == row.recalibration
    # A drift run is never a run the lead picks: not in run lists, nor in the evidence menu.
    assert drift not in Run.objects.filter(parent__isnull=True)

    # The lead renews on a fresh run (all from the cache, judged here in eager mode): "new" counts from it.
    settings.CELERY_TASK_ALWAYS_EAGER = True
    fresh = run_services.run_start(config=config, dataset=dataset, repeats=REPEATS, concurrency=4,
                                   spend_cap_usd=None, by=lead)
    fresh.refresh_from_db()
    assert fresh.status == Run.Status.FINISHED and fresh.provider_calls == 0
    rubric_renew(rubric=rubric, run=fresh, reason="Recalibrated on the new cases.", by=lead)
    [row] = promotion_rows(rubrics=[rubric])
    assert row.recalibration == []
    assert gate_config(project=store_project())["rubrics"][0]["recalibration_needed"] is False


# ---- the reason's boundaries, on stored checks ------------------------------------------------------------


def check(n: int, upper: float) -> DriftCheck:
    return DriftCheck(new_n=n, new_agreement=upper - 0.1, new_ci95=[upper - 0.2, upper])


@pytest.mark.django_db
def test_it_needs_20_new_cases_and_an_upper_bound_below_the_floor(rubric):
    assert rubric.agreement_floor == 0.80
    assert drift_reason(check=check(20, 0.79), rubric=rubric).startswith("agreement on 20 new cases is 69.0 %")
    assert drift_reason(check=check(19, 0.10), rubric=rubric) is None  # too few new cases to say
    assert drift_reason(check=check(20, 0.80), rubric=rubric) is None  # the floor itself is inside
    assert drift_reason(check=check(200, 0.95), rubric=rubric) is None
    assert drift_reason(check=None, rubric=rubric) is None
    assert drift_reason(check=DriftCheck(new_n=0, new_ci95=None), rubric=rubric) is None


@pytest.mark.django_db
def test_the_overview_lists_rubrics_needing_recalibration_first(rubric, dataset, lead, reviewer):
    from tests.judges.promotion.test_renewal import go_stale
    from tests.judges.promotion_factories import evidence_run

    fine = Rubric.objects.create(project=store_project(), slug="aaa-fine", name="Fine?", criteria="c")
    run = evidence_run(rubric, dataset, lead, reviewer)
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason="Calibrated.", by=lead)
    go_stale(dataset, run)
    assert [row.rubric.slug for row in promotion_overview(project=rubric.project)] == [rubric.slug, fine.slug]


@pytest.mark.django_db
def test_a_lead_starts_the_drift_check_now(client, rubric, dataset, lead, reviewer):
    from tests.judges.promotion_factories import evidence_run

    run = evidence_run(rubric, dataset, lead, reviewer)
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason="Calibrated.", by=lead)
    url = reverse("judges:promotion_drift", args=[TEST_PROJECT, rubric.slug])
    client.force_login(reviewer)
    assert client.post(url).status_code == 403
    assert not DriftCheck.objects.exists()
    client.force_login(lead)
    assert client.get(reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])).status_code == 200
    response = client.post(url)
    assert response.status_code == 302
    [started] = DriftCheck.objects.all()
    assert (started.evidence_run, started.run.parent, started.run.total) == (run, run, run.total)
    client.post(url)  # a second press while it is at work starts nothing more
    assert DriftCheck.objects.count() == 1


def record_checks(rubric, run, lead, figures: list[tuple[int, float, float]]) -> None:
    from django.utils import timezone

    for n, agreement, upper in figures:
        drift = Run.objects.create(config=run.config, dataset=run.dataset, created_by=lead, parent=run,
                                   status=Run.Status.FINISHED)
        DriftCheck.objects.create(rubric=rubric, evidence_run=run, run=drift, checked_at=timezone.now(), new_n=n,
                                  new_agreement=agreement, new_ci95=[agreement - 0.1, upper], all_n=40 + n,
                                  all_agreement=0.9, all_ci95=[0.8, 0.95])


@pytest.mark.django_db
def test_the_promotion_page_draws_agreement_on_new_cases_against_the_floor(client, rubric, dataset, lead, reviewer):
    from tests.judges.promotion_factories import evidence_run

    run = evidence_run(rubric, dataset, lead, reviewer)
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason="Calibrated.", by=lead)
    record_checks(rubric, run, lead, [(5, 0.9, 0.99), (25, 0.5, 0.64)])
    client.force_login(lead)
    page = client.get(reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])).content.decode()
    assert 'data-testid="drift"' in page and page.count('class="chart-point"') == 2
    assert "floor 80.0 %" in page
    assert "agreement on 25 new cases is 50.0 %" in page  # the reason, in the recalibration box


@pytest.mark.parametrize("n", [1, 6])
@pytest.mark.django_db
def test_the_promotion_page_queries_do_not_grow_with_drift_checks(client, rubric, dataset, lead, reviewer, n,
                                                                   django_assert_num_queries):
    from tests.judges.promotion_factories import evidence_run

    run = evidence_run(rubric, dataset, lead, reviewer)
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason="Calibrated.", by=lead)
    record_checks(rubric, run, lead, [(20 + i, 0.5, 0.64) for i in range(n)])
    client.force_login(lead)
    # The rubric page's queries (tests/judges/promotion/test_pages.py names them one by one) for this one promoted
    # run (the release tier's four included) and whether the stand-in served its evidence; the same for 1 and 6
    # drift checks: drift checks add no query.
    with django_assert_num_queries(32):
        assert client.get(reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])).status_code == 200


@pytest.mark.django_db
def test_a_drift_run_is_never_evidence(rubric, dataset, lead, reviewer):
    from judges.promotion.services import PromotionError
    from tests.judges.promotion_factories import evidence_run

    run = evidence_run(rubric, dataset, lead, reviewer)
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason="Calibrated.", by=lead)
    record_checks(rubric, run, lead, [(20, 0.9, 0.95)])
    drift = DriftCheck.objects.get().run
    with pytest.raises(PromotionError, match="is a drift check of run"):
        rubric_renew(rubric=rubric, run=drift, reason="Renewed on the drift run.", by=lead)


def test_a_drift_run_takes_the_cases_its_evidence_did_not_judge_first():
    from judges.drift.services import _unjudged_first

    order = _unjudged_first([3, 11, 1, 10, 2, 12], judged={1, 2, 3})  # 10, 11, 12 are new

    assert order == [11, 10, 12, 3, 1, 2]  # the new ones first, each part in the order given
    assert _unjudged_first([3, 1, 2], judged=set()) == [3, 1, 2]  # nothing judged before: as given
    assert _unjudged_first([3, 1, 2], judged={1, 2, 3}) == [3, 1, 2]  # nothing new: as given




@pytest.mark.django_db
def test_the_periodic_check_covers_every_project_pairing_each_rubric_with_its_own_datasets(
    rubric, dataset, lead, reviewer, other_project, other_lead
):
    from judges.drift.tasks import drift_check
    from judges.models import RubricEvent
    from labeling.models import Dataset
    from tests.conftest import make_user
    from tests.judges.promotion_factories import evidence_run
    from tests.judges.report_factories import make_config, make_run

    rubric_promote(rubric=rubric, to_stage="observe", run=evidence_run(rubric, dataset, lead, reviewer),
                   reason="Calibrated.", by=lead)
    theirs = Rubric.objects.create(project=other_project, slug="return-policy", name="Theirs?", criteria="c")
    their_data = Dataset.objects.create(project=other_project, slug="their-data", name="Theirs")
    their_run = evidence_run(theirs, their_data, other_lead, make_user("theo", project=other_project), prefix="t")
    rubric_promote(rubric=theirs, to_stage="observe", run=their_run, reason="Theirs.", by=other_lead)
    # A rubric of shopnest whose evidence entry names a run over the store's dataset (written directly: promotion
    # refuses it): never re-judged over the store's cases.
    stray = Rubric.objects.create(project=other_project, slug="stray", name="Stray?", criteria="c")
    stray_run = make_run(make_config(stray, other_lead), dataset, other_lead, {dataset.cases.first(): ["pass"]})
    RubricEvent.objects.create(rubric=stray, kind=RubricEvent.Kind.PROMOTE, from_stage="draft", to_stage="observe",
                               run=stray_run, figures={}, reason="stray", by=other_lead)
    Rubric.objects.filter(pk=stray.pk).update(stage=Rubric.Stage.OBSERVE)

    started = drift_check()
    checks = DriftCheck.objects.select_related("rubric", "run__dataset")
    assert sorted(started) == sorted(check.run_id for check in checks)
    assert {check.rubric for check in checks} == {rubric, theirs}
    assert all(check.run.dataset.project_id == check.rubric.project_id for check in checks)
