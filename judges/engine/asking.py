"""Asking one judge model for a verdict: its endpoint and client, the request through the failure
chain, and the answer validated against the config's output kind."""

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .chain import FailureChain
from .config import JudgeConfig
from .providers import DEFAULT_MAX_TOKENS, ClientPool, ProviderFailure, call_model, resolve_endpoint
from .spend import Tally, estimate_cost
from .validation import Verdict, load_json_object, validate_answer


@dataclass(frozen=True)
class Judge:
    role: str  # primary | fallback | second_opinion
    provider: str
    model: str
    base_url_env: str | None
    api_key_env: str | None
    params: dict[str, Any]


@dataclass
class Asked:
    verdict: Verdict | None
    raw: str
    failure: ProviderFailure | None
    attempts: int

    def why(self) -> str:
        assert self.failure is not None
        tries = f" (after {self.attempts} attempts)" if self.attempts > 1 else ""
        return f"{self.failure.category}: {self.failure.detail}{tries}"


class Asking:
    """How one engine asks its judges: its config's output kind, timeout and pass score."""

    def __init__(
        self, cfg: JudgeConfig, *, chain: FailureChain, clients: ClientPool, env: Mapping[str, str] = os.environ
    ) -> None:
        self.cfg = cfg
        self.chain = chain
        self.clients = clients
        self.env = env

    def ask(self, judge: Judge, system: str, user: str, tally: Tally) -> Asked:
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
            return Asked(None, "", failure, 0)
        client = self.clients.get(endpoint)
        max_tokens = judge.params.get("max_tokens", DEFAULT_MAX_TOKENS)

        def accept(reply: Any) -> Verdict:
            answer = reply.answer if reply.answer is not None else load_json_object(reply.text)
            return validate_answer(answer, output_kind=cfg.output_kind, pass_score=cfg.pass_score)

        done = self.chain.ask(
            endpoint,
            model=judge.model,
            estimate=lambda price: estimate_cost(price, len(system) + len(user), max_tokens),
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
        return Asked(done.value, done.reply.text if done.reply is not None else "", done.failure, done.attempts)
