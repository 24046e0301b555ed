"""A second judge beside the primary: a `fallback` that answers when the primary cannot, or a
`second_opinion` that also judges (always, for some categories, on borderline scores, or on a sample)."""

import copy
import hashlib
from dataclasses import dataclass, field
from typing import Any

from . import fields
from .families import model_family

PROVIDERS: tuple[str, ...] = ("openai", "anthropic", "openai-compatible")
SECONDARY_ROLES: tuple[str, ...] = ("fallback", "second_opinion")
SECONDARY_MODES: tuple[str, ...] = ("always", "categories", "borderline", "sample")
_SECONDARY_FIELDS = (
    "role",
    "provider",
    "model",
    "model_family",
    "base_url_env",
    "api_key_env",
    "params",
    "when",
)


@dataclass(frozen=True)
class SecondaryJudge:
    """A second judge: `fallback` answers when the primary cannot; `second_opinion` also judges."""

    role: str
    provider: str
    model: str
    model_family: str | None = None
    base_url_env: str | None = None
    api_key_env: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    when: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, d: Any) -> "SecondaryJudge":
        w = "secondary."
        if not isinstance(d, dict):
            raise ValueError("secondary: expected an object or null")
        fields.reject_unknown(d, _SECONDARY_FIELDS, where=w)
        role = fields.choice(d, "role", SECONDARY_ROLES, where=w)
        provider = fields.choice(d, "provider", PROVIDERS, where=w)
        base_url_env = fields.env_name(d, "base_url_env", where=w)
        if provider == "openai-compatible" and base_url_env is None:
            raise ValueError("secondary.base_url_env: an openai-compatible provider needs its endpoint's variable")
        when = None
        if role == "second_opinion":
            when = _when(d.get("when") or {"mode": "always"})
        return cls(
            role=role,
            provider=provider,
            model=fields.nonempty_string(d, "model", where=w),
            model_family=fields.string(d, "model_family", where=w, required=False),
            base_url_env=base_url_env,
            api_key_env=fields.env_name(d, "api_key_env", where=w),
            params=fields.params(d, where=w),
            # A fallback answers whenever the primary cannot: a `when` has nothing to decide there.
            when=when,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "provider": self.provider,
            "model": self.model,
            "model_family": self.model_family,
            "base_url_env": self.base_url_env,
            "api_key_env": self.api_key_env,
            "params": copy.deepcopy(self.params),
            "when": copy.deepcopy(self.when),
        }

    @property
    def family(self) -> str:
        return model_family(self.model, self.model_family)

    def asks_on(self, case: dict[str, Any], scores: dict[str, int], *, pass_score: int) -> bool:
        """Whether a second opinion is asked on this case, given the primary's scores."""
        when = self.when or {"mode": "always"}
        mode = when["mode"]
        if mode == "categories":
            return case.get("category") in when["categories"]
        if mode == "borderline":
            # Borderline: the lowest score sits at the pass line or just under it.
            low = min(scores.values()) if scores else None
            return low is not None and pass_score - 1 <= low <= pass_score
        if mode == "sample":
            return sample_share(str(case.get("external_id", ""))) < when["share"]
        return True


def sample_share(external_id: str) -> float:
    """Where a case falls in [0, 1) for a `sample` second opinion: the same case always falls alike."""
    # Salted so the sample is independent of the dev/holdout split, which hashes the bare id.
    digest = hashlib.sha256(f"second_opinion:{external_id}".encode()).hexdigest()
    return int(digest[:8], 16) / 0x1_0000_0000


def _when(d: Any) -> dict[str, Any]:
    w = "secondary.when."
    if not isinstance(d, dict):
        raise ValueError("secondary.when: expected an object")
    fields.reject_unknown(d, ("mode", "categories", "share"), where=w)
    mode = fields.choice(d, "mode", SECONDARY_MODES, where=w)
    out: dict[str, Any] = {"mode": mode}
    if mode == "categories":
        categories = list(fields.string_list(d, "categories", where=w))
        if not categories:
            raise ValueError("secondary.when.categories: name at least one category")
        out["categories"] = categories
    if mode == "sample":
        share = d.get("share")
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1:
            raise ValueError("secondary.when.share: must be a number in (0, 1]")
        out["share"] = float(share)
    return out
