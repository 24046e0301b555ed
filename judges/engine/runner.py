"""From (case, judge config, repeat) to a judgment: the layers, the failure chain, cache and spend.

Contract first: a failed check decides `fail` and no model is called. Then the semantic layer: the
answer's embedding against its references', a similarity beyond a threshold decides. Then the
behavioral judge, asked through the SDK with the engine's own retries (chain.py). When the primary
cannot answer, the `fallback` is asked; when neither can, the judgment is `not_evaluated` with the
reason and what the earlier layers showed. Then the escalation step (escalation.py): a second opinion
when drawn, and the adjudicator where the two disagree. Nothing here ever guesses a verdict. Many cases at once go through batch.judge_many.
"""

import os
import time
from collections.abc import Collection, Iterable, Mapping
from functools import cached_property
from typing import Any

from .asking import Asking, Judge
from .cache import Cache, cache_key, case_content_key, content_cache_key, judge_cache_key
from .chain import FailureChain, RetryPolicy
from .config import JudgeConfig
from .contract import run_contract_checks
from .embeddings import Embeddings, Plan, Similarity
from .envnames import env_name_refusals
from .escalation import JudgeSpec, disagree
from .judgment import Judgment
from .prompt import build_messages
from .providers import KEY_REFUSED, ClientPool, load_sdks
from .semantic import SemanticLayer, answer_and_references, decide, references
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
        cache_salt: str = "",
        sampled: Collection[str] | None = None,
    ) -> None:
        self.cfg = JudgeConfig.from_dict(config)
        # A fresh run's salt: its judgments are cached under keys of its own (cache.cache_key).
        self.cache_salt = cache_salt
        # The external ids drawn for the second opinion's `sample` mode (escalation.rotating_sample in the
        # app, ranked_sample in CI); None draws by the fixed salted hash of the id.
        self.sampled = sampled
        # Checked again here, whoever saved the config: a judge reads no variable it may not.
        self.env_refusals = env_name_refusals(self.cfg, extra_allowed=allowed_env)
        self.config_hash = self.cfg.config_hash
        # The cache's keys: the config's hash, and the rules of its contract layer (cache.cache_scope).
        self.cache_scope = self.cfg.cache_scope
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

    @cached_property
    def _providers(self) -> set[str]:
        """The providers of every judge this config may ask (primary, fallback, second opinion, adjudicator)."""
        specs = [self.cfg, self.cfg.fallback_judge, self.cfg.second_opinion_judge, self.cfg.adjudicator]
        return {str(spec.provider) for spec in specs if spec is not None and spec.provider}

    @property
    def time_limit_s(self) -> float:
        """The longest a judgment of this config may take before a batch with time limits gives up on it: every
        judge it may ask (primary, fallback, second opinion, adjudicator, embeddings), each attempt its whole
        timeout and the longest pause a provider may ask for between attempts, then a minute to spare."""
        cfg = self.cfg
        judges = 1 + sum(j is not None for j in (cfg.fallback, cfg.second_opinion_judge, cfg.adjudicator, cfg.semantic))
        per_attempt = cfg.timeout_s + self.retry.max_retry_after_s
        return judges * cfg.max_attempts * per_attempt + 60.0

    @property
    def calls_judge(self) -> bool:
        """Whether a judgment may ask a behavioral judge (else it is the engine's own arithmetic)."""
        return "behavioral" in self.cfg.layers

    def close(self) -> None:
        self.clients.close()

    # ---- one judgment --------------------------------------------------------------------------

    def cache_key(self, case: dict[str, Any], repeat: int) -> str | None:
        """The key this engine caches (case, repeat) under; None without a cache."""
        return cache_key(case, self.cache_scope, repeat, self.cache_salt) if self.cache is not None else None

    def cache_keys(self, case: dict[str, Any], repeats: Iterable[int]) -> list[str | None]:
        """`cache_key` of each of the repeats, the case's content hashed once."""
        if self.cache is None:
            return [None for _ in repeats]
        content = case_content_key(case)
        return [content_cache_key(content, self.cache_scope, repeat, self.cache_salt) for repeat in repeats]

    def _cached(self, key: str | None) -> Judgment | None:
        hit = self.cache.get(key) if key is not None and self.cache is not None else None
        j = Judgment.from_stored(hit) if hit is not None else None  # a partial or mistyped entry is a miss
        return j if j is not None and j.evaluated else None

    def lookup(
        self, case: dict[str, Any], repeat: int, key: str | None = None
    ) -> tuple[str | None, Judgment | None, Judgment | None]:
        """(key, answered, pending) for an item: its cache key (None without a cache); its judgment when the
        cache answers it whole (a cached verdict whose second opinion is not drawn: no call, no thread, so a
        batch answers it where it takes the item); else, when the primary's verdict is cached but a second
        opinion is drawn (it may need a call), that cached verdict, for judge_new to finish on the pool.
        `key`: the item's cache_key when the caller worked it out already."""
        if self.cache is None:
            return None, None, None
        if key is None:
            key = self.cache_key(case, repeat)
        j = self._cached(key)
        if j is None:
            return key, None, None
        # The same content may sit under another id; this run spent nothing on it.
        j.external_id, j.repeat, j.cached = str(case.get("external_id", "")), repeat, True
        j.provider_calls, j.input_tokens, j.output_tokens, j.cost_usd = 0, 0, 0, 0.0
        j.calls_by_judge, j.cost_by_judge = {}, {}
        j.latency_ms = 0
        if self._second_opinion_drawn(case, j):
            return key, None, j
        j.secondary_outcome, j.contested, j.opinions = None, False, None
        return key, j, None

    def judge(self, case: dict[str, Any], repeat: int) -> Judgment:
        """The case's judgment: the primary's verdict (or the fallback's), from the cache or asked; then the
        escalation step. Each judge's verdict is cached under its own key, so whether a second opinion is
        drawn is decided after the cache lookup, and a cached primary verdict still gets one when drawn."""
        key, answered, pending = self.lookup(case, repeat)
        return answered if answered is not None else self.judge_new(case, repeat, key, pending)

    def judge_new(
        self, case: dict[str, Any], repeat: int, key: str | None, cached: Judgment | None = None
    ) -> Judgment:
        """Judge an item the cache did not answer whole (`key`: its cache key from lookup, None without a
        cache; `cached`: lookup's pending primary verdict, whose drawn second opinion is still to come)."""
        if self.calls_judge:
            load_sdks(self._providers)
        started = time.monotonic()
        earlier: str | None = None
        if cached is not None:
            j = cached
            # An entry from before each judge had its own key carries the second opinion's verdict: kept for
            # when the case is drawn again and its own key has none.
            earlier, j.secondary_outcome, j.contested, j.opinions = j.secondary_outcome, None, False, None
        else:
            try:
                j = self._judge(case, repeat)
            except Exception as exc:  # one case's defect must not stop a run, a drift check or CI
                j = _internal_error(case, repeat, exc)
            self._finish(j, started, key)
        try:
            self._escalate(case, j, key, earlier)
        except Exception as exc:  # the primary's verdict stands; the case is marked for a human
            j.secondary_outcome = "not_evaluated"
            j.reason += f" (second opinion: internal error: {type(exc).__name__})"
        if j.cached or j.opinions is not None:
            j.latency_ms = int((time.monotonic() - started) * 1000)
        return j

    def _finish(self, j: Judgment, started: float, key: str | None) -> Judgment:
        j.latency_ms = int((time.monotonic() - started) * 1000)
        if key is not None and self.cache is not None and j.evaluated:
            self.cache.put(key, j.to_dict())
        return j

    # ---- the escalation step: second opinion, then the adjudicator -----------------------------------

    def _escalate(self, case: dict[str, Any], j: Judgment, key: str | None, earlier: str | None = None) -> None:
        """Ask the second opinion when drawn; where it disagrees the judgment is contested, and the
        adjudicator's verdict, when there is one and it answers, becomes the judgment's."""
        cfg = self.cfg
        second = cfg.second_opinion_judge
        if second is None or not self._second_opinion_drawn(case, j):
            return
        system, user = self._messages(case)
        first = {"model": j.model, "outcome": j.outcome, "scores": j.scores, "reason": j.reason}
        opinion = self._opinion("second_opinion", second, system, user, key, j, earlier)
        j.opinions = {j.judge: first, "second_opinion": opinion}
        j.secondary_outcome = opinion["outcome"]
        if opinion["outcome"] == "not_evaluated":
            return
        if second.legacy:  # today's rule for a legacy `secondary`: the verdicts differ
            j.contested = opinion["outcome"] != j.outcome
        else:
            j.contested = disagree(
                j.outcome, j.scores, opinion["outcome"], opinion["scores"], pass_score=cfg.pass_score
            )
        if not j.contested or cfg.adjudicator is None:
            return  # the primary's verdict stands; a disagreement is flagged for a human to look at
        decided = self._opinion("adjudicator", cfg.adjudicator, system, user, key, j)
        j.opinions["adjudicator"] = decided
        if decided["outcome"] != "not_evaluated":
            j.outcome, j.scores, j.reason = decided["outcome"], decided["scores"], decided["reason"]
            j.model, j.judge = decided["model"], "adjudicator"

    def _second_opinion_drawn(self, case: dict[str, Any], j: Judgment) -> bool:
        """Whether the escalation step asks a second opinion on this verdict."""
        cfg = self.cfg
        second = cfg.second_opinion_judge
        if second is None or j.layer != "behavioral" or not j.evaluated:
            return False
        pass_at = cfg.semantic.pass_at if cfg.semantic is not None else None
        return second.asks_on(
            case, j.scores, j.similarity, pass_score=cfg.pass_score, pass_at=pass_at, sampled=self.sampled
        )

    def _opinion(
        self, role: str, spec: JudgeSpec, system: str, user: str, key: str | None, j: Judgment,
        earlier: str | None = None,
    ) -> dict[str, Any]:
        """One more judge's verdict on the case, from the cache (its own key, else `earlier`: the outcome an older
        cache entry of the primary carried) or asked; its calls and cost are added to the judgment's, and
        counted under its role."""
        own_key = judge_cache_key(key, role) if key is not None else None
        hit = self.cache.get(own_key) if own_key is not None and self.cache is not None else None
        if hit is None and earlier in ("pass", "fail"):
            hit = {"model": spec.model, "outcome": earlier, "scores": None, "reason": "(cached before its reason was kept)"}
        stored = _stored_opinion(hit)
        if stored is not None:
            j.stand_in = j.stand_in or (isinstance(hit, dict) and hit.get("stand_in") is True)
            return stored | {"cached": True}
        tally = Tally()
        asked = self._asking.ask(self._judge_of(role, spec), system, user, tally)
        opinion: dict[str, Any]
        if asked.verdict is None:
            opinion = {"model": spec.model, "outcome": "not_evaluated", "scores": None, "reason": asked.why()}
        else:
            verdict = asked.verdict
            opinion = {"model": spec.model, "outcome": verdict.outcome, "scores": verdict.scores,
                       "reason": verdict.reason}
            if own_key is not None and self.cache is not None:
                # Where the answer came from is kept with it, so a cached opinion still says so.
                self.cache.put(own_key, opinion | {"stand_in": True} if tally.stand_in else opinion)
        j.provider_calls += tally.calls
        j.input_tokens += tally.input_tokens
        j.output_tokens += tally.output_tokens
        j.cost_usd = None if j.cost_usd is None or tally.cost is None else j.cost_usd + tally.cost
        j.calls_by_judge[role] = tally.calls
        j.cost_by_judge[role] = tally.cost
        j.stand_in = j.stand_in or tally.stand_in
        return opinion | {"cached": False}

    def _messages(self, case: dict[str, Any]) -> tuple[str, str]:
        cfg = self.cfg
        return build_messages(
            case, template=cfg.prompt_template, criteria=cfg.criteria, policy=cfg.policy, output_kind=cfg.output_kind,
            guidance=cfg.guidance, examples=cfg.examples,
        )

    def _judge_of(self, role: str, spec: JudgeSpec) -> Judge:
        # Without params of its own, another judge judges as coolly and briefly as the primary; the
        # primary's other params may be vendor-specific, so they stay behind.
        params = spec.params or {k: v for k, v in self.cfg.params.items() if k in INHERITED_PARAMS}
        return Judge(role, spec.provider, spec.model, spec.base_url_env, spec.api_key_env, params)

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
        none. The second opinion and the adjudicator come after, in judge() (_escalate)."""
        cfg = self.cfg
        external_id = str(case.get("external_id", ""))
        system, user = self._messages(case)
        assert cfg.provider is not None and cfg.model is not None
        primary = Judge("primary", cfg.provider, cfg.model, cfg.base_url_env, cfg.api_key_env, cfg.params)
        calls_by_judge: dict[str, int] = {"embeddings": tally.calls} if tally.calls else {}
        cost_by_judge: dict[str, float | None] = {"embeddings": tally.cost} if tally.calls else {}
        before_calls, before_cost = tally.calls, tally.cost
        asked = self._asking.ask(primary, system, user, tally)
        calls_by_judge["primary"] = tally.calls - before_calls
        cost_by_judge["primary"] = _spent(before_cost, tally.cost)
        judge, model, reason, raw, error = "primary", primary.model, None, asked.raw, None
        fallback_spec = cfg.fallback_judge
        if (
            asked.verdict is None
            and fallback_spec is not None
            # A refused key is the pipeline's to fix: a fallback answering would hide it.
            and asked.failure is not None
            and asked.failure.category not in ("spend cap", KEY_REFUSED)
        ):
            before_calls, before_cost = tally.calls, tally.cost
            second = self._asking.ask(self._judge_of("fallback", fallback_spec), system, user, tally)
            calls_by_judge["fallback"] = tally.calls - before_calls
            cost_by_judge["fallback"] = _spent(before_cost, tally.cost)
            judge = "fallback"
            if second.verdict is not None:
                asked, model = second, fallback_spec.model
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
                calls_by_judge=calls_by_judge,
                cost_by_judge=cost_by_judge,
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
            calls_by_judge=calls_by_judge,
            cost_by_judge=cost_by_judge,
        )
        return tally.fill(j)

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
        refs = references(case)  # a ValueError: plan() returns None, judge_new() tells why
        texts = answer_and_references(case, refs)
        if not texts:
            return None
        return Plan(checks, refs, texts, [self.embeddings.key(text) for text in texts], key)

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


def _spent(before: float | None, after: float | None) -> float | None:
    """What a tally's cost grew by; None once a model used has no price."""
    return None if before is None or after is None else after - before


def _stored_opinion(hit: Any) -> dict[str, Any] | None:
    """A cached second opinion's or adjudicator's verdict, or None unless it has the shape one is put in (a
    cache is data from outside: anything else is a miss)."""
    if not isinstance(hit, dict) or hit.get("outcome") not in ("pass", "fail"):
        return None
    model, scores, reason = hit.get("model"), hit.get("scores"), hit.get("reason")
    if not isinstance(model, str) or not isinstance(reason, str):
        return None
    if scores is not None and not (
        isinstance(scores, dict) and all(isinstance(v, int) and not isinstance(v, bool) for v in scores.values())
    ):
        return None
    return {"model": model, "outcome": hit["outcome"], "scores": scores, "reason": reason}


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
