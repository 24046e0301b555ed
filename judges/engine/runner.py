"""From (case, judge config, repeat) to a judgment: the layers, the failure chain, cache and spend.

Contract first: a failed check decides `fail` and no model is called. Then the semantic layer: the
answer's embedding against its references', a similarity beyond a threshold decides. Then the
behavioral judge, asked through the SDK with the engine's own retries (chain.py). When the primary
cannot answer, a `fallback` secondary judge is asked; when neither can, the judgment is
`not_evaluated` with the reason and what the earlier layers showed. Nothing here ever guesses a
verdict. Many cases at once go through batch.judge_many.
"""

import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

from .asking import Asking, Judge
from .cache import Cache, cache_key
from .chain import FailureChain, RetryPolicy
from .config import JudgeConfig
from .contract import run_contract_checks
from .embeddings import Embeddings, Plan, Similarity
from .envnames import env_name_refusals
from .judgment import Judgment
from .prompt import build_messages
from .providers import KEY_REFUSED, ClientPool
from .semantic import SemanticLayer, decide, references, texts_to_embed
from .spend import Prices, SpendTracker, Tally

INHERITED_PARAMS = frozenset({"temperature", "max_tokens"})


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
        self.chain = FailureChain(
            max_attempts=self.cfg.max_attempts, spend=self.spend, prices=self.prices, retry=self.retry
        )
        self._asking = Asking(self.cfg, chain=self.chain, clients=self.clients, env=env)
        self.embedding_cache = embedding_cache
        s = self.cfg.semantic
        self.embeddings = (
            Embeddings(
                s, chain=self.chain, clients=self.clients, env=env, timeout_s=self.cfg.timeout_s, cache=embedding_cache
            )
            if s is not None
            else None
        )
        # Formatted once, not in each judgment's reason.
        self._semantic_rules = {o: _semantic_rule(s, o) for o in ("pass", "fail")} if s is not None else {}

    @property
    def calls_judge(self) -> bool:
        """Whether a judgment may ask a behavioral judge (else it is the engine's own arithmetic)."""
        return "behavioral" in self.cfg.layers

    def close(self) -> None:
        self.clients.close()

    # ---- one judgment --------------------------------------------------------------------------

    def _cached(self, key: str | None) -> Judgment | None:
        hit = self.cache.get(key) if key is not None and self.cache is not None else None
        j = Judgment.from_stored(hit) if hit is not None else None  # a partial or mistyped entry is a miss
        return j if j is not None and j.evaluated else None

    def lookup(self, case: dict[str, Any], repeat: int) -> tuple[str | None, Judgment | None]:
        """The item's cache key (None without a cache) and its cached judgment, when the cache has one: a
        hit costs no call and no thread, so a batch answers it where it takes the item."""
        if self.cache is None:
            return None, None
        key = cache_key(case, self.config_hash, repeat)
        j = self._cached(key)
        if j is not None:
            # The same content may sit under another id; this run spent nothing on it.
            j.external_id, j.repeat, j.cached = str(case.get("external_id", "")), repeat, True
            j.provider_calls, j.input_tokens, j.output_tokens, j.cost_usd = 0, 0, 0, 0.0
            j.latency_ms = 0
        return key, j

    def judge(self, case: dict[str, Any], repeat: int) -> Judgment:
        key, hit = self.lookup(case, repeat)
        return hit if hit is not None else self.judge_new(case, repeat, key)

    def judge_new(self, case: dict[str, Any], repeat: int, key: str | None) -> Judgment:
        """Judge an item the cache did not answer (`key` is its cache key from lookup, None without a cache)."""
        started = time.monotonic()
        try:
            j = self._judge(case, repeat)
        except Exception as exc:  # one case's defect must not stop a run, a drift check or CI
            j = _internal_error(case, repeat, exc)
        return self._finish(j, started, key)

    def _finish(self, j: Judgment, started: float, key: str | None) -> Judgment:
        j.latency_ms = int((time.monotonic() - started) * 1000)
        # A second opinion that could not answer is unfinished work, like a not-evaluated primary:
        # cached, it would never be asked again and the case could never become contested.
        if key is not None and self.cache is not None and j.evaluated and j.secondary_outcome != "not_evaluated":
            self.cache.put(key, j.to_dict())
        return j

    def _judge(self, case: dict[str, Any], repeat: int) -> Judgment:
        cfg = self.cfg
        external_id = str(case.get("external_id", ""))
        checks = run_contract_checks(case, cfg) if "contract" in cfg.layers else []
        settled = self._contract_judgment(external_id, repeat, checks)
        if settled is not None:
            return settled
        if self.env_refusals:
            return Judgment(
                external_id,
                repeat,
                "not_evaluated",
                reason="config error: " + "; ".join(self.env_refusals),
                error="config error",
                layer="behavioral" if self.calls_judge else "semantic",
                checks=checks,
            )
        tally = Tally()
        # What the earlier layers showed, told when the judge cannot answer.
        shown = _contract_shown(checks)
        similarity = None
        if self.embeddings is not None:
            found = self.embeddings.similarity(case, tally)
            settled = self._semantic_judgment(external_id, repeat, found, checks, tally)
            if settled is not None:
                return settled
            similarity = found.similarity
            shown.append(
                f"similarity {similarity:.2f}" if similarity is not None else f"semantic layer skipped: {found.why}"
            )
        return self._behavioral_judgment(case, repeat, checks, shown, similarity, tally)

    def _contract_judgment(self, external_id: str, repeat: int, checks: list[dict[str, Any]]) -> Judgment | None:
        """The judgment when the contract layer settles the case: a failed check, or no other layer."""
        failed = [c for c in checks if not c["passed"]]
        if failed:
            reason = "contract failed: " + "; ".join(f"{c['name']}: {c['detail']}" for c in failed)
            return Judgment(external_id, repeat, "fail", reason=reason, layer="contract", checks=checks)
        if self.cfg.layers == ("contract",):
            reason = f"all {len(checks)} contract checks passed"
            return Judgment(external_id, repeat, "pass", reason=reason, layer="contract", checks=checks)
        return None

    def _semantic_judgment(
        self, external_id: str, repeat: int, found: Similarity, checks: list[dict[str, Any]], tally: Tally
    ) -> Judgment | None:
        """The judgment when the semantic layer settles the case: a similarity beyond a threshold, or no
        similarity and no behavioral judge to ask; None when the behavioral judge decides."""
        cfg = self.cfg
        assert cfg.semantic is not None
        if found.similarity is not None:
            outcome = decide(found.similarity, cfg.semantic, behavioral=self.calls_judge)
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
        if self.calls_judge:
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

    def _behavioral_judgment(
        self,
        case: dict[str, Any],
        repeat: int,
        checks: list[dict[str, Any]],
        shown: list[str],
        similarity: float | None,
        tally: Tally,
    ) -> Judgment:
        """The behavioral judge's verdict (the fallback's when the primary cannot answer), or why there is
        none; then the second opinion, when the config asks for one on this case."""
        cfg = self.cfg
        external_id = str(case.get("external_id", ""))
        system, user = build_messages(
            case,
            template=cfg.prompt_template,
            criteria=cfg.criteria,
            policy=cfg.policy,
            output_kind=cfg.output_kind,
        )
        assert cfg.provider is not None and cfg.model is not None
        primary = Judge("primary", cfg.provider, cfg.model, cfg.base_url_env, cfg.api_key_env, cfg.params)
        asked = self._asking.ask(primary, system, user, tally)
        judge, model, reason, raw, error = "primary", primary.model, None, asked.raw, None
        secondary = cfg.secondary
        if (
            asked.verdict is None
            and secondary
            and secondary.role == "fallback"
            # A refused key is the pipeline's to fix: a fallback answering would hide it.
            and asked.failure is not None
            and asked.failure.category not in ("spend cap", KEY_REFUSED)
        ):
            fallback = self._secondary_judge()
            second = self._asking.ask(fallback, system, user, tally)
            judge = "fallback"
            if second.verdict is not None:
                asked, model = second, fallback.model
            else:
                # The primary's failure is the one to fix; the fallback's is told beside it.
                reason = f"primary: {asked.why()}; fallback: {second.why()}"
                raw = second.raw or asked.raw
                if second.failure is not None and second.failure.category == KEY_REFUSED:
                    error = KEY_REFUSED  # whichever key was refused, the run says so
        if asked.verdict is None:
            assert asked.failure is not None
            j = Judgment(
                external_id,
                repeat,
                "not_evaluated",
                reason=_unavailable(reason or asked.why(), shown),
                raw_output=raw,
                error=error or asked.failure.category,
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
        second_opinion = secondary if secondary is not None and secondary.role == "second_opinion" else None
        if second_opinion is not None and second_opinion.asks_on(case, verdict.scores or {}, pass_score=cfg.pass_score):
            second = self._asking.ask(self._secondary_judge(), system, user, tally)
            if second.verdict is None:
                j.secondary_outcome = "not_evaluated"
            else:
                j.secondary_outcome = second.verdict.outcome
                # The primary's verdict stands; a disagreement is flagged for a human to look at.
                j.contested = second.verdict.outcome != verdict.outcome
        return tally.fill(j)

    def _secondary_judge(self) -> Judge:
        s = self.cfg.secondary
        assert s is not None
        # Without params of its own, the secondary judges as coolly and briefly as the primary; the
        # primary's other params may be vendor-specific, so they stay behind.
        params = s.params or {k: v for k, v in self.cfg.params.items() if k in INHERITED_PARAMS}
        return Judge(s.role, s.provider, s.model, s.base_url_env, s.api_key_env, params)

    # ---- many judgments whose embeddings are in (batch.judge_many) ---------------------------------

    def plan(self, case: dict[str, Any], repeat: int, key: str | None) -> Plan | None:
        """What the semantic layer needs of an item the cache did not answer (`key`: its cache key from
        lookup), or None when it needs no embedding: no semantic layer, a contract check fails, the case
        has no reference or no answer, a refused variable, or working it out raised (judge_new() tells,
        and says why)."""
        if self.embeddings is None or self.env_refusals:
            return None
        try:
            return self._plan(case, repeat, key)
        except Exception:  # judge_new() meets the same error and makes it the judgment's
            return None

    def _plan(self, case: dict[str, Any], repeat: int, key: str | None) -> Plan | None:
        assert self.embeddings is not None
        checks = run_contract_checks(case, self.cfg) if "contract" in self.cfg.layers else []
        if not all(c["passed"] for c in checks):
            return None
        texts = texts_to_embed(case)
        if not texts:
            return None
        return Plan(checks, references(case), texts, [self.embeddings.key(text) for text in texts], key)

    def judge_planned(self, planned: list[tuple[dict[str, Any], int, Plan]]) -> list[Judgment]:
        """Judge (case, repeat, plan) items of a config that calls no judge, once their texts are embedded:
        their similarities taken together, each judgment the engine's own arithmetic."""
        assert self.embeddings is not None and not self.calls_judge
        started = time.monotonic()
        tallies = [Tally() for _ in planned]
        found = self.embeddings.closest(
            [(plan.refs, plan.keys, tally) for (_, _, plan), tally in zip(planned, tallies, strict=True)]
        )
        judged = []
        for (case, repeat, plan), tally, similarity in zip(planned, tallies, found, strict=True):
            j = self._semantic_judgment(str(case.get("external_id", "")), repeat, similarity, plan.checks, tally)
            assert j is not None  # with no judge to ask, the semantic layer always settles
            judged.append(self._finish(j, started, plan.cache_key))
        return judged


def _internal_error(case: dict[str, Any], repeat: int, exc: Exception) -> Judgment:
    """A judgment for a case whose judging raised: not evaluated, saying what went wrong (bounded: the
    message may quote the case)."""
    why = f"{type(exc).__name__}: {exc}"
    why = why if len(why) <= 300 else why[:297] + "..."
    return Judgment(
        str(case.get("external_id", "")),
        repeat,
        "not_evaluated",
        reason=f"internal error while judging this case: {why}",
        error="internal error",
    )


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

    `allowed_env`: environment variable names the operator allows beyond the built-in ones (envnames).
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
