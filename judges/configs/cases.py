"""A case as the engine reads it: the one adapter from a labeling case to the engine's case dict.

It sits at the configs level, low in the stack, because the prompt preview (configs), the runs' worker and
estimates, and the demo all read cases through it.
"""

from labeling.models import Case

# The case fields of docs/cases.md the engine reads, as Case's attributes and its columns.
ENGINE_CASE_FIELDS = (
    "external_id", "input", "output", "trace", "golden_answer", "expected_behaviour", "expected_tool",
    "expected_tool_argument", "expected_source", "category", "metadata",
)


def engine_case(case: Case) -> dict:
    """A case as the engine reads it (the case fields of docs/cases.md)."""
    return {name: getattr(case, name) for name in ENGINE_CASE_FIELDS}


def engine_cases(case_ids: list[int]) -> dict[int, dict]:
    """{case id: the case as the engine reads it} for these cases (those that exist), read as plain values: no
    model instance a case, for a worker reading thousands only to key their cached verdicts. One query."""
    rows = Case.objects.filter(pk__among=case_ids).order_by().values_list("pk", *ENGINE_CASE_FIELDS)
    return {pk: dict(zip(ENGINE_CASE_FIELDS, values, strict=True)) for pk, *values in rows}
