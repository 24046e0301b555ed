"""The contract layer: deterministic checks on a case and its trace, each reported by name.

A check that does not apply to a case (no tool expected, no source to retrieve, no argument to
compare) passes and says so in its detail: it has nothing to object to.
"""

import functools
import json
from collections.abc import Callable, Iterator
from typing import Any

import jsonschema
import referencing
import referencing.exceptions
import referencing.jsonschema

from . import fields
from .config import JudgeConfig
from .credentials import secret_kinds


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: unlike Python's ==, true is not 1 and 1 is not "1"."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


# An answer or a tool argument is the agent's text, untrusted: what a check parses is bounded, so text
# nested or sized to break a parser is a failed check with its reason, never an exception.
MAX_JSON_DEPTH = 64  # far deeper than any answer or argument a check compares
MAX_JSON_CHARS = 10_000_000


def load_json_text(text: str) -> Any:
    """The JSON value of an agent's text; ValueError saying why when it is not JSON, or is too large or
    nested too deeply to parse safely."""
    if len(text) > MAX_JSON_CHARS:
        raise ValueError(f"too large to parse ({len(text):,} characters; at most {MAX_JSON_CHARS:,})")
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"nested too deeply to parse (more than {MAX_JSON_DEPTH} levels)") from None
    if _depth(value) > MAX_JSON_DEPTH:
        raise ValueError(f"nested too deeply to parse (more than {MAX_JSON_DEPTH} levels)")
    return value


def _depth(value: Any) -> int:
    """How many arrays and objects nest in a JSON value (a scalar is 0), without recursion; counting
    stops past the limit."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        if depth > MAX_JSON_DEPTH:
            return depth
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _argument_matches(argument: Any, expected: Any) -> bool:
    if _depth(argument) > MAX_JSON_DEPTH:
        return False  # no expected argument nests that deep
    if json_equal(argument, expected):
        return True
    # OpenAI-style traces carry arguments as JSON text ('{"order_id": "ORD-101"}').
    if isinstance(argument, str) and not isinstance(expected, str):
        try:
            return json_equal(load_json_text(argument), expected)
        except ValueError:
            return False
    return False


def _calls(case: dict[str, Any]) -> list[dict[str, Any]]:
    calls = (case.get("trace") or {}).get("toolCalls") or []
    return [c for c in calls if isinstance(c, dict)]


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


def check_answer_present(case: dict, cfg: JudgeConfig) -> tuple[bool, str]:
    output = case.get("output")
    if isinstance(output, str) and output.strip():
        return True, f"answer of {len(output.strip())} characters"
    return False, "the answer is empty"


def check_expected_tool(case: dict, cfg: JudgeConfig) -> tuple[bool, str]:
    expected = case.get("expected_tool")
    if expected is None:
        return True, "not applicable: no tool call is expected"
    names = [c.get("name") for c in _calls(case)]
    if expected in names:
        return True, f"{expected} was called"
    return False, f"{expected} was not called (called: {', '.join(map(str, names)) or 'none'})"


def check_expected_tool_argument(case: dict, cfg: JudgeConfig) -> tuple[bool, str]:
    tool = case.get("expected_tool")
    expected = case.get("expected_tool_argument")
    if tool is None or expected is None:
        return True, "not applicable: no argument to check"
    arguments = [c.get("argument") for c in _calls(case) if c.get("name") == tool]
    if not arguments:
        return False, f"{tool} was not called, so not with {_short(expected)}"
    if any(_argument_matches(a, expected) for a in arguments):
        return True, f"{tool} called with {_short(expected)}"
    got = ", ".join(_short(a) for a in arguments)
    return False, f"{tool} called with {got}, expected {_short(expected)}"


def check_no_tool_when_none_expected(case: dict, cfg: JudgeConfig) -> tuple[bool, str]:
    if case.get("expected_tool") is not None:
        return True, "not applicable: a tool call is expected"
    names = [str(c.get("name")) for c in _calls(case)]
    if names:
        return False, f"no tool call expected, but called: {', '.join(names)}"
    return True, "no tool called"


def check_expected_source(case: dict, cfg: JudgeConfig) -> tuple[bool, str]:
    expected = case.get("expected_source")
    if expected is None:
        return True, "not applicable: retrieval is not checked"
    sources = (case.get("trace") or {}).get("retrievedSources") or []
    if expected in sources:
        return True, f"{expected} was retrieved"
    return False, f"{expected} was not retrieved (retrieved: {', '.join(map(str, sources)) or 'none'})"


def _text(case: dict) -> str:
    output = case.get("output")
    return output if isinstance(output, str) else ""


@functools.lru_cache(maxsize=256)
def _pattern(pattern: str) -> Any:
    """A config's pattern on RE2, compiled once: linear in the answer's length, whatever the pattern (the config
    check refused any RE2 cannot take)."""
    return fields.compile_linear(pattern)


def check_must_match(case: dict, cfg: JudgeConfig) -> tuple[bool, str]:
    missing = [p for p in cfg.must_match if not _pattern(p).search(_text(case))]
    if missing:
        return False, "no match for " + ", ".join(repr(p) for p in missing)
    return True, f"all {len(cfg.must_match)} pattern(s) match"


def check_must_not_match(case: dict, cfg: JudgeConfig) -> tuple[bool, str]:
    found = [p for p in cfg.must_not_match if _pattern(p).search(_text(case))]
    if found:
        return False, "forbidden match for " + ", ".join(repr(p) for p in found)
    return True, f"none of {len(cfg.must_not_match)} pattern(s) match"


# jsonschema's default registry fetches any reference it does not hold (a GET with no timeout). This
# one retrieves nothing: the drafts' metaschemas, which jsonschema ships, and the schema itself are
# all a reference may reach, so a remote reference stored before the config refused them is a failed
# check, never a request.
_RETRIEVES_NOTHING: referencing.jsonschema.SchemaRegistry = referencing.Registry()


def check_json_schema(case: dict, cfg: JudgeConfig) -> tuple[bool, str]:
    try:
        value = load_json_text(_text(case))
    except ValueError as exc:
        return False, f"the answer is not JSON: {exc}"
    schema = cfg.json_schema
    assert schema is not None  # JudgeConfig.from_dict refuses the json_schema check without a schema
    validator_cls = jsonschema.validators.validator_for(schema)
    validator = validator_cls(schema, registry=_RETRIEVES_NOTHING)
    try:
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
    except referencing.exceptions.Unresolvable as exc:
        return False, f"the schema's reference {exc.ref!r} does not resolve within the schema"
    if errors:
        first = errors[0]
        where = "/".join(map(str, first.absolute_path)) or "(root)"
        return False, f"{len(errors)} schema error(s); at {where}: {first.message}"
    return True, "the answer validates against the schema"


def _tool_names(case: dict) -> list[str]:
    return [str(c.get("name")) for c in _calls(case)]


def check_allowed_tools(case: dict, cfg: JudgeConfig) -> tuple[bool, str]:
    names = _tool_names(case)
    outside = [n for n in dict.fromkeys(names) if n not in cfg.allowed_tools]
    if outside:
        return False, f"called tool(s) outside allowed_tools: {', '.join(outside)}"
    return True, f"all {len(names)} call(s) name allowed tools" if names else "no tool called"


def check_forbidden_tools(case: dict, cfg: JudgeConfig) -> tuple[bool, str]:
    called = [n for n in dict.fromkeys(_tool_names(case)) if n in cfg.forbidden_tools]
    if called:
        return False, f"forbidden tool(s) called: {', '.join(called)}"
    return True, f"none of {len(cfg.forbidden_tools)} forbidden tool(s) called"


def check_max_tool_calls(case: dict, cfg: JudgeConfig) -> tuple[bool, str]:
    n, limit = len(_calls(case)), cfg.max_tool_calls
    assert limit is not None  # JudgeConfig.from_dict refuses the max_tool_calls check without a number
    if n > limit:
        return False, f"{n} tool calls, at most {limit} allowed"
    return True, f"{n} tool call(s), at most {limit} allowed"


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, object keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def check_no_secrets(case: dict, cfg: JudgeConfig) -> tuple[bool, str]:
    # Where each text came from, so the detail can say where a credential is without showing it.
    places: list[tuple[str, list[str]]] = [("the answer", [_text(case)])]
    for i, call in enumerate(_calls(case)):
        places.append((f"toolCalls[{i}].argument", list(_strings(call.get("argument")))))
    found = []
    for where, texts in places:
        kinds = [k for text in texts for k in secret_kinds(text, extra_patterns=cfg.secret_patterns)]
        if kinds:
            found.append(f"{where} carries {', '.join(dict.fromkeys(kinds))}")
    if found:
        return False, "; ".join(found)  # never the credential itself: this detail is stored and shown
    return True, f"no credential in the answer or {len(places) - 1} tool argument(s)"


CHECKS: dict[str, Callable[[dict, JudgeConfig], tuple[bool, str]]] = {
    "answer_present": check_answer_present,
    "expected_tool": check_expected_tool,
    "expected_tool_argument": check_expected_tool_argument,
    "no_tool_when_none_expected": check_no_tool_when_none_expected,
    "expected_source": check_expected_source,
    "must_match": check_must_match,
    "must_not_match": check_must_not_match,
    "json_schema": check_json_schema,
    "allowed_tools": check_allowed_tools,
    "forbidden_tools": check_forbidden_tools,
    "max_tool_calls": check_max_tool_calls,
    "no_secrets": check_no_secrets,
}


def run_contract_checks(case: dict[str, Any], cfg: JudgeConfig) -> list[dict[str, Any]]:
    """Run the config's checks on a case: [{"name", "passed", "detail"}] in the config's order."""
    results = []
    for name in cfg.contract_checks:
        passed, detail = CHECKS[name](case, cfg)
        results.append({"name": name, "passed": passed, "detail": detail})
    return results
