"""Other tools' results read as verdicts on evalhub's cases: a promptfoo results file and a DeepEval test run.

    promptfoo eval -o results.json            each result: its test's vars, the assertions' pass and reason
    DeepEval (DEEPEVAL_RESULTS_FOLDER)        each test case: its metrics' success, reason or error

Each result is matched to a case by a value it carries (`match_var`: a promptfoo var; a key of a DeepEval
test case's metadata, or `name` for the test case's own name). By default a result's verdict is the whole
test's (every assertion, every metric); `metric` picks one (a promptfoo assertion's `metric`, else its
`type`; a DeepEval metric's name). A result the tool could not grade (a provider error, a metric's error)
is not evaluated. Several results for one case are its repeats, in the file's order.

Plain Python; judges.runs.importing writes the verdicts as an external config's run (docs/cases.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from labeling.importing.reading import RowError, has_nul, type_name

TOOLS = ("promptfoo", "deepeval")
MAX_REASON_CHARS = 20_000
PROMPTFOO_ERROR = 2  # promptfoo's ResultFailureReason.ERROR: the test ran into an error, nothing was graded


@dataclass(frozen=True)
class ToolVerdict:
    where: str  # names the result in an error: "result 3 (ret-002)"
    external_id: str
    verdict: str  # pass | fail | not_evaluated
    reason: str
    judge: str
    score: float | None
    output: str | None  # the answer the tool graded, when the file says


class _Problem(Exception):
    """One result's problem; the reader reports it with where the result is and goes on to the next."""


def read_tool_results(data: Any, *, tool: str, match_var: str, metric: str | None) -> tuple[list[ToolVerdict],
                                                                                          list[RowError]]:
    """The verdicts in a parsed results file, and every problem found (each naming its result)."""
    if tool == "promptfoo":
        items, problem = _promptfoo_items(data)
        read = _promptfoo_verdict
    else:
        items, problem = _deepeval_items(data)
        read = _deepeval_verdict
    if problem:
        return [], [RowError(None, None, problem)]
    verdicts: list[ToolVerdict] = []
    errors: list[RowError] = []
    for number, item in enumerate(items, start=1):
        where = f"{'result' if tool == 'promptfoo' else 'test case'} {number}"
        try:
            if not isinstance(item, dict):
                raise _Problem(f"expected an object, not {type_name(item)}")
            external_id = _external_id(item, tool=tool, match_var=match_var)
            where = f"{where} ({external_id})"
            verdicts.append(read(item, where=where, external_id=external_id, metric=metric))
        except _Problem as problem:
            errors.append(RowError(None, where, str(problem)))
    if not verdicts and not errors:
        errors.append(RowError(None, None, f"the file has no {'results' if tool == 'promptfoo' else 'test cases'}"))
    return verdicts, errors


def _promptfoo_items(data: Any) -> tuple[list, str | None]:
    results = data.get("results") if isinstance(data, dict) else None
    items = results.get("results") if isinstance(results, dict) else None
    if not isinstance(items, list):
        return [], ("not a promptfoo results file (what `promptfoo eval -o results.json` writes): it has no "
                    "results.results list")
    return items, None


def _deepeval_items(data: Any) -> tuple[list, str | None]:
    items = data.get("testCases") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return [], "not a DeepEval test run (a test_run_*.json file): it has no testCases list"
    if data.get("conversationalTestCases"):
        return [], ("the test run holds conversational test cases: evalhub's case is one answer, import "
                    "single-turn test cases only")
    return items, None


def _external_id(item: dict, *, tool: str, match_var: str) -> str:
    if tool == "promptfoo":
        holder = item.get("vars") if isinstance(item.get("vars"), dict) else (item.get("testCase") or {}).get("vars")
        named = f"vars.{match_var}"
        hint = "--match-var names the var that holds the case's external_id"
    elif match_var == "name":
        holder, named, hint = item, "name", "the test case's name is the case's external_id"
    else:
        holder = item.get("metadata") if isinstance(item.get("metadata"), dict) else item.get("additionalMetadata")
        named = f"metadata.{match_var}"
        hint = ("--match-var names the key of the test case's additional_metadata that holds the case's "
                "external_id (or `name`, its name)")
    value = holder.get(match_var) if isinstance(holder, dict) else None
    if isinstance(value, bool) or not isinstance(value, str | int) or str(value).strip() == "":
        raise _Problem(f"{named} is missing or not a string ({hint})")
    external_id = str(value).strip()
    if len(external_id) > 255 or has_nul(external_id):
        raise _Problem(f"{named} is not an external_id (over 255 characters, or a NUL character)")
    return external_id


def _text(value: Any, name: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _Problem(f"{name} must be text, not {type_name(value)}")
    if has_nul(value):
        raise _Problem(f"{name} contains a NUL character")
    return value[:MAX_REASON_CHARS]


def _without_stack(error: str) -> str:
    """promptfoo's error text without the JavaScript stack trace it appends (lines `    at …`)."""
    lines = error.strip().splitlines()
    kept = [line for line in lines[:next((i for i, line in enumerate(lines) if line.lstrip().startswith("at ")),
                                         len(lines))]]
    return "\n".join(kept).strip()


def _score(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return float(value)


def _passed(value: Any, name: str) -> str:
    if not isinstance(value, bool):
        raise _Problem(f"{name} must be true or false, not {type_name(value)}")
    return "pass" if value else "fail"


def _output(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _promptfoo_verdict(item: dict, *, where: str, external_id: str, metric: str | None) -> ToolVerdict:
    output = _output((item.get("response") or {}).get("output") if isinstance(item.get("response"), dict) else None)
    grading = item.get("gradingResult")
    if item.get("failureReason") == PROMPTFOO_ERROR or not isinstance(grading, dict):
        error = _text(item.get("error"), "error") or "promptfoo graded nothing (no gradingResult)"
        return ToolVerdict(where, external_id, "not_evaluated", _without_stack(error), "promptfoo", None, output)
    components = grading.get("componentResults") or []
    if not isinstance(components, list):
        raise _Problem("gradingResult.componentResults must be a list")
    assertions = [c.get("assertion") if isinstance(c, dict) and isinstance(c.get("assertion"), dict) else {}
                  for c in components]
    if metric is None:
        kinds = sorted({str(a.get("type")) for a in assertions if a.get("type")})
        judge = "promptfoo: " + ", ".join(kinds) if kinds else "promptfoo"
        return ToolVerdict(where, external_id, _passed(grading.get("pass"), "gradingResult.pass"),
                           _text(grading.get("reason"), "gradingResult.reason"), judge,
                           _score(grading.get("score")), output)
    names = [str(a.get("metric") or a.get("type") or "") for a in assertions]
    chosen = [c for c, name in zip(components, names, strict=True) if name == metric]
    if len(chosen) != 1:
        listed = ", ".join(sorted({n for n in names if n})) or "none"
        raise _Problem(f"{'no' if not chosen else 'more than one'} assertion has metric (or type) {metric!r} "
                       f"(its assertions: {listed})")
    component = chosen[0]
    kind = component["assertion"].get("type")
    judge = f"promptfoo: {metric}" + (f" ({kind})" if kind and kind != metric else "")
    return ToolVerdict(where, external_id, _passed(component.get("pass"), f"the {metric} assertion's pass"),
                       _text(component.get("reason"), f"the {metric} assertion's reason"), judge,
                       _score(component.get("score")), output)


def _deepeval_verdict(item: dict, *, where: str, external_id: str, metric: str | None) -> ToolVerdict:
    output = _output(item.get("actualOutput"))
    metrics = item.get("metricsData")
    if not isinstance(metrics, list) or not metrics or not all(isinstance(m, dict) for m in metrics):
        raise _Problem("metricsData must be a non-empty list of metrics")
    names = [str(m.get("name") or "") for m in metrics]
    if metric is not None:
        chosen = [m for m, name in zip(metrics, names, strict=True) if name == metric]
        if len(chosen) != 1:
            listed = ", ".join(sorted({n for n in names if n})) or "none"
            raise _Problem(f"{'no' if not chosen else 'more than one'} metric is named {metric!r} (its metrics: "
                           f"{listed})")
        metrics = chosen
    judged = [_deepeval_metric(m) for m in metrics]
    judge = "deepeval: " + ", ".join(sorted({n for n in names if n} if metric is None else {metric}))
    errors = [f"{name}: {reason}" for name, verdict, reason, _ in judged if verdict == "not_evaluated"]
    if errors:  # a metric that could not grade leaves the whole test case ungraded
        return ToolVerdict(where, external_id, "not_evaluated", "; ".join(errors), judge, None, output)
    failed = [f"{name}: {reason}" for name, verdict, reason, _ in judged if verdict == "fail"]
    verdict = "fail" if failed else "pass"
    reason = "; ".join(failed) if failed else "; ".join(f"{name}: {reason}" for name, _, reason, _ in judged)
    if len(judged) == 1:
        reason = judged[0][2]
    score = judged[0][3] if len(judged) == 1 else None
    return ToolVerdict(where, external_id, verdict, reason[:MAX_REASON_CHARS], judge, score, output)


def _deepeval_metric(data: dict) -> tuple[str, str, str, float | None]:
    """(name, verdict, reason, score) of one metric's result; a metric that raised is not evaluated."""
    name = str(data.get("name") or "metric")
    error = _text(data.get("error"), f"the {name} metric's error")
    if error:
        return name, "not_evaluated", error, None
    return (name, _passed(data.get("success"), f"the {name} metric's success"),
            _text(data.get("reason"), f"the {name} metric's reason"), _score(data.get("score")))
