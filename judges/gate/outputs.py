"""The files CI judges: the agent's outputs, and with `--cases` the cases they answer (docs/gate.md).

Without `--cases`, each outputs line is a whole case (the case format of docs/cases.md, output included). With it,
the expectations come from the cases file (every case field but `output`, as `evalhub-gate cases`
writes it) and an outputs line carries only what the agent produced: `external_id`, `output`, `trace`
and optionally `metadata` (never an expectation, so not `metadata.references`). Lines are read and
checked by labeling's Django-free case reader, the one the imports use: strict JSON, the camelCase
golden-dataset names, the agent's reply carried flat (answer, retrievedSources, toolCalls, context), the
case's fields and their types. A judged line needs its answer, and a `humanVerdict` is refused: a pipeline
never writes the verdicts calibration is measured against.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from judges.engine.prompt import AGENT_CONTEXT
from judges.gate.messages import ConfigError, one_line
from labeling.importing.reading import (
    HUMAN_VERDICT,
    HUMAN_VERDICT_REFUSED,
    Format,
    RowError,
    normalize_case_fields,
    read_records,
    validate_case,
)

MAX_ERRORS_SHOWN = 20
# The CI command reads whatever the pipeline hands it; the imports' size limit is the server's.
MAX_FILE_BYTES = 1 << 40
OUTPUT_FIELDS = ("external_id", "output", "trace", "metadata")
# The metadata keys the engine judges as expectations (semantic.references, cache.case_content): the
# case's more acceptable answers. An outputs line that carried them could pass its own answer.
JUDGED_METADATA = ("references",)


def _records(path: str, what: str, errors: list[str]) -> list[tuple[int, Any]]:
    """(line, JSON value) of each non-blank line; a bad line (encoding, JSON) goes to `errors`."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise ConfigError(f"reading the {what} {path}: {exc.strerror or exc}") from None
    problems: list[RowError] = []
    with fh:
        records = list(read_records(fh, Format.JSONL, problems, known=(), required=(), max_bytes=MAX_FILE_BYTES,
                                    aliases={}))
    errors.extend(str(p) for p in problems)
    return records


def _judged_problems(obj: dict, *, with_output: bool) -> list[str]:
    """What a line the check judges may not be: without the answer to judge, or carrying a human verdict."""
    problems = []
    if with_output and obj.get("output") is None:
        problems.append("output: is required: the agent's answer to judge (null means no answer yet)")
    if HUMAN_VERDICT in obj:
        problems.append(f"humanVerdict: refused: {HUMAN_VERDICT_REFUSED}")
    return problems


def _case_problems(obj: Any, *, with_output: bool) -> list[str]:
    """What is wrong with one case line, as "field: message" strings (labeling's checks)."""
    if not isinstance(obj, dict):
        return ["expected a JSON object (one case per line)"]
    obj = dict(obj)
    problems = _judged_problems(obj, with_output=with_output)
    obj.pop(HUMAN_VERDICT, None)
    if not with_output:
        # A cases line carries no answer; "output": null (no answer yet, as an export writes it) says the same.
        if obj.get("output") is not None:
            problems.append("output: a cases line carries no output (the agent's answer is in the outputs file)")
        obj["output"] = ""
    _, found = validate_case(obj)
    problems.extend(f"{name}: {message}" if name else message for name, message in found)
    return problems


def _checked(
    records: list[tuple[int, Any]], errors: list[str], problems_of: Callable[[Any], list[str]]
) -> dict[str, tuple[int, dict[str, Any]]]:
    """{external_id: (line, object)} of the lines that check out; every problem goes to `errors` by line."""
    found: dict[str, tuple[int, dict[str, Any]]] = {}
    for number, obj in records:
        try:
            obj = normalize_case_fields(obj) if isinstance(obj, dict) else obj
        except ValueError as exc:  # a field named both ways
            errors.append(f"line {number}: {exc}")
            continue
        problems = problems_of(obj)
        if not problems:
            external_id = obj["external_id"]
            if external_id in found:
                problems = [f"external_id {one_line(repr(external_id), 120)} repeats line {found[external_id][0]}"]
            else:
                found[external_id] = (number, obj)
        errors.extend(f"line {number}: {p}" for p in problems)
    return found


def _raise_errors(errors: list[str], headline: str) -> None:
    """One config error listing the first of `errors` below `headline` ("the outputs file … has errors:")."""
    if errors:
        shown = errors[:MAX_ERRORS_SHOWN]
        more = [f"… and {len(errors) - len(shown)} more"] if len(errors) > len(shown) else []
        raise ConfigError(headline, shown + more)


def _read_cases(path: str, shown_as: str) -> dict[str, tuple[int, dict[str, Any]]]:
    errors: list[str] = []
    cases = _checked(_records(path, "cases", errors), errors, lambda obj: _case_problems(obj, with_output=False))
    _raise_errors(errors, f"{shown_as} has errors:")
    if not cases:
        raise ConfigError(f"{shown_as} has no cases")
    return cases


def read_cases(path: str, *, shown_as: str) -> list[dict[str, Any]]:
    """The cases of a cases file (every case field but `output`); `shown_as` names it in errors."""
    return [case for _, case in _read_cases(path, shown_as).values()]


def read_outputs(path: str) -> list[dict[str, Any]]:
    """The cases of an outputs file in which every line is a whole case (no `--cases`)."""
    errors: list[str] = []
    records = _records(path, "outputs", errors)
    found = _checked(records, errors, lambda obj: _case_problems(obj, with_output=True))
    _raise_errors(errors, f"the outputs file {path} has errors:")
    if not found:
        raise ConfigError(f"the outputs file {path} has no cases")
    return [obj for _, obj in found.values()]


def check_case(obj: Any, *, shown_as: str) -> dict[str, Any]:
    """One whole case given in code (the pytest plugin's), checked as an outputs line is."""
    errors: list[str] = []
    found = _checked([(1, obj)], errors, lambda o: _case_problems(o, with_output=True))
    _raise_errors([error.removeprefix("line 1: ") for error in errors], f"{shown_as} has errors:")
    [(_, case)] = found.values()
    return case


def _output_problems(obj: Any) -> list[str]:
    if not isinstance(obj, dict):
        return ["expected a JSON object (one output per line)"]
    problems = _judged_problems(obj, with_output=True)
    extra = [name for name in obj if name not in (*OUTPUT_FIELDS, HUMAN_VERDICT)]
    if extra:
        problems.append(
            f"{', '.join(one_line(name, 60) for name in extra)}: not allowed in an outputs line with --cases "
            f"(allowed: {', '.join(OUTPUT_FIELDS)}; the expectations come from the cases file)"
        )
    metadata = obj.get("metadata")
    judged = [key for key in JUDGED_METADATA if isinstance(metadata, dict) and key in metadata]
    if judged:
        problems.append(
            f"{', '.join(f'metadata.{key}' for key in judged)}: not allowed in an outputs line with --cases "
            f"(judged as an expectation: it comes from the cases file)"
        )
    # The case reader checks the fields an outputs line shares with a case.
    shared = {name: obj[name] for name in OUTPUT_FIELDS if name in obj}
    _, found = validate_case({"input": "", **shared})
    problems.extend(f"{name}: {message}" if name else message for name, message in found)
    return problems


def merged_trace(case_trace: dict[str, Any], agent_trace: dict[str, Any]) -> dict[str, Any]:
    """The trace judged with --cases: what the agent did this time (its own tool calls and sources, never the
    recorded ones), but the case's context, which the case fixes (the policy text the judge reads). A context
    the agent's trace carries is kept apart, as `agentContext`, which the judge's prompt shows as the agent's
    addition (judges.engine.prompt): the agent under test may add to what the judge is told, never replace it."""
    trace = {key: value for key, value in agent_trace.items() if key not in ("context", AGENT_CONTEXT)}
    if case_trace.get("context") is not None:
        trace["context"] = case_trace["context"]
    added = agent_trace.get("context")
    if added is not None and added != case_trace.get("context"):
        trace[AGENT_CONTEXT] = added
    return trace


def read_cases_and_outputs(cases_path: str, outputs_path: str) -> list[dict[str, Any]]:
    """The cases of the cases file, each with the agent's output, trace and metadata from the outputs file.

    Every output must answer a case and every case must have its output; either file being empty is
    an error too: a check that judged nothing must not pass.
    """
    cases = _read_cases(cases_path, f"the cases file {cases_path}")
    errors: list[str] = []
    outputs = _checked(_records(outputs_path, "outputs", errors), errors, _output_problems)
    for external_id, (number, _) in outputs.items():
        if external_id not in cases:
            errors.append(f"line {number}: external_id {one_line(repr(external_id), 120)} is not among the cases "
                          f"of {cases_path}")
    _raise_errors(errors, f"the outputs file {outputs_path} has errors:")
    if not outputs:
        raise ConfigError(f"the outputs file {outputs_path} has no outputs")
    missing = [f"{one_line(repr(external_id), 120)} (cases line {number})"
               for external_id, (number, _) in cases.items() if external_id not in outputs]
    _raise_errors(missing, f"the outputs file {outputs_path} has no output for {len(missing)} case(s):")
    merged = []
    for external_id, (_, case) in cases.items():
        output = outputs[external_id][1]
        merged.append({
            **case,
            "output": output["output"],
            "trace": merged_trace(case.get("trace") or {}, output.get("trace") or {}),
            # The agent's metadata adds to the case's, and wins a key both have: it describes this answer
            # (agent_model, latency), the case's describes the recorded one. No such key is judged:
            # the judged ones are refused above, so the case's expectations always stand.
            "metadata": {**(case.get("metadata") or {}), **(output.get("metadata") or {})},
        })
    return merged
