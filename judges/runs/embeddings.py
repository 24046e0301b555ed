"""The semantic layer's embeddings in the database (CachedEmbedding), for one window of a run's work.

The engine's threads make no database call: each chunk's embeddings are read before its cases are judged
and the new ones written as the window records its results, like the judgment cache.
"""

import threading
from typing import Any

from django.utils import timezone

from judges.engine import JudgeConfig as EngineConfig
from judges.engine import MemoryCache, embedding_key
from judges.engine.semantic import texts_to_embed
from judges.models import CachedEmbedding
from judges.runs.bulk import copy_rows, jsonb


class StoredEmbeddings(MemoryCache):
    """A window's embeddings as stored, remembering the ones the engine adds until they are saved."""

    def __init__(self) -> None:
        super().__init__(copies=False)
        self._new: dict[str, Any] = {}
        self._new_lock = threading.Lock()

    def preload(self, stored: dict[str, list[float]]) -> None:
        for key, vector in stored.items():
            super().put(key, {"vector": vector})

    def put(self, key: str, value: dict) -> None:
        # Kept only until saved: the engine keeps what it embedded itself, and asks the cache only for
        # what it has not seen (a window's memory does not grow by a vector a text twice over).
        with self._new_lock:
            self._new[key] = value["vector"]

    def take_new(self) -> dict[str, list[float]]:
        with self._new_lock:
            new, self._new = self._new, {}
        # The engine puts arrays; the JSON column keeps lists (made here, off the engine's threads).
        return {key: vector.tolist() if hasattr(vector, "tolist") else vector for key, vector in new.items()}


def stored_vectors(*, config: EngineConfig, cases: list[dict]) -> dict[str, list[float]]:
    """The stored embeddings of every text the cases' semantic layer needs (none without the layer)."""
    s = config.semantic
    if s is None:
        return {}
    keys = {
        embedding_key(provider=s.provider, model=s.model, dimensions=s.dimensions, text=text)
        for case in cases
        for text in texts_to_embed(case)
    }
    return dict(CachedEmbedding.objects.filter(key__in=keys).values_list("key", "vector"))


def embeddings_save(*, embeddings: StoredEmbeddings | None) -> None:
    new = embeddings.take_new() if embeddings is not None else {}
    if new:
        now = timezone.now()
        copy_rows(CachedEmbedding, ("key", "vector", "created_at"),
                  ((key, jsonb(vector), now) for key, vector in new.items()), ignore_conflicts=True)
