"""One judgment of one (case, repeat): the outcome and everything needed to trust or audit it."""

import dataclasses
import types
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
    judge: str = "primary"  # primary | fallback
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

    @property
    def evaluated(self) -> bool:
        return self.outcome in ("pass", "fail")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

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
        fields = dataclasses.fields(cls)
        if not all(f.name in d and _fits(d[f.name], f.type) for f in fields):
            return None
        return cls(**{f.name: d[f.name] for f in fields})


def _fits(value: Any, kind: Any) -> bool:
    """Whether a JSON value fits a field's annotation (the few kinds Judgment's fields use)."""
    origin, args = get_origin(kind), get_args(kind)
    if origin in (Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if kind is Any:
        return True
    if kind is type(None):
        return value is None
    if isinstance(value, bool) and kind is not bool:  # JSON's true is not a count
        return False
    if kind is float:
        return isinstance(value, int | float)
    if origin is list:
        return isinstance(value, list) and all(_fits(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(_fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items())
    return isinstance(kind, type) and isinstance(value, kind)
