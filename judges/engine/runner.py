"""From (case, judge config, repeat) to a judgment: the layers, the failure chain, cache and spend.

Contract first: a failed check decides `fail` and no model is called. Then the semantic layer: the
answer's embedding against its references', a similarity beyond a threshold decides. Then the
behavioral judge, asked through the SDK with the engine's own retries: backoff, Retry-After waited
out, an invalid answer asked again. When the primary cannot answer, a `fallback` secondary judge is
asked; when neither can, the judgment is `not_evaluated` with the reason and what the earlier layers
showed. Nothing here ever guesses a verdict. A batch embeds its texts first, many to a call.
"""

import hashlib
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import numpy as np

from .cache import Cache, cache_key
from .config import JudgeConfig
from .contract import run_contract_checks
from .envnames import env_name_refusals
from .judgment import Judgment
from .prompt import build_messages
from .providers import (
    DEFAULT_MAX_TOKENS,
    KEY_REFUSED,
    ClientPool,
    Embedded,
    Endpoint,
    ProviderFailure,
    call_embeddings,
    call_model,
    resolve_endpoint,
)
from .semantic import (
    EMBED_BATCH,
    SemanticLayer,
    cosine_of_units,
    decide,
    embedding_key,
    references,
    texts_to_embed,
    unit,
    unit_rows,
)
from .validation import InvalidOutput, Verdict, load_json_object, validate_answer

Prices = Mapping[str, Mapping[str, float]]
INHERITED_PARAMS = frozenset({"temperature", "max_tokens"})


@dataclass(frozen=True)
class RetryPolicy:
    """How the engine waits between attempts. Retry-After, when the provider sends one, wins."""

    backoff_base_s: float = 0.5
    backoff_max_s: float = 8.0
    # A provider asking for a longer pause than this is treated as refusing: the judgment moves on.
    max_retry_after_s: float = 60.0

    def backoff(self, attempt: int) -> float:
        # Exponential with jitter, so threads that failed together don't retry together.
        return min(self.backoff_max_s, self.backoff_base_s * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)


class SpendTracker:
    """Money spent by a batch, checked before each provider call against an optional cap.

    A call reserves its estimated cost first (prompt length and the max_tokens bound) and settles
    the real cost after. Once a reservation is refused the cap counts as reached for good, so the
    rest of the batch stops rather than squeezing in whatever small call still fits.
    """

    def __init__(self, cap_usd: float | None = None) -> None:
        if cap_usd is not None and cap_usd < 0:
            raise ValueError("spend cap: must not be negative")
        self.cap_usd = cap_usd
        self.spent_usd = 0.0
        self._reserved = 0.0
        self.reached = False
        self._lock = threading.Lock()

    def reserve(self, estimate: float) -> bool:
        with self._lock:
            if self.cap_usd is None:
                self._reserved += estimate
                return True
            if self.reached or self.spent_usd + self._reserved + estimate > self.cap_usd:
                self.reached = True
                return False
            self._reserved += estimate
            return True

    def settle(self, estimate: float, actual: float | None) -> None:
        """Replace a reservation by the real cost (the estimate stands when the real one is unknown)."""
        with self._lock:
            self._reserved -= estimate
            self.spent_usd += estimate if actual is None else actual


def call_cost(prices: Prices | None, model: str, input_tokens: int | None, output_tokens: int | None) -> float | None:
    """USD for one call; None when the model has no price or the provider reported no usage."""
    price = (prices or {}).get(model)
    if price is None or input_tokens is None or output_tokens is None:
        return None
    return (input_tokens * price["input_per_mtok"] + output_tokens * price["output_per_mtok"]) / 1_000_000


def _estimate_cost(price: Mapping[str, float], prompt_chars: int, max_tokens: int) -> float:
    # ~4 characters a token in English; 3 errs on the side of stopping early.
    return (prompt_chars / 3 * price["input_per_mtok"] + max_tokens * price["output_per_mtok"]) / 1_000_000


@dataclass(frozen=True)
class _Judge:
    role: str  # primary | fallback | second_opinion
    provider: str
    model: str
    base_url_env: str | None
    api_key_env: str | None
    params: dict[str, Any]


class _Tally:
    """What one judgment's calls used, over every attempt and every judge asked."""

    __slots__ = ("calls", "input_tokens", "output_tokens", "cost")

    def __init__(self) -> None:
        self.calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost: float | None = 0.0

    def add(self, input_tokens: int | None, output_tokens: int | None, cost: float | None) -> None:
        self.input_tokens += input_tokens or 0
        self.output_tokens += output_tokens or 0
        self.cost = None if cost is None or self.cost is None else self.cost + cost

    def fill(self, j: Judgment) -> Judgment:
        j.provider_calls = self.calls
        j.input_tokens = self.input_tokens
        j.output_tokens = self.output_tokens
        j.cost_usd = self.cost
        return j


@dataclass
class _Attempts:
    """How one request's failure chain ended: the accepted value, or the last failure."""

    value: Any
    reply: Any  # the last reply that came back, accepted or not
    failure: ProviderFailure | None
    attempts: int


@dataclass(slots=True)
class _Embedding:
    """One text's embedding in a batch's memory, or why there is none.

    What making it cost is billed once, to the first judgment that uses it, so a run's totals add up
    however many cases share a reference.
    """

    vector: Any  # numpy array, or None when the call failed
    unit: Any = None  # the vector scaled to length 1, for the cosine
    failure: ProviderFailure | None = None
    attempts: int = 0
    calls: int = 0
    input_tokens: int = 0
    cost: float | None = 0.0


@dataclass(slots=True)
class _Similarity:
    """What the semantic layer found: the highest similarity and its reference, or why there is none."""

    similarity: float | None
    closest: str = ""
    why: str = ""
    error: str = ""


@dataclass(slots=True)
class _Planned:
    """What the semantic layer needs of one item, worked out once while its texts are sent."""

    checks: list[dict[str, Any]]
    refs: list[tuple[str, str]]
    texts: list[str]  # the answer, then each reference
    keys: list[str]  # their embedding keys
    cache_key: str | None  # the judgment's, when there is a judgment cache


@dataclass
class _Asked:
    verdict: Verdict | None
    raw: str
    failure: ProviderFailure | None
    attempts: int

    def why(self) -> str:
        assert self.failure is not None
        tries = f" (after {self.attempts} attempts)" if self.attempts > 1 else ""
        return f"{self.failure.category}: {self.failure.detail}{tries}"


def _sample_share(external_id: str) -> float:
    # Salted so the sample is independent of the dev/holdout split, which hashes the bare id.
    digest = hashlib.sha256(f"second_opinion:{external_id}".encode()).hexdigest()
    return int(digest[:8], 16) / 0x1_0000_0000


class Engine:
    """Judges cases under one config; shared by the threads of a batch."""

    def __init__(
        self,
        config: JudgeConfig | dict[str, Any],
        *,
        cache: Cache | None = None,
        prices: Prices | None = None,
        spend: SpendTracker | None = None,
        env: Mapping[str, str] = os.environ,
        retry: RetryPolicy | None = None,
        clients: ClientPool | None = None,
        allowed_env: Iterable[str] = (),
        embedding_cache: Cache | None = None,
    ) -> None:
        self.cfg = JudgeConfig.from_dict(config)
        # Checked again here, whoever saved the config: a judge reads no variable it may not.
        self.env_refusals = env_name_refusals(self.cfg, extra_allowed=allowed_env)
        self.config_hash = self.cfg.config_hash
        self.cache = cache
        self.prices = prices or {}
        self.spend = spend if spend is not None else SpendTracker()
        self.env = env
        self.retry = retry or RetryPolicy()
        self.clients = clients or ClientPool()
        # Endpoints whose key the provider refused: the rest of the batch does not ask with it again.
        self._refused: set[Endpoint] = set()
        self._refused_lock = threading.Lock()
        self.embedding_cache = embedding_cache
        self._embeddings: dict[str, _Embedding] = {}
        self._embeddings_lock = threading.Lock()
        self._keys: dict[str, str] = {}
        # Formatted once, not in each judgment's reason.
        s = self.cfg.semantic
        self._semantic_rules = {o: _semantic_rule(s, o) for o in ("pass", "fail")} if s is not None else {}

    def close(self) -> None:
        self.clients.close()

    # ---- one judgment --------------------------------------------------------------------------

    def _cached(self, key: str | None) -> dict[str, Any] | None:
        hit = self.cache.get(key) if key is not None else None
        return hit if hit is not None and hit.get("outcome") in ("pass", "fail") else None

    def judge(self, case: dict[str, Any], repeat: int) -> Judgment:
        started = time.monotonic()
        key = cache_key(case, self.config_hash, repeat) if self.cache is not None else None
        if key is not None:
            hit = self._cached(key)
            if hit is not None:
                j = Judgment.from_dict(hit)
                # The same content may sit under another id; this run spent nothing on it.
                j.external_id, j.repeat, j.cached = str(case.get("external_id", "")), repeat, True
                j.provider_calls, j.input_tokens, j.output_tokens, j.cost_usd = 0, 0, 0, 0.0
                j.latency_ms = int((time.monotonic() - started) * 1000)
                return j
        return self._finish(self._judge(case, repeat), started, key)

    def _finish(self, j: Judgment, started: float, key: str | None) -> Judgment:
        j.latency_ms = int((time.monotonic() - started) * 1000)
        # A second opinion that could not answer is unfinished work, like a not-evaluated primary:
        # cached, it would never be asked again and the case could never become contested.
        if key is not None and j.evaluated and j.secondary_outcome != "not_evaluated":
            self.cache.put(key, j.to_dict())
        return j

    def _judge(self, case: dict[str, Any], repeat: int) -> Judgment:
        cfg = self.cfg
        external_id = str(case.get("external_id", ""))
        checks = run_contract_checks(case, cfg) if "contract" in cfg.layers else []
        failed = [c for c in checks if not c["passed"]]
        if failed:
            reason = "contract failed: " + "; ".join(f"{c['name']}: {c['detail']}" for c in failed)
            return Judgment(external_id, repeat, "fail", reason=reason, layer="contract", checks=checks)
        if cfg.layers == ("contract",):
            reason = f"all {len(checks)} contract checks passed"
            return Judgment(external_id, repeat, "pass", reason=reason, layer="contract", checks=checks)

        behavioral = "behavioral" in cfg.layers
        if self.env_refusals:
            reason = "config error: " + "; ".join(self.env_refusals)
            return Judgment(
                external_id,
                repeat,
                "not_evaluated",
                reason=reason,
                error="config error",
                layer="behavioral" if behavioral else "semantic",
                checks=checks,
            )

        tally = _Tally()
        # What the earlier layers showed, told when the judge cannot answer.
        shown = _contract_shown(checks)
        similarity = None
        if cfg.semantic is not None:
            found = self._similarity(case, tally)
            settled = self._semantic_judgment(external_id, repeat, found, checks, tally)
            if settled is not None:
                return settled
            similarity = found.similarity
            if similarity is not None:
                shown.append(f"similarity {similarity:.2f}")
            else:
                shown.append(f"semantic layer skipped: {found.why}")

        system, user = build_messages(
            case,
            template=cfg.prompt_template,
            criteria=cfg.criteria,
            policy=cfg.policy,
            output_kind=cfg.output_kind,
        )
        primary = _Judge("primary", cfg.provider, cfg.model, cfg.base_url_env, cfg.api_key_env, cfg.params)
        asked = self._ask(primary, system, user, tally)
        judge, model, reason, raw = "primary", primary.model, None, asked.raw
        secondary = cfg.secondary
        if (
            asked.verdict is None
            and secondary
            and secondary.role == "fallback"
            # A refused key is the pipeline's to fix: a fallback answering would hide it.
            and asked.failure.category not in ("spend cap", KEY_REFUSED)
        ):
            fallback = self._secondary_judge()
            second = self._ask(fallback, system, user, tally)
            judge = "fallback"
            if second.verdict is not None:
                asked, model = second, fallback.model
            else:
                # The primary's failure is the one to fix; the fallback's is told beside it.
                reason = f"primary: {asked.why()}; fallback: {second.why()}"
                raw = second.raw or asked.raw
        if asked.verdict is None:
            error = asked.failure.category
            if judge == "fallback" and second.failure.category == KEY_REFUSED:
                error = KEY_REFUSED  # whichever key was refused, the run says so
            j = Judgment(
                external_id,
                repeat,
                "not_evaluated",
                reason=_unavailable(reason or asked.why(), shown),
                raw_output=raw,
                error=error,
                layer="behavioral",
                judge=judge,
                checks=checks,
                similarity=similarity,
            )
            return tally.fill(j)

        verdict = asked.verdict
        j = Judgment(
            external_id,
            repeat,
            verdict.outcome,
            scores=verdict.scores,
            reason=verdict.reason,
            raw_output=asked.raw,
            layer="behavioral",
            judge=judge,
            checks=checks,
            model=model,
            similarity=similarity,
        )
        if secondary and secondary.role == "second_opinion" and self._wants_second_opinion(case, verdict):
            second = self._ask(self._secondary_judge(), system, user, tally)
            if second.verdict is None:
                j.secondary_outcome = "not_evaluated"
            else:
                j.secondary_outcome = second.verdict.outcome
                # The primary's verdict stands; a disagreement is flagged for a human to look at.
                j.contested = second.verdict.outcome != verdict.outcome
        return tally.fill(j)

    def _semantic_judgment(
        self, external_id: str, repeat: int, found: _Similarity, checks: list[dict[str, Any]], tally: _Tally
    ) -> Judgment | None:
        """The judgment when the semantic layer settles the case: a similarity beyond a threshold, or no
        similarity and no behavioral judge to ask; None when the behavioral judge decides."""
        cfg = self.cfg
        behavioral = "behavioral" in cfg.layers
        if found.similarity is not None:
            outcome = decide(found.similarity, cfg.semantic, behavioral=behavioral)
            if outcome is None:
                return None
            j = Judgment(
                external_id,
                repeat,
                outcome,
                reason=f"similarity {found.similarity:.4f} to the {found.closest} {self._semantic_rules[outcome]}",
                layer="semantic",
                checks=checks,
                model=cfg.semantic.model,
                similarity=found.similarity,
            )
            return tally.fill(j)
        if behavioral:
            return None
        j = Judgment(
            external_id,
            repeat,
            "not_evaluated",
            reason="; ".join([found.why, *_contract_shown(checks)]),
            error=found.error,
            layer="semantic",
            checks=checks,
        )
        return tally.fill(j)

    def _secondary_judge(self) -> _Judge:
        s = self.cfg.secondary
        # Without params of its own, the secondary judges as coolly and briefly as the primary; the
        # primary's other params may be vendor-specific, so they stay behind.
        params = s.params or {k: v for k, v in self.cfg.params.items() if k in INHERITED_PARAMS}
        return _Judge(s.role, s.provider, s.model, s.base_url_env, s.api_key_env, params)

    def _wants_second_opinion(self, case: dict[str, Any], verdict: Verdict) -> bool:
        when = self.cfg.secondary.when or {"mode": "always"}
        mode = when["mode"]
        if mode == "categories":
            return case.get("category") in when["categories"]
        if mode == "borderline":
            # Borderline: the lowest score sits at the pass line or just under it.
            low = min(verdict.scores.values()) if verdict.scores else None
            return low is not None and self.cfg.pass_score - 1 <= low <= self.cfg.pass_score
        if mode == "sample":
            return _sample_share(str(case.get("external_id", ""))) < when["share"]
        return True

    # ---- the semantic layer ---------------------------------------------------------------------

    def _text_key(self, text: str) -> str:
        key = self._keys.get(text)
        if key is None:  # a text's key is asked for again and again (ahead, then by each repeat)
            s = self.cfg.semantic
            key = embedding_key(provider=s.provider, model=s.model, dimensions=s.dimensions, text=text)
            self._keys[text] = key
        return key

    def _similarity(self, case: dict[str, Any], tally: _Tally) -> _Similarity:
        """The answer's highest cosine similarity to a reference (embedding what is not known yet)."""
        try:
            refs = references(case)
        except ValueError as exc:
            return _Similarity(None, why=f"no reference: {exc}", error="no reference")
        if not refs:
            why = "no reference: the case has no golden answer and no metadata.references"
            return _Similarity(None, why=why, error="no reference")
        answer = str(case.get("output") or "")
        if not answer.strip():
            return _Similarity(0.0, closest=refs[0][0])  # no answer shares no meaning; nothing to embed
        texts = [answer, *(text for _, text in refs)]
        keys = [self._text_key(text) for text in texts]
        unknown = list({key: text for key, text in zip(keys, texts, strict=True) if not self._known(key)}.items())
        for i in range(0, len(unknown), EMBED_BATCH):
            self._embed_batch(unknown[i : i + EMBED_BATCH])
        return self._closest([(refs, keys, tally)])[0]

    def _closest(self, cases: list[tuple[list[tuple[str, str]], list[str], _Tally]]) -> list[_Similarity]:
        """For each case's (references, keys, tally): the answer's (the first key's text) highest similarity
        to a reference (the other keys'), once every text is embedded or has failed. Many cases at once,
        their embeddings taken under one lock."""
        found = []
        for (refs, _, _), entries in zip(cases, self._take(cases), strict=True):
            failed = next((e for e in entries if e.failure is not None), None)
            if failed is not None:
                tries = f" (after {failed.attempts} attempts)" if failed.attempts > 1 else ""
                why = f"embeddings unavailable: {failed.failure.category}: {failed.failure.detail}{tries}"
                found.append(_Similarity(None, why=why, error=failed.failure.category))
                continue
            answer, best, closest = entries[0].unit, -1.0, refs[0][0]
            try:
                for (where, _), entry in zip(refs, entries[1:], strict=True):
                    similarity = cosine_of_units(answer, entry.unit)
                    if similarity > best:  # the first of equals counts
                        best, closest = similarity, where
            except ValueError as exc:  # a cached vector of another model, say: no cosine to take
                found.append(_Similarity(None, why=f"embeddings unavailable: {exc}", error="invalid output"))
                continue
            # Rounded before deciding, so the stored similarity replays to the same verdict.
            found.append(_Similarity(round(best, 4), closest=closest))
        return found

    def _known(self, key: str) -> bool:
        """Whether the text's embedding is in memory, or in the embedding cache (then kept in memory)."""
        if key in self._embeddings:
            return True
        hit = self.embedding_cache.get(key) if self.embedding_cache is not None else None
        try:
            vector = None if hit is None else np.asarray(hit.get("vector"), dtype=np.float64)
        except (TypeError, ValueError):  # not numbers
            vector = None
        if vector is None or vector.ndim != 1 or not vector.size or not np.isfinite(vector).all():
            return False  # a damaged entry is a miss: the text is embedded again
        with self._embeddings_lock:
            self._embeddings.setdefault(key, _Embedding(vector, unit(vector)))
        return True

    def _embed_batch(self, batch: list[tuple[str, str]]) -> None:
        """Embed these texts in one request (its failure chain), keeping each vector or the failure."""
        s = self.cfg.semantic
        tally = _Tally()
        inputs = [text for _, text in batch]
        try:
            endpoint = resolve_endpoint(
                provider=s.provider,
                base_url_env=s.base_url_env,
                api_key_env=s.api_key_env,
                env=self.env,
                timeout_s=self.cfg.timeout_s,
            )
        except ProviderFailure as failure:
            done = _Attempts(None, None, failure, 0)
        else:
            client = self.clients.get(endpoint)
            chars = sum(len(text) for text in inputs)

            def accept(reply: Embedded) -> np.ndarray:
                if len(reply.vectors) != len(inputs):
                    raise InvalidOutput(f"{len(reply.vectors)} vectors came back for {len(inputs)} texts")
                try:  # one array of the batch: checked and scaled at once, not vector by vector
                    rows = np.array(reply.vectors, dtype=np.float64)
                except ValueError:  # vectors of different lengths, or not numbers
                    rows = None
                if rows is None or rows.ndim != 2 or not rows.shape[1] or not np.isfinite(rows).all():
                    raise InvalidOutput("a vector came back empty, nested, of another length or not finite")
                return rows

            done = self._attempts(
                endpoint,
                model=s.model,
                # ~4 characters a token in English; 3 errs on the side of stopping early.
                estimate=lambda price: chars / 3 * price["input_per_mtok"] / 1_000_000,
                tally=tally,
                call=lambda: call_embeddings(client, endpoint, model=s.model, inputs=inputs, dimensions=s.dimensions),
                accept=accept,
            )
        # The call's tokens and cost are shared by the texts in proportion to their length.
        total_chars = sum(len(text) for text in inputs) or 1
        shares = _split(tally.input_tokens, [len(text) / total_chars for text in inputs])
        units = None if done.value is None else unit_rows(done.value)
        entries = {}
        for i, (key, text) in enumerate(batch):
            share = len(text) / total_chars
            entries[key] = _Embedding(
                None if done.value is None else done.value[i],
                None if units is None else units[i],
                failure=done.failure,
                attempts=done.attempts,
                calls=tally.calls if i == 0 else 0,
                input_tokens=shares[i],
                cost=None if tally.cost is None else tally.cost * share,
            )
        with self._embeddings_lock:
            self._embeddings.update(entries)
        if done.value is not None and self.embedding_cache is not None:
            for (key, _), vector in zip(batch, done.value, strict=True):
                self.embedding_cache.put(key, {"vector": vector})  # an array: a store that writes text lists it

    def _take(self, cases: list[tuple[Any, list[str], _Tally]]) -> list[list[_Embedding]]:
        """Each case's embeddings (by its keys); what an embedding cost goes on the tally of the first
        judgment that takes it, so a run's totals add up however many cases share a text."""
        taken = []
        with self._embeddings_lock:
            for _, keys, tally in cases:
                entries = [self._embeddings[key] for key in keys]
                for entry in entries:
                    if entry.calls or entry.input_tokens or entry.cost != 0.0:
                        tally.calls += entry.calls
                        tally.add(entry.input_tokens, 0, entry.cost)
                        entry.calls, entry.input_tokens, entry.cost = 0, 0, 0.0
                taken.append(entries)
        return taken

    def _plan(self, case: dict[str, Any], repeat: int) -> _Planned | None:
        """What the semantic layer needs of this item, or None when it needs no embedding: the judgment
        cache answers, a contract check fails, the case has no reference or no answer (judge() tells)."""
        cfg = self.cfg
        key = cache_key(case, self.config_hash, repeat) if self.cache is not None else None
        if key is not None and self._cached(key) is not None:
            return None
        checks = run_contract_checks(case, cfg) if "contract" in cfg.layers else []
        if not all(c["passed"] for c in checks):
            return None
        texts = texts_to_embed(case)
        if not texts:
            return None
        return _Planned(checks, references(case), texts, [self._text_key(text) for text in texts], key)

    def _send_embeddings(
        self, items: list[tuple[dict[str, Any], int]], executor: ThreadPoolExecutor
    ) -> tuple[list[_Planned | None], list[int], dict[Future, list[int]]]:
        """Embed the texts these items' semantic layer needs and nobody knows yet, many to a call, each
        batch sent as soon as it is full (so the calls wait while the rest is planned).

        Returns each item's plan, how many batches each item waits for, and the items each batch's
        future holds up. A config without the layer needs nothing at all.
        """
        plans: list[_Planned | None] = [None] * len(items)
        missing = [0] * len(items)
        if self.cfg.semantic is None or self.env_refusals:
            return plans, missing, {}
        batch_of: dict[str, int] = {}  # key -> the number of the batch that embeds it
        batch: list[tuple[str, str]] = []
        held: list[list[int]] = [[]]  # the items held up by batch n
        sent: list[Future] = []
        for i, (case, repeat) in enumerate(items):
            plan = plans[i] = self._plan(case, repeat)
            if plan is None:
                continue
            waits = set()
            for key, text in zip(plan.keys, plan.texts, strict=True):
                n = batch_of.get(key)
                if n is None and not self._known(key):
                    n = batch_of[key] = len(sent)
                    batch.append((key, text))
                if n is not None:
                    waits.add(n)
            for n in waits:
                held[n].append(i)
            missing[i] = len(waits)
            if len(batch) >= EMBED_BATCH:
                sent.append(executor.submit(self._embed_batch, batch))
                batch = []
                held.append([])
        if batch:
            sent.append(executor.submit(self._embed_batch, batch))
        return plans, missing, dict(zip(sent, held, strict=False))  # held has one more when the last was full

    def embed_ahead(self, items: list[tuple[dict[str, Any], int]], executor: ThreadPoolExecutor) -> None:
        """Embed every text the semantic layer will need for these items, many texts to a call; the
        judgments then find their vectors in memory."""
        _, _, held = self._send_embeddings(items, executor)
        for future in held:
            future.result()

    def judge_as_embedded(
        self, items: list[tuple[dict[str, Any], int]], executor: ThreadPoolExecutor
    ) -> Iterator[tuple[int, Judgment]]:
        """(index, judgment) of each item, judged in the calling thread as soon as its texts are embedded,
        while the executor's threads wait on the other embedding calls. For a config that calls no judge:
        once its embeddings are in, a judgment is the engine's own arithmetic, on what was planned."""
        assert "behavioral" not in self.cfg.layers
        plans, missing, held = self._send_embeddings(items, executor)

        def judged(ready: list[int]) -> Iterator[tuple[int, Judgment]]:
            started, planned = time.monotonic(), []
            for i in ready:
                if plans[i] is None:
                    yield i, self.judge(*items[i])
                else:
                    planned.append(i)
            tallies = [_Tally() for _ in planned]
            found = self._closest([(plans[i].refs, plans[i].keys, t) for i, t in zip(planned, tallies, strict=True)])
            for i, tally, similarity in zip(planned, tallies, found, strict=True):
                (case, repeat), plan = items[i], plans[i]
                j = self._semantic_judgment(str(case.get("external_id", "")), repeat, similarity, plan.checks, tally)
                yield i, self._finish(j, started, plan.cache_key)

        yield from judged([i for i, left in enumerate(missing) if not left])
        for future in as_completed(held):
            future.result()
            ready = []
            for i in held[future]:
                missing[i] -= 1
                if not missing[i]:
                    ready.append(i)
            yield from judged(ready)

    # ---- the failure chain of one request --------------------------------------------------------

    def _attempts(
        self,
        endpoint: Endpoint,
        *,
        model: str,
        estimate: Callable[[Mapping[str, float]], float],
        tally: _Tally,
        call: Callable[[], Any],
        accept: Callable[[Any], Any],
    ) -> _Attempts:
        """Ask until an answer is accepted: spend reserved first, backoff or Retry-After between tries.

        `call()` makes one HTTP call (its reply has input_tokens and output_tokens) or raises
        ProviderFailure; `accept(reply)` returns the value or raises InvalidOutput, asked again at once.
        """
        with self._refused_lock:
            refused = endpoint in self._refused
        if refused:
            where = f" in {endpoint.key_env}" if endpoint.key_env else ""
            failure = ProviderFailure(KEY_REFUSED, f"the key{where} was refused earlier in this batch", retryable=False)
            return _Attempts(None, None, failure, 0)
        price = self.prices.get(model)
        reply, failure, delay = None, None, 0.0
        attempt = 0
        while attempt < self.cfg.max_attempts:
            if delay > 0:
                time.sleep(delay)
            reserved = 0.0
            if self.spend.cap_usd is not None:
                if price is None:
                    failure = ProviderFailure(
                        "config error", f"a spend cap is set but {model} has no price", retryable=False
                    )
                    break
                reserved = estimate(price)
            if not self.spend.reserve(reserved):
                failure = ProviderFailure(
                    "spend cap", f"the spend cap of ${self.spend.cap_usd:g} is reached", retryable=False
                )
                break
            attempt += 1
            tally.calls += 1
            try:
                reply = call()
            except ProviderFailure as exc:
                self.spend.settle(reserved, 0.0)
                failure = exc
                if exc.category == KEY_REFUSED:
                    with self._refused_lock:
                        self._refused.add(endpoint)
                if not exc.retryable:
                    break
                if exc.retry_after is not None and exc.retry_after > self.retry.max_retry_after_s:
                    failure = ProviderFailure(
                        exc.category,
                        f"{exc.detail}; Retry-After {exc.retry_after:g} s is too long to wait",
                        retryable=False,
                    )
                    break
                delay = exc.retry_after if exc.retry_after is not None else self.retry.backoff(attempt)
                continue
            cost = call_cost(self.prices, model, reply.input_tokens, reply.output_tokens)
            self.spend.settle(reserved, cost)
            tally.add(reply.input_tokens, reply.output_tokens, cost)
            try:
                return _Attempts(accept(reply), reply, None, attempt)
            except InvalidOutput as exc:
                failure, delay = ProviderFailure("invalid output", str(exc), retryable=True), 0.0
        return _Attempts(None, reply, failure, attempt)

    def _ask(self, judge: _Judge, system: str, user: str, tally: _Tally) -> _Asked:
        cfg = self.cfg
        try:
            endpoint = resolve_endpoint(
                provider=judge.provider,
                base_url_env=judge.base_url_env,
                api_key_env=judge.api_key_env,
                env=self.env,
                timeout_s=cfg.timeout_s,
            )
        except ProviderFailure as failure:
            return _Asked(None, "", failure, 0)
        client = self.clients.get(endpoint)
        max_tokens = judge.params.get("max_tokens", DEFAULT_MAX_TOKENS)

        def accept(reply: Any) -> Verdict:
            answer = reply.answer if reply.answer is not None else load_json_object(reply.text)
            return validate_answer(answer, output_kind=cfg.output_kind, pass_score=cfg.pass_score)

        done = self._attempts(
            endpoint,
            model=judge.model,
            estimate=lambda price: _estimate_cost(price, len(system) + len(user), max_tokens),
            tally=tally,
            call=lambda: call_model(
                client,
                endpoint,
                model=judge.model,
                system=system,
                user=user,
                output_kind=cfg.output_kind,
                params=judge.params,
            ),
            accept=accept,
        )
        return _Asked(done.value, done.reply.text if done.reply is not None else "", done.failure, done.attempts)


def _semantic_rule(s: SemanticLayer, outcome: str) -> str:
    """The threshold a semantic verdict met, told in its reason."""
    if outcome == "pass":
        return f">= pass_at {s.pass_at:g}"
    if s.fail_below is not None:
        return f"< fail_below {s.fail_below:g}"
    return f"< pass_at {s.pass_at:g}, and no behavioral judge to decide"


def _contract_shown(checks: list[dict[str, Any]]) -> list[str]:
    # What the contract layer showed, told when a later layer cannot decide.
    return [f"contract passed ({len(checks)} checks)"] if checks else []


def _unavailable(why: str, shown: list[str]) -> str:
    """Why the judge could not answer, and, when earlier layers ran, what they showed."""
    if not shown:
        return why
    return "; ".join([f"behavioral judge unavailable: {why}", *shown])


def _split(total: int, shares: list[float]) -> list[int]:
    """`total` split by `shares` (summing to 1) into integers that add up to it (largest remainder)."""
    exact = [total * share for share in shares]
    parts = [int(x) for x in exact]
    for i in sorted(range(len(exact)), key=lambda i: exact[i] - parts[i], reverse=True)[: total - sum(parts)]:
        parts[i] += 1
    return parts


# ---- entry points ------------------------------------------------------------------------------


def judge_case(
    case: dict[str, Any],
    config: JudgeConfig | dict[str, Any],
    repeat: int,
    *,
    cache: Cache | None = None,
    prices: Prices | None = None,
    spend: SpendTracker | None = None,
    env: Mapping[str, str] = os.environ,
    retry: RetryPolicy | None = None,
    allowed_env: Iterable[str] = (),
    embedding_cache: Cache | None = None,
) -> Judgment:
    """Judge one (case, repeat) under a config. Provider trouble ends in `not_evaluated`, never raises.

    `allowed_env`: environment variable names the operator allows beyond the usual ones (envnames).
    `embedding_cache`: where the semantic layer keeps embeddings (FolderCache, or the app's table).
    """
    engine = Engine(
        config,
        cache=cache,
        prices=prices,
        spend=spend,
        env=env,
        retry=retry,
        allowed_env=allowed_env,
        embedding_cache=embedding_cache,
    )
    try:
        return engine.judge(case, repeat)
    finally:
        engine.close()


def judge_batch(
    items: Iterable[tuple[dict[str, Any], int]],
    config: JudgeConfig | dict[str, Any],
    *,
    concurrency: int,
    cache: Cache | None = None,
    prices: Prices | None = None,
    spend_cap_usd: float | None = None,
    env: Mapping[str, str] = os.environ,
    on_result: Callable[[Judgment], None] | None = None,
    retry: RetryPolicy | None = None,
    allowed_env: Iterable[str] = (),
    embedding_cache: Cache | None = None,
) -> list[Judgment]:
    """Judge (case, repeat) pairs on at most `concurrency` threads; results in the items' order.

    `on_result` is called in the caller's thread as each judgment finishes (so it may use the
    caller's database connection). Once the spend cap is reached, the items still to call a
    provider come back `not_evaluated` with the error "spend cap".
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError("concurrency: must be a positive integer")
    items = list(items)
    engine = Engine(
        config,
        cache=cache,
        prices=prices,
        spend=SpendTracker(spend_cap_usd),
        env=env,
        retry=retry,
        allowed_env=allowed_env,
        embedding_cache=embedding_cache,
    )
    results: list[Judgment | None] = [None] * len(items)
    executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="judge")
    try:
        if "behavioral" in engine.cfg.layers:
            engine.embed_ahead(items, executor)
            futures = {executor.submit(engine.judge, case, repeat): i for i, (case, repeat) in enumerate(items)}
            done = ((futures[future], future.result()) for future in as_completed(futures))
        else:
            done = engine.judge_as_embedded(items, executor)  # no judge to call: no thread needed to judge
        for i, judgment in done:
            results[i] = judgment
            if on_result is not None:
                on_result(judgment)
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
        engine.close()
    return results  # type: ignore[return-value]
