"""The semantic layer's embeddings in the database (CachedEmbedding), for one window of a run's work.

The engine's threads make no database call: each chunk's embeddings are read before its cases are judged
and the new ones written as the window records its results, like the judgment cache, and like it kept per project
(docs/projects.md): a project never reads another's. A vector is stored as its numbers' little-endian float64 bytes
(`vector_bytes`), exactly the numbers the engine had.
"""

import threading
from typing import Any

import numpy as np
from django.utils import timezone

from judges.engine import JudgeConfig as EngineConfig
from judges.engine import MemoryCache, embedding_key
from judges.engine.semantic import texts_to_embed
from judges.models import CachedEmbedding
from judges.runs.bulk import copy_rows

VECTOR_DTYPE = "<f8"


def vector_bytes(vector: Any) -> bytes:
    """A vector as CachedEmbedding.vector stores it."""
    return np.asarray(vector, dtype=VECTOR_DTYPE).tobytes()


def vector_from_bytes(stored: bytes | memoryview) -> np.ndarray | None:
    """A stored vector, or None when the bytes are no whole number of float64s (a damaged entry: a miss)."""
    if len(stored) % 8:
        return None
    return np.frombuffer(stored, dtype=VECTOR_DTYPE)


class StoredEmbeddings(MemoryCache):
    """A window's embeddings as stored for the group of chunks it is taking, and the ones the engine adds
    until they are saved."""

    def __init__(self) -> None:
        super().__init__(copies=False)
        self._new: dict[str, Any] = {}
        self._new_lock = threading.Lock()

    def preload(self, stored: dict[str, np.ndarray]) -> None:
        """The next group's stored vectors, in place of the last group's: the engine asks for a text's as its
        item is taken, and every item of the last group was (a window's memory does not grow with the run)."""
        with self._lock:
            self._data = {key: {"vector": vector} for key, vector in stored.items()}

    def get(self, key: str) -> dict | None:
        # The engine keeps what it embedded while it is in use, not for the whole window: a text that comes back
        # before it is saved is found here.
        with self._new_lock:
            new = self._new.get(key)
        return {"vector": new} if new is not None else super().get(key)

    def put(self, key: str, value: dict) -> None:
        # Kept only until saved: then the table has it, and the next group's preload reads it if needed.
        with self._new_lock:
            self._new[key] = value["vector"]

    def take_new(self) -> dict[str, Any]:
        with self._new_lock:
            new, self._new = self._new, {}
        return new


def stored_vectors(*, config: EngineConfig, cases: list[dict], project_id: int) -> dict[str, np.ndarray]:
    """The project's stored embeddings of every text the cases' semantic layer needs (none without the layer)."""
    s = config.semantic
    if s is None:
        return {}
    keys = {
        embedding_key(provider=s.provider, model=s.model, dimensions=s.dimensions, text=text)
        for case in cases
        for text in texts_to_embed(case)
    }
    stored = CachedEmbedding.objects.filter(project_id=project_id, key__among=keys).values_list("key", "vector")
    vectors = ((key, vector_from_bytes(vector)) for key, vector in stored)
    return {key: vector for key, vector in vectors if vector is not None}


def embeddings_save(*, embeddings: StoredEmbeddings | None, project_id: int) -> None:
    """Store the embeddings the window's engine made since the last save, as the project's."""
    new = embeddings.take_new() if embeddings is not None else {}
    if new:
        now = timezone.now()
        copy_rows(CachedEmbedding, ("project_id", "key", "vector", "created_at"),
                  ((project_id, key, vector_bytes(vector), now) for key, vector in new.items()), ignore_conflicts=True)
