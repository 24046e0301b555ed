"""A case as the engine reads it: the one adapter from a labeling case to the engine's case dict.

It sits at the configs level, low in the stack, because the prompt preview (configs), the runs' worker and
estimates, and the demo all read cases through it.
"""

from labeling.models import Case


def engine_case(case: Case) -> dict:
    """A case as the engine reads it (the case fields of docs/cases.md)."""
    return {
        "external_id": case.external_id,
        "input": case.input,
        "output": case.output,
        "trace": case.trace,
        "golden_answer": case.golden_answer,
        "expected_behaviour": case.expected_behaviour,
        "expected_tool": case.expected_tool,
        "expected_tool_argument": case.expected_tool_argument,
        "expected_source": case.expected_source,
        "category": case.category,
        "metadata": case.metadata,
    }
