"""Escalation beyond the primary judge (docs/judging.md): a `fallback` that answers when the primary cannot,
a `second_opinion` (another family) that also judges when any of its `when` modes asks, and an `adjudicator`
that decides where the primary and the second opinion disagree.

A legacy `secondary` (one slot, either a fallback or a second opinion) reads as the one it names, with
its old rules kept (`legacy`): its `sample` is the fixed salted-hash sample and its `borderline` the scores
rule only. The new form's `sample` rotates (`rotating_sample`) and its `borderline` also covers a similarity
near the semantic layer's `pass_at`.
"""

import copy
import hashlib
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import fields
from .families import model_family
from .secondary import PROVIDERS, SecondaryJudge, sample_share

ESCALATION_ROLES: tuple[str, ...] = ("fallback", "second_opinion", "adjudicator")
SECOND_OPINION_MODES: tuple[str, ...] = ("always", "sample", "borderline", "safety")
_JUDGE_FIELDS = ("provider", "model", "model_family", "base_url_env", "api_key_env", "params")
# A similarity this close under `pass_at` is borderline (the behavioral judge decided it).
SIMILARITY_BAND = 0.05


@dataclass(frozen=True)
class JudgeSpec:
    """One more judge model, like the primary: provider, pinned model, family, endpoint and key variables."""

    provider: str
    model: str
    model_family: str | None = None
    base_url_env: str | None = None
    api_key_env: str | None = None
    params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def validated_fields(cls, d: Any, name: str, extra: tuple[str, ...] = ()) -> dict[str, Any]:
        """The judge fields of `d` checked (ValueError names the field at fault, under `name.`); `extra` names
        the further fields the caller reads itself."""
        w = f"{name}."
        if not isinstance(d, dict):
            raise ValueError(f"{name}: expected an object or null")
        fields.reject_unknown(d, (*_JUDGE_FIELDS, *extra), where=w)
        provider = fields.choice(d, "provider", PROVIDERS, where=w)
        base_url_env = fields.env_name(d, "base_url_env", where=w)
        if provider == "openai-compatible" and base_url_env is None:
            raise ValueError(f"{name}.base_url_env: an openai-compatible provider needs its endpoint's variable")
        return {
            "provider": provider,
            "model": fields.nonempty_string(d, "model", where=w),
            "model_family": fields.string(d, "model_family", where=w, required=False),
            "base_url_env": base_url_env,
            "api_key_env": fields.env_name(d, "api_key_env", where=w),
            "params": fields.params(d, where=w),
        }

    @classmethod
    def from_dict(cls, d: Any, name: str) -> "JudgeSpec":
        return cls(**cls.validated_fields(d, name))

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "model": self.model,
            "model_family": self.model_family,
            "base_url_env": self.base_url_env,
            "api_key_env": self.api_key_env,
            "params": copy.deepcopy(self.params),
        }

    @property
    def family(self) -> str:
        return model_family(self.model, self.model_family)


@dataclass(frozen=True)
class SecondOpinion(JudgeSpec):
    """A judge that also judges, when any of its `when` modes asks; `legacy` when read from `secondary`."""

    when: tuple[dict[str, Any], ...] = ({"mode": "always"},)
    legacy: bool = False

    @classmethod
    def from_dict(cls, d: Any, name: str = "second_opinion") -> "SecondOpinion":
        parts = cls.validated_fields(d, name, ("when",))
        return cls(**parts, when=_when_list(d.get("when"), name))

    @classmethod
    def from_secondary(cls, s: SecondaryJudge) -> "SecondOpinion":
        when = dict(s.when or {"mode": "always"})
        if when["mode"] == "categories":
            when["mode"] = "safety"
        return cls(
            s.provider, s.model, s.model_family, s.base_url_env, s.api_key_env, s.params, when=(when,), legacy=True
        )

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "when": [copy.deepcopy(w) for w in self.when]}

    def modes(self) -> list[str]:
        return [w["mode"] for w in self.when]

    def asks_on(
        self,
        case: dict[str, Any],
        scores: dict[str, int] | None,
        similarity: float | None,
        *,
        pass_score: int,
        pass_at: float | None,
        sampled: Collection[str] | None,
    ) -> bool:
        """Whether this case is drawn for a second opinion, given the decided verdict's scores and similarity.

        `sampled`: the external ids the run or check drew for a `sample` mode (rotating_sample, ranked_sample);
        None draws by the fixed salted hash of the id, as a legacy `secondary` always does."""
        return any(self._asks(w, case, scores, similarity, pass_score, pass_at, sampled) for w in self.when)

    def _asks(
        self,
        when: dict[str, Any],
        case: dict[str, Any],
        scores: dict[str, int] | None,
        similarity: float | None,
        pass_score: int,
        pass_at: float | None,
        sampled: Collection[str] | None,
    ) -> bool:
        mode = when["mode"]
        external_id = str(case.get("external_id", ""))
        if mode == "safety":
            return case.get("category") in when["categories"]
        if mode == "borderline":
            # The lowest score at the pass line or one point under it; or a similarity just under pass_at.
            low = min(scores.values()) if scores else None
            if low is not None and pass_score - 1 <= low <= pass_score:
                return True
            return (
                not self.legacy
                and similarity is not None
                and pass_at is not None
                and pass_at - SIMILARITY_BAND <= similarity <= pass_at
            )
        if mode == "sample":
            if self.legacy or sampled is None:
                return sample_share(external_id) < when["share"]
            return external_id in sampled
        return True

    @property
    def sample_share(self) -> float | None:
        """The share of a `sample` mode of the new form (that rotates), or None."""
        if self.legacy:
            return None
        return next((w["share"] for w in self.when if w["mode"] == "sample"), None)


def _when_list(d: Any, name: str) -> tuple[dict[str, Any], ...]:
    w = f"{name}.when"
    if d is None:
        return ({"mode": "always"},)
    if not isinstance(d, list) or not d:
        raise ValueError(f"{w}: expected a non-empty list of modes, e.g. [{{\"mode\": \"always\"}}]")
    out: list[dict[str, Any]] = []
    for i, item in enumerate(d):
        where = f"{w}[{i}]."
        if not isinstance(item, dict):
            raise ValueError(f"{w}[{i}]: expected an object with a mode")
        fields.reject_unknown(item, ("mode", "categories", "share"), where=where)
        mode = fields.choice(item, "mode", SECOND_OPINION_MODES, where=where)
        one: dict[str, Any] = {"mode": mode}
        if mode == "safety":
            categories = list(fields.string_list(item, "categories", where=where))
            if not categories:
                raise ValueError(f"{where}categories: name at least one category")
            one["categories"] = categories
        elif "categories" in item:
            raise ValueError(f"{where}categories: only the safety mode takes categories")
        if mode == "sample":
            share = item.get("share")
            if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1:
                raise ValueError(f"{where}share: must be a number in (0, 1]")
            one["share"] = float(share)
        elif "share" in item:
            raise ValueError(f"{where}share: only the sample mode takes a share")
        if any(o["mode"] == mode for o in out):
            raise ValueError(f"{where}mode: {mode} is listed twice")
        out.append(one)
    return tuple(out)


def disagree(a_outcome: str, a_scores: dict[str, int] | None, b_outcome: str, b_scores: dict[str, int] | None,
             *, pass_score: int) -> bool:
    """Whether two verdicts disagree: the verdict differs, or (scores judges) any metric's pass/fail does."""
    if a_outcome != b_outcome:
        return True
    if a_scores and b_scores:
        return any((a_scores.get(k, 0) >= pass_score) != (b_scores.get(k, 0) >= pass_score)
                   for k in set(a_scores) | set(b_scores))
    return False


# ---- who is drawn for a `sample` mode ------------------------------------------------------------------


def sample_size(share: float, n: int) -> int:
    """⌈share · n⌉: the cases a run's sample holds (never more than n)."""
    return min(n, math.ceil(share * n - 1e-9))


def _rank(salt: str, external_id: str) -> str:
    return hashlib.sha256(f"second_opinion:{salt}:{external_id}".encode()).hexdigest()


def rotating_sample(external_ids: Sequence[str], share: float, *, seed: str, turn: int) -> frozenset[str]:
    """The app's sample for its `turn`-th run (0 first): a permutation of the cases seeded by `seed`,
    walked ⌈share · N⌉ cases a run (wrapping round), so every case is drawn within ⌈1 / share⌉ runs."""
    ids = sorted(set(external_ids), key=lambda e: (_rank(seed, e), e))
    n = len(ids)
    if n == 0:
        return frozenset()
    size = sample_size(share, n)
    start = (turn * size) % n
    return frozenset(ids[(start + i) % n] for i in range(size))


def ranked_sample(external_ids: Sequence[str], share: float, *, salt: str) -> frozenset[str]:
    """CI's sample: the ⌈share · N⌉ cases ranked first by a hash salted with the ref, so each ref draws
    its own cases and the share holds within one case."""
    ids = sorted(set(external_ids), key=lambda e: (_rank(salt, e), e))
    return frozenset(ids[: sample_size(share, len(ids))])
