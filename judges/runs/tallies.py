"""A run's judgments counted per case (RunCaseTally), kept beside them.

Every write that adds or removes a run's judgments calls `case_tallies_refresh` for the cases it touched,
in the same transaction: the counts are recomputed from those cases' judgments (not incremented), so a
redelivered chunk, a re-judged case or a worker killed before its transaction committed leaves them equal
to the judgments. Pages and the agent's pass rate then read one row a case, not every judgment.
The worker's cases judged for the first time in the run are counted from the judgments it is writing
(`case_tallies_add`): all their judgments are in hand, so the same figures with no query to recount them.
The bulk record of cached judgments (judges.runs.cached) adds to them in its own statement: docs/estimates.md.
"""

from collections.abc import Iterable

from django.db.models import Count, Max, Min, Q

from judges.models import Judgment, Outcome, RunCaseTally
from judges.runs.bulk import copy_rows

REFRESH_BATCH = 2000  # cases a grouped query recounts at once


def case_tallies_refresh(*, run_id: int, case_ids: Iterable[int] | None = None) -> None:
    """Recount the judgments of these cases of the run (every case when None) into their tallies; a case
    left with no judgment loses its tally."""
    if case_ids is None:
        ids = sorted(set(Judgment.objects.filter(run_id=run_id).values_list("case_id", flat=True))
                     | set(RunCaseTally.objects.filter(run_id=run_id).values_list("case_id", flat=True)))
    else:
        ids = sorted(set(case_ids))
    for start in range(0, len(ids), REFRESH_BATCH):
        batch = ids[start:start + REFRESH_BATCH]
        counted = (
            Judgment.objects.filter(run_id=run_id, case_id__in=batch).values("case_id")
            .annotate(judged=Count("id"), passes=Count("id", filter=Q(outcome=Outcome.PASS)),
                      fails=Count("id", filter=Q(outcome=Outcome.FAIL)),
                      not_evaluated=Count("id", filter=Q(outcome=Outcome.NOT_EVALUATED)),
                      lowest_similarity=Min("similarity"), slowest_ms=Max("latency_ms"))
            .order_by()
        )
        tallies = [RunCaseTally(run_id=run_id, **row) for row in counted]
        RunCaseTally.objects.bulk_create(
            tallies, update_conflicts=True, unique_fields=["run", "case"],
            update_fields=["judged", "passes", "fails", "not_evaluated", "lowest_similarity", "slowest_ms"],
        )
        gone = set(batch) - {tally.case_id for tally in tallies}
        if gone:
            RunCaseTally.objects.filter(run_id=run_id, case_id__in=gone).delete()


TALLY_FIELDS = ("run_id", "case_id", "judged", "passes", "fails", "not_evaluated", "lowest_similarity", "slowest_ms")


def case_tallies_add(*, run_id: int, judgments: Iterable[tuple[int, str, float | None, int]]) -> None:
    """The tallies of cases with no judgment in the run until these, from these judgments' (case_id,
    outcome, similarity, latency_ms): what case_tallies_refresh would count once they are written."""
    counts: dict[int, list] = {}
    for case_id, outcome, similarity, latency_ms in judgments:
        tally = counts.get(case_id)
        if tally is None:
            tally = counts[case_id] = [run_id, case_id, 0, 0, 0, 0, None, 0]
        tally[2] += 1
        tally[3] += outcome == Outcome.PASS
        tally[4] += outcome == Outcome.FAIL
        tally[5] += outcome == Outcome.NOT_EVALUATED
        if similarity is not None and (tally[6] is None or similarity < tally[6]):
            tally[6] = similarity
        tally[7] = max(tally[7], latency_ms)
    copy_rows(RunCaseTally, TALLY_FIELDS, counts.values())
