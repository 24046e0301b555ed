"""A drift check whose cached judgments are recorded in bulk (judges.runs.cached) stores the figures, and draws the
chart, of the same check answered from the cache one judgment at a time, as before.

The runs are worked in this process (judges.runs.worker.run_work_here) against the stand-in, from the same cache.
"""

import pytest

from judges.drift.charts import drift_chart
from judges.models import CachedJudgment
from judges.runs import worker
from tests.judges.drift.test_drift import add_cases
from tests.judges.drift.test_fresh_sample import CASES, REPEATS, checked, promoted_evidence

NEW = 24


@pytest.mark.django_db
def test_its_figures_and_chart_are_those_of_the_check_answered_one_by_one(
    dataset, rubric, lead, reviewer, fake_provider, settings, monkeypatch
):
    promoted_evidence(dataset, rubric, lead, reviewer, fake_provider)
    # New cases, labelled after the evidence: the stand-in right on half of them.
    add_cases(dataset, rubric, reviewer, [
        (f"n{i:02}", "Your order ships today." if i % 4 in (0, 1) else "It is lost.", "pass" if i % 2 == 0 else "fail")
        for i in range(NEW)
    ])
    settings.EVALHUB_DRIFT_FRESH_SHARE = 0
    cache = list(CachedJudgment.objects.values_list("project_id", "key", "judgment"))

    def check(*, in_bulk: bool):
        CachedJudgment.objects.all().delete()  # the cache as it was: the other check's calls added the new cases'
        CachedJudgment.objects.bulk_create(CachedJudgment(project_id=project_id, key=key, judgment=value)
                                           for project_id, key, value in cache)
        monkeypatch.setattr(worker, "cached_in_bulk", lambda **kw: in_bulk)
        return checked(rubric)

    before, bulk = check(in_bulk=False), check(in_bulk=True)

    assert (bulk.run.cache_hits, bulk.run.provider_calls) == (before.run.cache_hits, before.run.provider_calls) == (
        CASES * REPEATS, NEW * REPEATS)
    assert bulk.figures == before.figures
    assert bulk.new_n == NEW and 0.4 < bulk.new_agreement < 0.6
    figures = ("new_n", "new_agreement", "new_ci95", "all_n", "all_agreement", "all_ci95")
    assert [getattr(bulk, name) for name in figures] == [getattr(before, name) for name in figures]
    # The chart of each check alone (its point, whisker and floor), the check's own time aside.
    bulk.checked_at = before.checked_at
    drawn = [{k: v for k, v in drift_chart([c], floor=rubric.agreement_floor).items() if k not in ("first", "last")}
             for c in (bulk, before)]
    assert drawn[0] == drawn[1] and drawn[0]["points"]
