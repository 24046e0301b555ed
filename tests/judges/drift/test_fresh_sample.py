"""The drift check's fresh sample (docs/promotion.md, "Fresh drift sample"): the cache replays an unchanged case's
verdicts forever, so each drift check also re-judges a rotating sample of unchanged cases fresh (at least 20) and
compares each case's fresh majority with its cached one; changed verdicts are a drift reason only when the Wilson
lower bound of their share is above the rubric's flip limit.

Judged through the real SDK over HTTP against the stand-in; the runs are worked in this process
(judges.runs.worker.run_work_here), as a worker would work them.
"""

import pytest
from django.urls import reverse
from django.utils import timezone

from judges.calibration.metrics import wilson_interval
from judges.configs import services as config_services
from judges.drift.selectors import DRIFT_FRESH_MIN_CASES, drift_reason, fresh_drift_reason, fresh_sample_ids
from judges.drift.services import drift_check_record, drift_start
from judges.models import DriftCheck, Run
from judges.promotion.selectors import promotion_rows
from judges.promotion.services import rubric_promote
from judges.runs import services as run_services
from judges.runs.worker import run_work_here
from labeling.models import Case
from tests.conftest import TEST_PROJECT
from tests.judges.drift.test_drift import add_cases
from tests.judges.helpers import behavioral_spec

CASES, REPEATS = 30, 2
SHIPS = {"kind": "answer_contains", "text": "ships"}
FRESH_REASON = "got another verdict than the cached one"


def promoted_evidence(dataset, rubric, lead, reviewer, fake_provider, rule=SHIPS):
    """30 labeled cases, the judge right on 28 (the stand-in, by `rule`, passes answers containing "ships"), judged
    K=2 and promoted to observe on that evidence. Returns the evidence run."""
    fake_provider.control(rule=rule)
    add_cases(dataset, rubric, reviewer, [
        (f"c{i:02}", "Your order ships today." if i % 2 == 0 else "It is lost.",
         ("pass" if i % 2 == 0 else "fail") if i > 1 else ("fail" if i == 0 else "pass"))
        for i in range(CASES)
    ])
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    evidence = run_services.run_start(config=config, dataset=dataset, repeats=REPEATS, concurrency=4,
                                      spend_cap_usd=None, by=lead)
    run_work_here(run_id=evidence.pk)
    evidence.refresh_from_db()
    assert evidence.status == Run.Status.FINISHED and evidence.provider_calls == CASES * REPEATS
    rubric_promote(rubric=rubric, to_stage="observe", run=evidence, reason="Calibrated.", by=lead)
    return evidence


def checked(rubric) -> DriftCheck:
    """Start a drift check of the rubric, work its runs here and record it."""
    [check] = drift_start(rubric_ids=[rubric.pk])
    for run_id in (check.run_id, check.fresh_run_id):
        if run_id is not None:
            run_work_here(run_id=run_id)
            drift_check_record(run_id=run_id)
    check.refresh_from_db()
    assert check.checked_at is not None
    return check


@pytest.mark.django_db
def test_a_model_changed_behind_its_pinned_name_is_caught_by_the_fresh_sample_not_by_the_cache(
    client, dataset, rubric, lead, reviewer, fake_provider, settings
):
    # The stand-in's verdicts turn over after the evidence's 60 calls: a model changed behind its pinned name.
    changing = {"kind": "after_calls", "calls": CASES * REPEATS, "rule": SHIPS, "then": {"kind": "not", "rule": SHIPS}}
    evidence = promoted_evidence(dataset, rubric, lead, reviewer, fake_provider, changing)

    # The cached check alone: every verdict comes from the cache, nothing looks changed.
    settings.EVALHUB_DRIFT_FRESH_SHARE = 0
    cached = checked(rubric)
    assert cached.fresh_run is None and cached.run.provider_calls == 0
    assert cached.all_agreement == pytest.approx(28 / 30) and drift_reason(check=cached, rubric=rubric) is None
    [row] = promotion_rows(rubrics=[rubric])
    assert row.recalibration == []

    # With the fresh sample: 20 unchanged cases (5 % of 30 is 2, the minimum is 20) judged anew, every one flipped.
    settings.EVALHUB_DRIFT_FRESH_SHARE = 0.05
    calls_before = fake_provider.stats()["total"]
    check = checked(rubric)
    fresh = check.fresh_run
    assert (fresh.fresh, fresh.parent_id, fresh.config_id, fresh.repeats) == (True, evidence.pk, evidence.config_id,
                                                                            REPEATS)
    assert check.run.provider_calls == 0  # the check's own run still replays the cache
    assert fresh.provider_calls == DRIFT_FRESH_MIN_CASES * REPEATS and fresh.cache_hits == 0
    assert fake_provider.stats()["total"] - calls_before == DRIFT_FRESH_MIN_CASES * REPEATS
    assert (check.fresh_n, check.fresh_changed) == (DRIFT_FRESH_MIN_CASES, DRIFT_FRESH_MIN_CASES)
    [row] = promotion_rows(rubrics=[rubric])
    assert len(row.recalibration) == 1 and FRESH_REASON in row.recalibration[0]
    assert "20 of 20 unchanged cases" in row.recalibration[0]
    client.force_login(lead)
    page = client.get(reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])).content.decode()
    assert 'data-testid="drift-fresh">20 of 20' in page and "judged fresh, 20 of 20" in page


@pytest.mark.django_db
def test_a_judge_at_its_usual_noise_is_not_flagged_on_the_20_case_minimum(
    dataset, rubric, lead, reviewer, fake_provider, settings
):
    promoted_evidence(dataset, rubric, lead, reviewer, fake_provider)
    # Now the stand-in flips 5 % of its calls at random (seeded by each prompt and its call number).
    fake_provider.control(rule={"kind": "flaky", "share": 0.05, "rule": SHIPS})
    settings.EVALHUB_DRIFT_FRESH_SHARE = 0.05
    check = checked(rubric)
    assert check.fresh_run.total == DRIFT_FRESH_MIN_CASES * REPEATS
    # A case whose repeats split has no fresh majority and is not compared.
    assert DRIFT_FRESH_MIN_CASES - 4 <= check.fresh_n <= DRIFT_FRESH_MIN_CASES
    assert check.fresh_changed <= 2
    assert fresh_drift_reason(check=check, rubric=rubric) is None
    [row] = promotion_rows(rubrics=[rubric])
    assert row.recalibration == []


@pytest.mark.django_db
def test_the_reason_needs_the_wilson_lower_bound_above_the_flip_limit(rubric):
    assert rubric.max_flip_rate == 0.05

    def check(n: int, changed: int) -> DriftCheck:
        return DriftCheck(fresh_n=n, fresh_changed=changed, fresh_ci95=wilson_interval(changed / n, n))

    # On 20 cases, 1 or 2 changed verdicts are a 5 % judge's noise (lower bounds 0.9 % and 2.8 %); 3 are not (5.2 %).
    assert fresh_drift_reason(check=check(20, 1), rubric=rubric) is None
    assert fresh_drift_reason(check=check(20, 2), rubric=rubric) is None
    assert fresh_drift_reason(check=check(20, 3), rubric=rubric).startswith("judged fresh, 3 of 20 unchanged cases")
    assert fresh_drift_reason(check=DriftCheck(), rubric=rubric) is None  # no fresh sample
    assert fresh_drift_reason(check=None, rubric=rubric) is None


@pytest.mark.django_db
def test_the_sample_rotates_over_the_unchanged_cases(dataset, rubric, lead, reviewer, fake_provider, settings):
    evidence = promoted_evidence(dataset, rubric, lead, reviewer, fake_provider)
    settings.EVALHUB_DRIFT_FRESH_SHARE = 0.05
    seen: set[int] = set()
    for _ in range(2):  # ⌈30 / 20⌉ checks see every case
        [check] = drift_start(rubric_ids=[rubric.pk])
        sampled = {pk for ids in check.fresh_run.chunks.values_list("case_ids", flat=True) for pk in ids}
        assert len(sampled) == DRIFT_FRESH_MIN_CASES
        seen |= sampled
        Run.objects.filter(pk__in=[check.run_id, check.fresh_run_id]).update(status=Run.Status.CANCELLED)
    judged = set(evidence.judgments.values_list("case_id", flat=True))
    assert seen == judged
    # A case changed since the evidence is no longer unchanged: the cache holds nothing of it to check.
    changed = min(judged)
    Case.objects.filter(pk=changed).update(content_changed_at=timezone.now())
    assert set(fresh_sample_ids(evidence=evidence, share=1.0)) == judged - {changed}
    assert fresh_sample_ids(evidence=evidence, share=0) == []  # EVALHUB_DRIFT_FRESH_SHARE=0 turns it off
