"""The semantic layer's embeddings in one batch's memory: which texts are known, embedding the rest many
to a call, and the answer's closest reference once its texts are in.

A text is embedded once per batch (and once ever with an embedding cache), whatever case, repeat or
config needs it. What an embedding cost is billed to the first judgment that takes it, so a run's
totals add up however many cases share a reference.

Memory does not grow with the batch: a vector is kept while an item waiting to be judged holds its text
(`hold`, `release`), then among the last KEPT_DONE vectors no item holds, the most recently used; older ones
are dropped. A text many cases share (a golden answer, a rubric's references) is held or used again before
it is dropped; one that comes back later is read from the embedding cache when there is one.
"""

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .cache import Cache
from .chain import Attempts, FailureChain
from .providers import ClientPool, Embedded, ProviderFailure, call_embeddings, resolve_endpoint
from .semantic import EMBED_BATCH, SemanticLayer, cosine_of_units, embedding_key, references, unit, unit_rows
from .spend import Tally
from .validation import InvalidOutput

__all__ = ["EMBED_BATCH", "KEPT_DONE", "Embeddings", "Plan", "Similarity"]

# Vectors kept once no item holds their text: a text that comes back within about this many texts of its last
# use is not embedded (nor read from the cache) again. 2048 vectors of 256 floats are 4 MB.
KEPT_DONE = 2048


@dataclass(slots=True)
class Embedding:
    """One text's embedding, or why there is none, and what making it cost until a judgment takes it.

    Only the vector scaled to length 1 is kept (the cosine needs no more): the vector as it came goes to the
    embedding cache and is not held for the rest of the batch."""

    unit: Any  # numpy array, or None when the call failed
    failure: ProviderFailure | None = None
    attempts: int = 0
    calls: int = 0
    input_tokens: int = 0
    cost: float | None = 0.0
    stand_in: bool = False  # made by the scripted stand-in (judges.engine.providers.STAND_IN_HEADER)


@dataclass(slots=True)
class Similarity:
    """What the semantic layer found: the highest similarity and its reference, or why there is none."""

    similarity: float | None
    closest: str = ""
    why: str = ""
    error: str = ""


@dataclass(slots=True)
class Plan:
    """What the semantic layer needs of one (case, repeat), worked out once while its texts are sent."""

    checks: list[dict[str, Any]]
    refs: list[tuple[str, str]]
    texts: list[str]  # the answer, then each reference
    keys: list[str]  # their embedding keys
    cache_key: str | None  # the judgment's, when there is a judgment cache


class Embeddings:
    """The embeddings one engine's semantic layer has in memory, shared by the threads of a batch."""

    def __init__(
        self,
        layer: SemanticLayer,
        *,
        chain: FailureChain,
        clients: ClientPool,
        env: Mapping[str, str],
        timeout_s: float,
        cache: Cache | None,
    ) -> None:
        self.layer = layer
        self.chain = chain
        self.clients = clients
        self.env = env
        self.timeout_s = timeout_s
        self.cache = cache
        self._memory: dict[str, Embedding] = {}
        self._holders: dict[str, int] = {}  # key -> items that hold it (hold) and have not released it
        self._done: OrderedDict[str, None] = OrderedDict()  # keys in memory no item holds, least recent first
        self._lock = threading.Lock()
        self._keys: dict[str, str] = {}

    def key(self, text: str) -> str:
        key = self._keys.get(text)
        if key is None:  # a text's key is asked for again and again (ahead, then by each repeat)
            s = self.layer
            key = embedding_key(provider=s.provider, model=s.model, dimensions=s.dimensions, text=text)
            if len(self._keys) >= KEPT_DONE:  # bounded like the vectors; the recent ones are made again
                self._keys.clear()
            self._keys[text] = key
        return key

    def hold(self, keys: list[str]) -> None:
        """An item will take these keys' embeddings: they stay in memory until it releases them."""
        with self._lock:
            for key in keys:
                self._holders[key] = self._holders.get(key, 0) + 1
                self._done.pop(key, None)

    def release(self, keys: list[str]) -> None:
        """An item that held these keys is judged (or dropped): what no item holds may now be dropped."""
        with self._lock:
            for key in keys:
                left = self._holders[key] - 1
                if left:
                    self._holders[key] = left
                    continue
                del self._holders[key]
                if key in self._memory:
                    self._done[key] = None
                    self._done.move_to_end(key)
            self._drop_the_oldest()

    def in_memory(self) -> int:
        """How many embeddings are in memory (held, or among the KEPT_DONE kept)."""
        return len(self._memory)

    def _drop_the_oldest(self) -> None:
        while len(self._done) > KEPT_DONE:
            key, _ = self._done.popitem(last=False)
            del self._memory[key]

    def known(self, key: str) -> bool:
        """Whether the text's embedding is in memory, or in the embedding cache (then kept in memory)."""
        if key in self._memory:
            return True
        hit = self.cache.get(key) if self.cache is not None else None
        try:
            vector = None if hit is None else np.asarray(hit.get("vector"), dtype=np.float64)
        except (TypeError, ValueError):  # not numbers
            vector = None
        if vector is None or vector.ndim != 1 or not vector.size or not np.isfinite(vector).all():
            return False  # a damaged entry is a miss: the text is embedded again
        with self._lock:
            if key not in self._memory:
                self._memory[key] = Embedding(unit(vector))
                self._kept_unless_held([key])
        return True

    def similarity(self, case: dict[str, Any], tally: Tally) -> Similarity:
        """The answer's highest cosine similarity to a reference, embedding what is not known yet."""
        try:
            refs = references(case)
        except ValueError as exc:
            return Similarity(None, why=f"no reference: {exc}", error="no reference")
        if not refs:
            why = "no reference: the case has no golden answer and no metadata.references"
            return Similarity(None, why=why, error="no reference")
        answer = str(case.get("output") or "")
        if not answer.strip():
            return Similarity(0.0, closest=refs[0][0])  # no answer shares no meaning; nothing to embed
        texts = [answer, *(text for _, text in refs)]
        keys = [self.key(text) for text in texts]
        self.hold(keys)
        try:
            unknown = list({key: text for key, text in zip(keys, texts, strict=True) if not self.known(key)}.items())
            for i in range(0, len(unknown), EMBED_BATCH):
                self.embed(unknown[i : i + EMBED_BATCH])
            return self.closest([(refs, keys, tally)])[0]
        finally:
            self.release(keys)

    def closest(self, cases: list[tuple[list[tuple[str, str]], list[str], Tally]]) -> list[Similarity]:
        """For each case's (references, keys, tally): the answer's (the first key's text) highest similarity
        to a reference (the other keys'), once every text is embedded or has failed. Many cases at once,
        their embeddings taken under one lock."""
        found = []
        for (refs, _, _), entries in zip(cases, self._take(cases), strict=True):
            failed = next((e for e in entries if e.failure is not None), None)
            if failed is not None and failed.failure is not None:
                tries = f" (after {failed.attempts} attempts)" if failed.attempts > 1 else ""
                why = f"embeddings unavailable: {failed.failure.category}: {failed.failure.detail}{tries}"
                found.append(Similarity(None, why=why, error=failed.failure.category))
                continue
            answer, best, closest = entries[0].unit, -1.0, refs[0][0]
            try:
                for (where, _), entry in zip(refs, entries[1:], strict=True):
                    similarity = cosine_of_units(answer, entry.unit)
                    if similarity > best:  # the first of equals counts
                        best, closest = similarity, where
            except ValueError as exc:  # a cached vector of another model, say: no cosine to take
                found.append(Similarity(None, why=f"embeddings unavailable: {exc}", error="invalid output"))
                continue
            # Rounded before deciding, so the stored similarity replays to the same verdict.
            found.append(Similarity(round(best, 4), closest=closest))
        return found

    def embed(self, batch: list[tuple[str, str]]) -> None:
        """Embed these (key, text) in one request (its failure chain), keeping each vector or the failure."""
        s = self.layer
        tally = Tally()
        inputs = [text for _, text in batch]
        try:
            endpoint = resolve_endpoint(
                provider=s.provider,
                base_url_env=s.base_url_env,
                api_key_env=s.api_key_env,
                env=self.env,
                timeout_s=self.timeout_s,
            )
        except ProviderFailure as failure:
            done = Attempts(None, None, failure, 0)
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

            done = self.chain.ask(
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
        # Each row an array of its own: a row kept longer than the others must not keep the whole call's.
        units = None if done.value is None else [row.copy() for row in unit_rows(done.value)]
        entries = {}
        for i, (key, text) in enumerate(batch):
            share = len(text) / total_chars
            entries[key] = Embedding(
                None if units is None else units[i],
                failure=done.failure,
                attempts=done.attempts,
                calls=tally.calls if i == 0 else 0,
                input_tokens=shares[i],
                cost=None if tally.cost is None else tally.cost * share,
                stand_in=tally.stand_in,
            )
        with self._lock:
            self._memory.update(entries)
            self._kept_unless_held(entries)
        if done.value is not None and self.cache is not None:
            for (key, _), vector in zip(batch, done.value, strict=True):
                self.cache.put(key, {"vector": vector})  # an array: a store that writes text lists it

    def _kept_unless_held(self, keys: Iterable[str]) -> None:
        """(Under the lock.) Keys just put in memory: those no item holds (its items were dropped, say) go
        with the kept ones."""
        for key in keys:
            if key not in self._holders:
                self._done[key] = None
        self._drop_the_oldest()

    def _take(self, cases: list[tuple[Any, list[str], Tally]]) -> list[list[Embedding]]:
        """Each case's embeddings (by its keys); what an embedding cost goes on the tally of the first
        judgment that takes it."""
        taken = []
        with self._lock:
            for _, keys, tally in cases:
                entries = [self._memory[key] for key in keys]
                for entry in entries:
                    tally.stand_in = tally.stand_in or entry.stand_in  # every judgment that uses it rests on it
                    if entry.calls or entry.input_tokens or entry.cost != 0.0:
                        tally.calls += entry.calls
                        tally.add(entry.input_tokens, 0, entry.cost)
                        entry.calls, entry.input_tokens, entry.cost = 0, 0, 0.0
                taken.append(entries)
        return taken


def _split(total: int, shares: list[float]) -> list[int]:
    """`total` split by `shares` (summing to 1) into integers that add up to it (largest remainder)."""
    exact = [total * share for share in shares]
    parts = [int(x) for x in exact]
    for i in sorted(range(len(exact)), key=lambda i: exact[i] - parts[i], reverse=True)[: total - sum(parts)]:
        parts[i] += 1
    return parts
