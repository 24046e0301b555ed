"""The small validators of a judge config's fields, a JSON Schema's references among them: each names the
field it rejects in its ValueError."""

import functools
import json
import re
from typing import Any

import re2
import referencing.exceptions
import referencing.jsonschema

# The engine sets these request fields itself; a config may not override them through params.
RESERVED_PARAMS: frozenset[str] = frozenset(
    {"model", "messages", "system", "response_format", "tools", "tool_choice", "stream", "n"}
)
SLUG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def string(d: dict, name: str, *, where: str = "", required: bool = True, default: str | None = None) -> Any:
    value = d.get(name, default)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{where}{name}: expected a string, got {type(value).__name__}")
    return value


def nonempty_string(d: dict, name: str, *, where: str = "") -> str:
    value = string(d, name, where=where)
    if not value.strip():
        raise ValueError(f"{where}{name}: must not be empty")
    return value


def integer(d: dict, name: str, default: int, lo: int, hi: int) -> int:
    value = d.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}: expected an integer, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise ValueError(f"{name}: must be between {lo} and {hi}, got {value}")
    return value


def string_list(d: dict, name: str, *, where: str = "") -> tuple[str, ...]:
    value = d.get(name) or []
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where}{name}: expected a list of strings")
    return tuple(value)


def env_name(d: dict, name: str, *, where: str = "") -> str | None:
    value = d.get(name)
    if value is None:
        return None
    # Never echo the value: a key pasted here by mistake must not reach an error message or a log.
    if not isinstance(value, str) or not _ENV_NAME_RE.match(value):
        raise ValueError(
            f"{where}{name}: must be the NAME of an environment variable (like EVALHUB_JUDGE_API_KEY), "
            "not a URL or a key"
        )
    return value


def choice(d: dict, name: str, choices: tuple[str, ...], *, where: str = "", default: Any = None) -> Any:
    value = d.get(name, default)
    if value not in choices:
        raise ValueError(f"{where}{name}: must be one of {', '.join(choices)}; got {value!r}")
    return value


def params(d: dict, *, where: str = "") -> dict[str, Any]:
    value = d.get("params") or {}
    if not isinstance(value, dict):
        raise ValueError(f"{where}params: expected an object")
    try:
        value = json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}params: must be JSON ({exc})") from None
    reserved = sorted(RESERVED_PARAMS & set(value))
    if reserved:
        raise ValueError(f"{where}params: {', '.join(reserved)} are set by the engine and may not be given")
    if "temperature" in value:
        t = value["temperature"]
        if isinstance(t, bool) or not isinstance(t, int | float) or not 0 <= t <= 2:
            raise ValueError(f"{where}params.temperature: must be a number from 0 to 2")
    if "max_tokens" in value:
        m = value["max_tokens"]
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise ValueError(f"{where}params.max_tokens: must be a positive integer")
    return value


def reject_unknown(d: dict, known: tuple[str, ...], *, where: str = "") -> None:
    unknown = sorted(set(d) - set(known))
    if unknown:
        raise ValueError(f"{where}{', '.join(unknown)}: unknown field(s)")


def regexes(d: dict, name: str) -> tuple[str, ...]:
    """A list of regular expressions, each compiled once here so a bad one is named before any case."""
    patterns = string_list(d, name)
    for p in patterns:
        try:
            re.compile(p)
        except re.error as exc:
            raise ValueError(f"{name}: invalid regular expression {p!r}: {exc}") from None
        except (RecursionError, OverflowError):  # nested too deep, or a repeat count too large, to compile
            raise ValueError(f"{name}: invalid regular expression {p[:60]!r}…: too deeply nested or too large "
                             "to compile") from None
    return patterns


def linear_regexes(d: dict, name: str) -> tuple[str, ...]:
    """A list of patterns for RE2 (`re2`), a linear-time engine, each compiled here so a pattern it cannot take
    is named before any case: an answer is the agent's text, and a backtracking engine lets a pattern such as
    `^(a+)+$` spend minutes on 35 characters. RE2 has no backreferences or lookaround; the error says so."""
    patterns = string_list(d, name)
    for i, p in enumerate(patterns):
        try:
            compile_linear(p)
        except re2.error as exc:
            why = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            raise ValueError(f"{name}: RE2 cannot take pattern {i + 1}, {p[:120]!r} ({why}); patterns run on RE2, a "
                             "linear-time engine with no backreferences or lookaround (docs/gate.md, 'Patterns')"
                             ) from None
    return patterns


@functools.lru_cache(maxsize=1024)
def compile_linear(pattern: str) -> Any:
    """`pattern` compiled by RE2, its errors raised (re2.error) rather than logged to stderr; kept, as a config's
    patterns run on every case."""
    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options)


# The keywords that make a validator follow a reference (2020-12, 2019-09, and every draft's $ref).
_REFERENCE_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")


def _known_draft(dialect: Any) -> bool:
    """Whether `$schema` names a draft jsonschema ships (and so knows without asking anyone)."""
    if not isinstance(dialect, str):
        return False
    try:
        referencing.jsonschema.specification_with(dialect)
    except referencing.jsonschema.UnknownDialect:
        return False
    return True


def refuse_outside_references(schema: dict[str, Any]) -> None:
    """A schema is data: it may refer only within itself ("#/$defs/order"), never to a URL or a file.

    jsonschema would fetch any other reference over the network while it judges. Every object in
    the document is looked at, not only the schema keywords' own places, since a local reference may
    point anywhere in it (even into an `examples` value). `$schema` may name only a draft jsonschema
    ships: those are known without asking anyone, and jsonschema never fetches `$schema`.
    """
    dialect = schema.get("$schema")
    if dialect is not None and not _known_draft(dialect):
        raise ValueError(f"json_schema: $schema {dialect!r} is not a JSON Schema draft jsonschema knows")
    # A stack, not recursion: however deeply the document nests, walking it raises nothing.
    stack: list[tuple[str, Any]] = [("", schema)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            for keyword in _REFERENCE_KEYWORDS:
                ref = value.get(keyword)
                if isinstance(ref, str) and not ref.startswith("#"):
                    raise ValueError(
                        f"json_schema: the reference {ref!r} ({keyword} at {where or '/'}) leaves the schema;"
                        ' a schema may only refer within itself, as "#/$defs/name" does'
                    )
            stack.extend((f"{where}/{k}", v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{where}/{i}", v) for i, v in enumerate(value))


def check_local_references(schema: dict[str, Any]) -> None:
    """Every local reference of a schema (`$ref`, `$dynamicRef`) resolves within it; else a ValueError naming the
    first that does not. A reference that cannot resolve would fail every case the config judges, a config
    defect that would read as a failing agent. Call after refuse_outside_references (every reference is local)."""
    dialect = schema.get("$schema")
    specification = (referencing.jsonschema.specification_with(dialect) if isinstance(dialect, str)
                     else referencing.jsonschema.DRAFT202012)  # jsonschema's own default: the latest draft
    root = specification.create_resource(schema)
    base = root.id() or ""
    root_resolver = referencing.Registry().with_resource(base, root).resolver(base_uri=base)
    stack: list[tuple[str, Any, Any]] = [("", schema, root_resolver)]
    while stack:
        where, value, resolver = stack.pop()
        if isinstance(value, dict):
            if value is not schema and isinstance(value.get("$id"), str):  # a subschema that is a resource of its own
                resolver = resolver.in_subresource(specification.create_resource(value))
            for keyword in ("$ref", "$dynamicRef"):
                ref = value.get(keyword)
                if isinstance(ref, str):
                    try:
                        resolver.lookup(ref)
                    except referencing.exceptions.Unresolvable:
                        raise ValueError(f"json_schema: the reference {ref[:200]!r} ({keyword} at {where or '/'}) "
                                         "does not resolve within the schema") from None
            stack.extend((f"{where}/{k}", v, resolver) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{where}/{i}", v, resolver) for i, v in enumerate(value))
