"""The semantic layer: meaning-preserving variation judged by embeddings, before any LLM judge.

The agent's answer and each reference (the golden answer and `metadata.references`) are embedded
through an OpenAI-style embeddings endpoint; the highest cosine similarity counts. At or above
`pass_at` the case passes, below `fail_below` (when set) it fails, and in between the behavioral
judge decides (with no behavioral layer, the case fails below `pass_at`). A case with no reference
skips the layer. Embeddings are cached on (provider, model, dimensions, text hash): a text is
embedded once, whatever the case, repeat or config that needs it.
"""

import functools
import hashlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import fields
from .canonical import canonical_json

SEMANTIC_PROVIDERS: tuple[str, ...] = ("openai", "openai-compatible")
SEMANTIC_FIELDS: tuple[str, ...] = (
    "provider",
    "model",
    "model_family",
    "base_url_env",
    "api_key_env",
    "dimensions",
    "pass_at",
    "fail_below",
)
# Inputs per embeddings call: OpenAI takes up to 2,048 (and 300,000 tokens) per request; local
# servers (TEI, Ollama) take fewer, and a smaller batch fails and is retried more cheaply.
EMBED_BATCH = 128


@dataclass(frozen=True)
class SemanticLayer:
    """The `semantic` block of a judge config: the embeddings endpoint and the two thresholds."""

    provider: str
    model: str
    pass_at: float
    fail_below: float | None = None
    model_family: str | None = None
    base_url_env: str | None = None
    api_key_env: str | None = None
    dimensions: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "model": self.model,
            "model_family": self.model_family,
            "base_url_env": self.base_url_env,
            "api_key_env": self.api_key_env,
            "dimensions": self.dimensions,
            "pass_at": self.pass_at,
            "fail_below": self.fail_below,
        }

    @classmethod
    def from_dict(cls, d: Any) -> "SemanticLayer":
        """Validate a config's `semantic` block; a ValueError names the field at fault."""
        w = "semantic."
        if not isinstance(d, dict):
            raise ValueError("semantic: expected an object")
        fields.reject_unknown(d, SEMANTIC_FIELDS, where=w)
        provider = fields.choice(d, "provider", SEMANTIC_PROVIDERS, where=w)
        base_url_env = fields.env_name(d, "base_url_env", where=w)
        if provider == "openai-compatible" and base_url_env is None:
            raise ValueError(
                "semantic.base_url_env: an openai-compatible provider needs the variable naming its endpoint"
            )
        dimensions = d.get("dimensions")
        if dimensions is not None and (
            isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1
        ):
            raise ValueError("semantic.dimensions: must be a positive integer, or empty for the model's own")
        if "pass_at" not in d:
            raise ValueError("semantic.pass_at: required (the similarity from which a case passes)")
        pass_at = threshold(d["pass_at"], "pass_at")
        fail_below = None if d.get("fail_below") is None else threshold(d["fail_below"], "fail_below")
        if fail_below is not None and fail_below > pass_at:
            raise ValueError("semantic.fail_below: must not be above pass_at")
        return cls(
            provider=provider,
            model=fields.nonempty_string(d, "model", where=w),
            pass_at=pass_at,
            fail_below=fail_below,
            model_family=fields.string(d, "model_family", where=w, required=False),
            base_url_env=base_url_env,
            api_key_env=fields.env_name(d, "api_key_env", where=w),
            dimensions=dimensions,
        )


def threshold(value: Any, name: str) -> float:
    """A similarity threshold: a number from 0 to 1 (cosine similarity of text embeddings)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or not 0 <= value <= 1:
        raise ValueError(f"semantic.{name}: must be a number from 0 to 1 (a cosine similarity)")
    return float(value)


# ---- references and similarity -------------------------------------------------------------------


def references(case: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, text) of each non-blank reference: the golden answer, then `metadata.references`.

    ValueError when `metadata.references` is not a list of strings.
    """
    out = []
    golden = case.get("golden_answer")
    if isinstance(golden, str) and golden.strip():
        out.append(("golden answer", golden))
    metadata = case.get("metadata")
    extra = metadata.get("references") if isinstance(metadata, dict) else None
    if extra is not None:
        if not isinstance(extra, list) or not all(isinstance(r, str) for r in extra):
            raise ValueError("metadata.references: expected a list of strings")
        out += [(f"references[{i}]", r) for i, r in enumerate(extra) if r.strip()]
    return out


def texts_to_embed(case: dict[str, Any]) -> list[str]:
    """The answer, then each reference: what the layer embeds for the case ([] when it embeds nothing)."""
    try:
        refs = references(case)
    except ValueError:
        return []
    return answer_and_references(case, refs)


def answer_and_references(case: dict[str, Any], refs: list[tuple[str, str]]) -> list[str]:
    """texts_to_embed() of a case whose references() are already read."""
    answer = str(case.get("output") or "")
    return [answer, *(text for _, text in refs)] if refs and answer.strip() else []


def unit(vector: Any) -> np.ndarray:
    """The vector scaled to length 1; all zeros stays all zeros (it points nowhere)."""
    v = np.asarray(vector, dtype=np.float64)
    norm = float(np.linalg.norm(v))
    return v / norm if norm else v


def unit_rows(rows: np.ndarray) -> np.ndarray:
    """Each row of a 2-D array scaled to length 1, all at once (a batch's vectors); zero rows stay zero."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)


def cosine_of_units(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two vectors already scaled by unit(): their dot product."""
    if a.shape != b.shape:
        raise ValueError(f"vectors of different lengths: {a.shape[0]} and {b.shape[0]}")
    # Rounding can carry a parallel pair a hair past 1.
    return max(-1.0, min(1.0, float(a.dot(b))))


def cosine(a: Any, b: Any) -> float:
    """Cosine similarity of two vectors; 0.0 when either is all zeros."""
    return cosine_of_units(unit(a), unit(b))


def decide(similarity: float, layer: SemanticLayer, *, behavioral: bool) -> str | None:
    """`pass`, `fail`, or None when the behavioral judge decides (docs/judging.md, "Layers")."""
    if similarity >= layer.pass_at:
        return "pass"
    if layer.fail_below is not None and similarity < layer.fail_below:
        return "fail"
    return None if behavioral else "fail"


def embedding_key(*, provider: str, model: str, dimensions: int | None, text: str) -> str:
    """The cache key of one text's embedding: sha256 of the canonical JSON of (provider, model,
    dimensions, sha256 of the text)."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    return hashlib.sha256(f'{_key_prefix(provider, model, dimensions)}{digest}"}}'.encode()).hexdigest()


@functools.cache
def _key_prefix(provider: str, model: str, dimensions: int | None) -> str:
    # The canonical JSON up to the text's digest ("text" sorts last; a hex digest needs no escaping):
    # built once per layer, not once per text.
    payload = {"provider": provider, "model": model, "dimensions": dimensions, "text": ""}
    return canonical_json(payload).removesuffix('""}') + '"'
