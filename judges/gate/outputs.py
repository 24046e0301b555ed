"""The outputs file: the agent's new answers, one case per JSONL line (DESIGN's case format)."""

from __future__ import annotations

import json
from typing import Any

from judges.gate.messages import ConfigError

MAX_ERRORS_SHOWN = 20

# What a case of the outputs file may hold (DESIGN's case fields) and the type each must have.
_STRING_FIELDS = ("golden_answer", "expected_behaviour", "category")
_NULLABLE_STRING_FIELDS = ("expected_tool", "expected_source")
_CASE_FIELDS = frozenset(
    {"external_id", "input", "output", "trace", "expected_tool_argument", "metadata",
     *_STRING_FIELDS, *_NULLABLE_STRING_FIELDS}
)


def _case_errors(obj: Any) -> list[str]:
    if not isinstance(obj, dict):
        return ["expected a JSON object (one case per line)"]
    errors = []
    unknown = sorted(set(obj) - _CASE_FIELDS)
    if unknown:
        errors.append(f"unknown field(s) {', '.join(unknown)}")
    external_id = obj.get("external_id")
    if not isinstance(external_id, str) or not external_id.strip():
        errors.append("external_id: expected a non-empty string")
    for name in ("input", "output"):
        if not isinstance(obj.get(name), str):
            errors.append(f"{name}: expected a string")
    for name in _STRING_FIELDS:
        if name in obj and not isinstance(obj[name], str):
            errors.append(f"{name}: expected a string")
    for name in _NULLABLE_STRING_FIELDS:
        if obj.get(name) is not None and not isinstance(obj[name], str):
            errors.append(f"{name}: expected a string or null")
    for name in ("trace", "metadata"):
        if obj.get(name) is not None and not isinstance(obj[name], dict):
            errors.append(f"{name}: expected an object")
    trace = obj.get("trace") or {}
    if isinstance(trace, dict):
        sources = trace.get("retrievedSources")
        if sources is not None and not (isinstance(sources, list) and all(isinstance(s, str) for s in sources)):
            errors.append("trace.retrievedSources: expected a list of strings")
        calls = trace.get("toolCalls")
        if calls is not None and not (
            isinstance(calls, list) and all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in calls)
        ):
            errors.append("trace.toolCalls: expected a list of {name, argument, result}")
        if trace.get("context") is not None and not isinstance(trace["context"], str):
            errors.append("trace.context: expected a string")
    return errors


def read_outputs(path: str) -> list[dict[str, Any]]:
    """The cases of a JSONL file (DESIGN's case format); every bad line is reported with its number."""
    try:
        fh = open(path, encoding="utf-8")  # noqa: SIM115 - closed below, after the line loop
    except OSError as exc:
        raise ConfigError(f"reading the outputs {path}: {exc.strerror or exc}") from None
    cases: list[dict[str, Any]] = []
    errors: list[str] = []
    first_line: dict[str, int] = {}
    with fh:
        try:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except ValueError as exc:
                    errors.append(f"line {number}: not JSON ({exc})")
                    continue
                problems = _case_errors(obj)
                if not problems:
                    external_id = obj["external_id"]
                    if external_id in first_line:
                        problems = [f"external_id {external_id!r} repeats line {first_line[external_id]}"]
                    first_line.setdefault(external_id, number)
                errors.extend(f"line {number}: {p}" for p in problems)
                if not problems:
                    cases.append(obj)
        except UnicodeDecodeError:
            raise ConfigError(f"reading the outputs {path}: not UTF-8 text") from None
    if errors:
        shown = errors[:MAX_ERRORS_SHOWN]
        more = f"\n  … and {len(errors) - len(shown)} more" if len(errors) > len(shown) else ""
        raise ConfigError(f"the outputs file {path} has errors:\n  " + "\n  ".join(shown) + more)
    if not cases:
        raise ConfigError(f"the outputs file {path} has no cases")
    return cases

