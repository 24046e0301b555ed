"""A run's judgments counted per case (RunCaseTally), kept beside them.

Every write that adds or removes a run's judgments calls `case_tallies_refresh` for the cases it touched,
in the same transaction: the counts are recomputed from those cases' judgments (not incremented), so a
redelivered chunk, a re-judged case or a worker killed before its transaction committed leaves them equal
to the judgments. Pages and the agent's pass rate then read one row a case, not every judgment.
"""

from collections.abc import Iterable

from django.db import connection
from django.db.models import Count, Max, Min, Q, QuerySet

from judges.models import Judgment, Outcome, RunCaseTally

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
        gone = set(batch) - _upsert(run_id, counted)
        if gone:
            RunCaseTally.objects.filter(run_id=run_id, case_id__in=gone).delete()


def _upsert(run_id: int, counted: QuerySet) -> set[int]:
    """Write the counted rows (case_id and COUNTED) as the run's tallies in one INSERT … SELECT … ON CONFLICT
    inside the database (PostgreSQL and SQLite alike): a thousand cases' counts never pass through Python.
    Returns the cases written."""
    quote = connection.ops.quote_name
    select, params = counted.query.sql_with_params()
    columns = ["case_id", *COUNTED]
    names = ", ".join(quote(RunCaseTally._meta.get_field(name).column) for name in ["run", *columns])
    updates = ", ".join(f"{quote(name)} = excluded.{quote(name)}" for name in COUNTED)
    run_column, case_column = (quote(RunCaseTally._meta.get_field(name).column) for name in ("run", "case"))
    with connection.cursor() as cursor:
        cursor.execute(
            # WHERE TRUE: SQLite reads an ON CONFLICT after a bare SELECT's FROM as a join's ON.
            f"INSERT INTO {quote(RunCaseTally._meta.db_table)} ({names}) "
            f"SELECT %s, {', '.join(f'counted.{quote(c)}' for c in columns)} FROM ({select}) AS counted WHERE TRUE "
            f"ON CONFLICT ({run_column}, {case_column}) DO UPDATE SET {updates} RETURNING {case_column}",
            (run_id, *params),
        )
        return {case_id for (case_id,) in cursor.fetchall()}


# A tally's counts, as RunCaseTally's columns and the counting query's names.
COUNTED = ("judged", "passes", "fails", "not_evaluated", "lowest_similarity", "slowest_ms")
