"""The semantic layer's embeddings in the database (CachedEmbedding), for one chunk of a run.

The engine's threads make no database call: a chunk's embeddings are read before it is judged and
the new ones written after, like the judgment cache.
"""

from judges.engine import JudgeConfig as EngineConfig
from judges.engine import MemoryCache, embedding_key
from judges.engine.semantic import texts_to_embed
from judges.models import CachedEmbedding


class StoredEmbeddings(MemoryCache):
    """The chunk's embeddings as stored, remembering the ones the engine adds."""

    def __init__(self, stored: dict[str, list[float]]) -> None:
        super().__init__(copies=False)
        for key, vector in stored.items():
            super().put(key, {"vector": vector})
        self.new: dict[str, list[float]] = {}

    def put(self, key: str, value: dict) -> None:
        super().put(key, value)
        self.new[key] = value["vector"]


def stored_embeddings(*, config: EngineConfig, cases: list[dict]) -> StoredEmbeddings | None:
    """The stored embeddings of every text the cases' semantic layer needs; None without the layer."""
    s = config.semantic
    if s is None:
        return None
    keys = {
        embedding_key(provider=s.provider, model=s.model, dimensions=s.dimensions, text=text)
        for case in cases
        for text in texts_to_embed(case)
    }
    return StoredEmbeddings(dict(CachedEmbedding.objects.filter(key__in=keys).values_list("key", "vector")))


def embeddings_save(*, embeddings: StoredEmbeddings | None) -> None:
    if embeddings is not None and embeddings.new:
        CachedEmbedding.objects.bulk_create(
            [CachedEmbedding(key=key, vector=vector) for key, vector in embeddings.new.items()],
            ignore_conflicts=True,
            batch_size=500,
        )
