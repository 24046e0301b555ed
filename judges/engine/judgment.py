"""One judgment of one (case, repeat): the outcome and everything needed to trust or audit it."""

import copy
import dataclasses
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Union, get_args, get_origin

OUTCOMES: tuple[str, ...] = ("pass", "fail", "not_evaluated")
# The reasons a judgment can be not evaluated (`Judgment.error`).
ERRORS: tuple[str, ...] = (
    "timeout",
    "rate limit",
    "server error",
    "invalid output",
    "spend cap",
    "connection error",
    "config error",
    "key refused",  # the provider refused the key (401/403): a config error to fix, not an outage
    "no reference",  # the semantic layer had nothing to compare with, and no later layer decided
    "internal error",  # judging this case raised: the case is not evaluated, the batch goes on
)


@dataclass
class Judgment:
    external_id: str
    repeat: int
    outcome: str
    scores: dict[str, int] | None = None
    reason: str = ""
    raw_output: str = ""
    error: str = ""  # one of ERRORS when not evaluated, else ""
    layer: str = "contract"  # which layer decided: contract | semantic | behavioral
    judge: str = "primary"  # primary | fallback | adjudicator: whose verdict is the judgment's
    checks: list[dict[str, Any]] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0  # None when a model used has no price
    latency_ms: int = 0
    provider_calls: int = 0
    cached: bool = False
    contested: bool = False
    secondary_outcome: str | None = None
    model: str | None = None  # the model whose answer decided, when one did
    # The semantic layer's highest cosine similarity of the answer to a reference, when it ran.
    similarity: float | None = None
    # Each judge's verdict, reason and model once a second opinion was asked ({"primary" or "fallback",
    # "second_opinion", "adjudicator"}), so an adjudicated judgment keeps all three.
    opinions: dict[str, Any] | None = None
    # Provider calls and cost by who made them (primary, fallback, second_opinion, adjudicator, embeddings).
    calls_by_judge: dict[str, int] = field(default_factory=dict)
    cost_by_judge: dict[str, float | None] = field(default_factory=dict)
    # An answer it rests on came from the scripted stand-in (its header, judges.engine.providers), not a model.
    stand_in: bool = False

    @property
    def evaluated(self) -> bool:
        return self.outcome in ("pass", "fail")

    def to_dict(self) -> dict[str, Any]:
        """Its fields as a dict of copies (what dataclasses.asdict gives, without its per-value dispatch: a
        batch puts one per judgment in its cache; an atom is taken as it is, without a call)."""
        fields = self.__dict__
        return {name: value if type(value := fields[name]) in _ATOMS else _copied(value) for name in _FIELD_NAMES}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Judgment":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def from_stored(cls, d: Any) -> "Judgment | None":
        """The judgment a stored dict holds (a cache entry), or None unless it has every field with its
        declared type and a known outcome: a cache is data from outside, and a partial or mistyped entry
        is a miss, never a verdict."""
        if not isinstance(d, dict) or d.get("outcome") not in OUTCOMES:
            return None
        d = {**copy.deepcopy(ADDED_LATER), **d}  # entries stored before these fields had them at their default
        if not all(name in d and fits(d[name]) for name, fits in _FIELD_CHECKS):
            return None
        return cls(**{name: d[name] for name, _ in _FIELD_CHECKS})


_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(Judgment))
_ATOMS = frozenset({str, int, float, bool, types.NoneType})


def _copied(value: Any) -> Any:
    """A copy of a field's JSON-like value: containers copied all the way down, anything else as deepcopy has it."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is dict:
        return {k: _copied(v) for k, v in value.items()}
    if kind is list:
        return [_copied(v) for v in value]
    return copy.deepcopy(value)


def _fits_check(kind: Any) -> Callable[[Any], bool]:
    """Whether a JSON value fits a field's annotation (the few kinds Judgment's fields use), as a function
    built once per field: every posted or cached judgment is checked field by field, so the annotation
    is read once, not per value."""
    origin, args = get_origin(kind), get_args(kind)
    if origin in (Union, types.UnionType):
        alternatives = [_fits_check(a) for a in args]
        return lambda value: any(check(value) for check in alternatives)
    if kind is Any:
        return lambda value: True
    if kind is type(None):
        return lambda value: value is None
    if kind is bool:
        return lambda value: isinstance(value, bool)
    if kind is float:
        return lambda value: isinstance(value, int | float) and not isinstance(value, bool)
    if origin is list:
        item = _fits_check(args[0])
        return lambda value: isinstance(value, list) and all(item(v) for v in value)
    if origin is dict:
        key, val = _fits_check(args[0]), _fits_check(args[1])
        return lambda value: isinstance(value, dict) and all(key(k) and val(v) for k, v in value.items())
    if not isinstance(kind, type):
        return lambda value: False
    # JSON's true is not a count, nor a string.
    return lambda value: isinstance(value, kind) and not isinstance(value, bool)


ADDED_LATER: dict[str, Any] = {"opinions": None, "calls_by_judge": {}, "cost_by_judge": {}, "stand_in": False}
_FIELD_CHECKS: tuple[tuple[str, Callable[[Any], bool]], ...] = tuple(
    (f.name, _fits_check(f.type)) for f in dataclasses.fields(Judgment)
)
