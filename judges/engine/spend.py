"""What judging costs: prices, one judgment's tally of calls and tokens, and a batch's spend cap."""

import threading
from collections.abc import Mapping

from .judgment import Judgment

Prices = Mapping[str, Mapping[str, float]]


class SpendTracker:
    """Money spent by a batch, checked before each provider call against an optional cap.

    A call reserves its estimated cost first (prompt length and the max_tokens bound) and settles
    the real cost after. Once a reservation is refused the cap counts as reached for good, so the
    rest of the batch stops rather than squeezing in whatever small call still fits.

    Every provider call starts with a reservation (judges.engine.chain), so `calls_started` counts the calls
    made, whether or not their judgments are ever recorded: a worker compares it with what it recorded to know
    the calls a kill would leave uncounted (judges.runs.worker).
    """

    def __init__(self, cap_usd: float | None = None) -> None:
        if cap_usd is not None and cap_usd < 0:
            raise ValueError("spend cap: must not be negative")
        self.cap_usd = cap_usd
        self.spent_usd = 0.0
        self._reserved = 0.0
        self.reached = False
        self.calls_started = 0
        self._lock = threading.Lock()

    def reserve(self, estimate: float) -> bool:
        with self._lock:
            if self.cap_usd is not None and (self.reached or self.spent_usd + self._reserved + estimate > self.cap_usd):
                self.reached = True
                return False
            self._reserved += estimate
            self.calls_started += 1
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


def estimate_cost(price: Mapping[str, float], prompt_chars: int, max_tokens: int) -> float:
    # ~4 characters a token in English; 3 errs on the side of stopping early.
    return (prompt_chars / 3 * price["input_per_mtok"] + max_tokens * price["output_per_mtok"]) / 1_000_000


class Tally:
    """What one judgment's calls used, over every attempt and every judge asked."""

    __slots__ = ("calls", "input_tokens", "output_tokens", "cost", "stand_in")

    def __init__(self) -> None:
        self.calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost: float | None = 0.0
        self.stand_in = False  # an answer taken came from the scripted stand-in

    def add(self, input_tokens: int | None, output_tokens: int | None, cost: float | None) -> None:
        self.input_tokens += input_tokens or 0
        self.output_tokens += output_tokens or 0
        self.cost = None if cost is None or self.cost is None else self.cost + cost

    def fill(self, j: Judgment) -> Judgment:
        j.provider_calls = self.calls
        j.input_tokens = self.input_tokens
        j.output_tokens = self.output_tokens
        j.cost_usd = self.cost
        j.stand_in = j.stand_in or self.stand_in
        return j
