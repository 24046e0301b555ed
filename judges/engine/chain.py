"""The failure chain of one request: spend reserved first, backoff or Retry-After between tries, an
invalid answer asked again at once, and a key the provider refused not tried again in the batch."""

import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .providers import KEY_REFUSED, Endpoint, ProviderFailure
from .spend import Prices, SpendTracker, Tally, call_cost
from .validation import InvalidOutput


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


@dataclass
class Attempts:
    """How one request's failure chain ended: the accepted value, or the last failure."""

    value: Any
    reply: Any  # the last reply that came back, accepted or not
    failure: ProviderFailure | None
    attempts: int


class FailureChain:
    """Asks one request until an answer is accepted, for the threads of one batch."""

    def __init__(self, *, max_attempts: int, spend: SpendTracker, prices: Prices, retry: RetryPolicy) -> None:
        self.max_attempts = max_attempts
        self.spend = spend
        self.prices = prices
        self.retry = retry
        # Endpoints whose key the provider refused: the rest of the batch does not ask with it again.
        self._refused: set[Endpoint] = set()
        self._refused_lock = threading.Lock()

    def ask(
        self,
        endpoint: Endpoint,
        *,
        model: str,
        estimate: Callable[[Mapping[str, float]], float],
        tally: Tally,
        call: Callable[[], Any],
        accept: Callable[[Any], Any],
    ) -> Attempts:
        """`call()` makes one HTTP call (its reply has input_tokens and output_tokens) or raises
        ProviderFailure; `accept(reply)` returns the value or raises InvalidOutput, asked again at once."""
        with self._refused_lock:
            refused = endpoint in self._refused
        if refused:
            where = f" in {endpoint.key_env}" if endpoint.key_env else ""
            refusal = ProviderFailure(KEY_REFUSED, f"the key{where} was refused earlier in this batch", retryable=False)
            return Attempts(None, None, refusal, 0)
        price = self.prices.get(model)
        reply: Any = None
        failure: ProviderFailure | None = None
        delay = 0.0
        attempt = 0
        while attempt < self.max_attempts:
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
            tally.stand_in = tally.stand_in or bool(getattr(reply, "stand_in", False))
            try:
                return Attempts(accept(reply), reply, None, attempt)
            except InvalidOutput as exc:
                failure, delay = ProviderFailure("invalid output", str(exc), retryable=True), 0.0
        return Attempts(None, reply, failure, attempt)
