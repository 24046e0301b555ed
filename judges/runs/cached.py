"""A run's cached verdicts recorded in bulk (docs/promotion.md, "Drift on new cases": how a drift check stays cheap).

A drift check re-judges a dataset's every current case, and the cache answers all but the new ones: 58,500 of
60,000 judgments for 20,000 cases of which 500 are new. Answered one by one (judges.engine.judge_many), each costs
Python work in the worker: its stored JSON read and checked (Judgment.from_stored), a judgment made of it, a row
built and sent, its case's tally recounted. Here the worker keys a group of cases (their content hashed once,
Engine.cache_keys) and one INSERT … SELECT copies the verdicts their cache entries hold into the run's judgments
inside PostgreSQL: the same row `judgments_record` would write for the same entry (a cache hit: nothing spent, no
latency, no second opinion), the entry checked there field by field as `Judgment.from_stored` checks it in Python
(`_fits`). A pair whose entry is missing, not evaluated or not well formed is left to the batch, which answers it
as always: the rows are the run's own, so every reader (run pages, report, tallies, the drift chart, exports,
pass rate) reads them as any run's.

Only where the cache alone decides a hit: PostgreSQL (SQLite, the embedded default, answers hits in the batch), a
run that is neither fresh (its keys are its own: no entry to find) nor a bias probe (it judges variants), under a
config without a second opinion (a cached verdict may draw one, which may need a call).
"""

import dataclasses
import functools
import types
from typing import Any, Union, get_args, get_origin

from django.db import connection, transaction
from django.db.models import F
from psycopg.types.json import Jsonb

from judges.configs.cases import engine_cases
from judges.engine import Engine
from judges.engine import Judgment as EngineJudgment
from judges.engine.judgment import ADDED_LATER
from judges.models import CachedJudgment, Judgment, Run, RunCaseTally


def cached_in_bulk(*, run: Run, engine: Engine) -> bool:
    """Whether the run's cache hits are recorded here rather than answered one by one in the batch."""
    return (
        connection.vendor == "postgresql" and engine.cache is not None and not run.fresh and not run.probe
        and engine.cfg.second_opinion_judge is None and engine.cfg.adjudicator is None
    )


def cached_judgments_record(
    *, run: Run, engine: Engine, case_ids: list[int], keyed: dict[int, tuple[dict, list[str | None]]] | None = None
) -> tuple[int, set[int]]:
    """Record the run's judgments of these cases that the cache answers, in bulk; returns how many were new, and
    the cases with a repeat it had no entry for (left to the batch to judge).
    `keyed`: {case id: (the case as the engine reads it, its cache keys by repeat)} when the caller read them.

    Counted on the run and in its tallies (judges.runs.tallies) in the same transaction, under the run's row lock, as
    judgments_record does: a (case, repeat) judged already is skipped, so two workers holding the same chunk
    never count it twice."""
    repeats = range(1, run.repeats + 1)
    if keyed is None:
        keyed = {case_id: (case, engine.cache_keys(case, repeats)) for case_id, case in engine_cases(case_ids).items()}
    pairs = [(case_id, repeat, key) for case_id in case_ids if case_id in keyed
             for repeat, key in zip(repeats, keyed[case_id][1], strict=True)]
    keys = [key for _, _, key in pairs if key is not None]
    # The run's project's entries only (docs/projects.md): the INSERT below joins on the same (project, key).
    project_id = run.dataset.project_id
    entries = CachedJudgment.objects.filter(project_id=project_id, key__among=keys)
    found = set(entries.values_list("key", flat=True)) if keys else set()
    unanswered = {case_id for case_id, _, key in pairs if key not in found}
    # Only the pairs with an entry take the run's lock (a run of new work has none to wait for it).
    pairs = [pair for pair in pairs if pair[2] in found]
    if not pairs:
        return 0, unanswered
    with transaction.atomic(), connection.cursor() as cursor:
        Run.objects.select_for_update().filter(pk=run.pk).first()
        cases, numbers, keys = zip(*pairs, strict=True)
        cursor.execute(_insert(), {"run": run.pk, "project": project_id, "cases": list(cases),
                                   "repeats": list(numbers), "keys": list(keys), "defaults": Jsonb(ADDED_LATER)})
        [(recorded,)] = cursor.fetchall()
        if recorded:
            Run.objects.filter(pk=run.pk).update(done=F("done") + recorded, cache_hits=F("cache_hits") + recorded)
    return recorded, unanswered


def _fits(value: str, kind: Any, depth: int = 0) -> str:
    """SQL that is true when the jsonb `value` fits the annotation `kind` as Judgment.from_stored checks a value
    decoded from JSON (judgment._fits_check, kind by kind): an entry the SQL takes, Python would take too."""
    origin, args = get_origin(kind), get_args(kind)
    of_type = f"jsonb_typeof({value})"
    if origin in (Union, types.UnionType):
        return "(" + " OR ".join(_fits(value, a, depth) for a in args) + ")"
    if kind is Any:
        return "TRUE"
    if kind is type(None):
        return f"{of_type} = 'null'"
    if kind is bool:
        return f"{of_type} = 'boolean'"
    if kind is float:
        return f"{of_type} = 'number'"
    if kind is int:  # JSON's 1.0 is a float in Python: only digits make an int (a jsonb number shows its scale)
        return f"(CASE WHEN {of_type} = 'number' THEN scale(({value})::numeric) = 0 ELSE FALSE END)"
    if kind is str:
        return f"{of_type} = 'string'"
    item = f"item{depth}"
    # An empty container (the usual checks, calls and costs of a cached verdict) fits without a set-returning scan.
    if origin is list:
        return (f"(({value}) = '[]'::jsonb OR CASE WHEN {of_type} = 'array' THEN NOT EXISTS "
                f"(SELECT 1 FROM jsonb_array_elements({value}) AS {item}(value) "
                f"WHERE NOT {_fits(f'{item}.value', args[0], depth + 1)}) ELSE FALSE END)")
    if origin is dict and args[0] in (str, Any):  # a JSON object's keys are strings
        return (f"(({value}) = '{{}}'::jsonb OR CASE WHEN {of_type} = 'object' THEN NOT EXISTS "
                f"(SELECT 1 FROM jsonb_each({value}) AS {item}(key, value) "
                f"WHERE NOT {_fits(f'{item}.value', args[1], depth + 1)}) ELSE FALSE END)")
    return "FALSE"


@functools.cache
def _insert() -> str:
    """The INSERT … SELECT: judgments_record's row for each pair whose entry is an evaluated judgment with every
    field of its type (an entry from before `ADDED_LATER`'s fields had them at their default), as Engine.lookup
    answers it: the entry's verdict, nothing spent, no latency, no second opinion."""
    fields = dataclasses.fields(EngineJudgment)
    well_formed = (f"entry.j ?& ARRAY[{', '.join(f"'{f.name}'" for f in fields)}] AND "
                   + " AND ".join(_fits(f"entry.j -> '{f.name}'", f.type) for f in fields))
    quote = connection.ops.quote_name
    row = {
        "run_id": "%(run)s", "case_id": "entry.case_id", "repeat": "entry.repeat", "outcome": "entry.j ->> 'outcome'",
        "scores": "NULLIF(entry.j -> 'scores', 'null')", "reason": "entry.j ->> 'reason'",
        "raw_output": "entry.j ->> 'raw_output'", "error": "entry.j ->> 'error'", "layer": "entry.j ->> 'layer'",
        "judge": "entry.j ->> 'judge'", "checks": "entry.j -> 'checks'", "input_tokens": "0", "output_tokens": "0",
        "cost_usd": "0", "latency_ms": "0", "cached": "TRUE", "contested": "FALSE", "secondary_outcome": "''",
        "variant": "NULL", "similarity": "(entry.j ->> 'similarity')::double precision", "opinions": "NULL",
        "calls_by_judge": "'{}'", "cost_by_judge": "'{}'", "created_at": "now()",
        # The stand-in's verdict stays the stand-in's when the cache answers it (judges.engine Judgment.stand_in).
        "stand_in": "(entry.j -> 'stand_in') = 'true'::jsonb",
    }
    column = {f.attname: f.column for f in Judgment._meta.concrete_fields if not f.primary_key}
    assert set(row) == set(column), "a Judgment column has no value here"
    columns = ", ".join(quote(column[name]) for name in row)
    tally = {f.attname: f.column for f in RunCaseTally._meta.concrete_fields if not f.primary_key}
    counts = [name for name in tally if name not in ("run_id", "case_id")]
    added = {"judged": "tally.{0} + excluded.{0}", "passes": "tally.{0} + excluded.{0}",
             "fails": "tally.{0} + excluded.{0}", "not_evaluated": "tally.{0} + excluded.{0}",
             "lowest_similarity": "LEAST(tally.{0}, excluded.{0})", "slowest_ms": "GREATEST(tally.{0}, excluded.{0})"}
    assert set(added) == set(counts), "a RunCaseTally count is not kept here"
    return (
        # Each entry with the defaults merged once (MATERIALIZED: not once for every field read below, nor an entry
        # stored compressed or out of line read anew each time); one that is not an object has no fields (and `||`
        # would make an array of it).
        "WITH entry AS MATERIALIZED ("
        "SELECT pair.case_id, pair.repeat, "
        "CASE WHEN jsonb_typeof(cached.judgment) = 'object' THEN %(defaults)s || cached.judgment END AS j "
        "FROM unnest(%(cases)s::bigint[], %(repeats)s::integer[], %(keys)s::text[]) AS pair(case_id, repeat, key) "
        # The run's project's entry: (project, key) is the cache's unique index, which finds it.
        f"JOIN {quote(CachedJudgment._meta.db_table)} AS cached "
        f"ON cached.{quote(CachedJudgment._meta.get_field('project').column)} = %(project)s "
        "AND cached.key = pair.key), "
        f"inserted AS (INSERT INTO {quote(Judgment._meta.db_table)} ({columns}) "
        f"SELECT {', '.join(row.values())} FROM entry "
        f"WHERE entry.j ->> 'outcome' IN ('pass', 'fail') AND {well_formed} "
        "ORDER BY entry.case_id, entry.repeat "
        "ON CONFLICT (run_id, case_id, repeat) DO NOTHING "
        "RETURNING case_id, outcome, similarity, latency_ms), "
        # The tallies (judges.runs.tallies) of the cases: each held its judgments' counts before, under the run's
        # lock, so adding exactly the rows inserted keeps it so, with no read of the run's other judgments.
        "counted AS (SELECT case_id, count(*) AS judged, count(*) FILTER (WHERE outcome = 'pass') AS passes, "
        "count(*) FILTER (WHERE outcome = 'fail') AS fails, "
        "count(*) FILTER (WHERE outcome = 'not_evaluated') AS not_evaluated, "
        "min(similarity) AS lowest_similarity, max(latency_ms) AS slowest_ms FROM inserted GROUP BY case_id), "
        f"tallied AS (INSERT INTO {quote(RunCaseTally._meta.db_table)} AS tally "
        f"({', '.join(quote(tally[name]) for name in ('run_id', 'case_id', *counts))}) "
        f"SELECT %(run)s, case_id, {', '.join(counts)} FROM counted "
        f"ON CONFLICT ({quote(tally['run_id'])}, {quote(tally['case_id'])}) DO UPDATE SET "
        + ", ".join(f"{quote(tally[name])} = {added[name].format(quote(tally[name]))}" for name in counts)
        + ") SELECT COALESCE(sum(judged), 0) FROM counted"
    )
