"""One judgment of one (case, repeat): the outcome and everything needed to trust or audit it."""

import dataclasses
from dataclasses import dataclass, field
from typing import Any

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
