"""CachedEmbedding keeps a vector as float64 bytes: migration 0019 converts the JSON lists stored before,
so the engine still finds them (nothing is embedded again), and drops what was never a vector."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from judges.engine import JudgeConfig as EngineConfig
from judges.engine import embedding_key
from judges.runs.embeddings import stored_vectors, vector_bytes, vector_from_bytes
from tests.judges.helpers import semantic_spec

BEFORE = [("judges", "0018_judge_proposals")]
AFTER = [("judges", "0019_cachedembedding_vector_bytes")]


def _migrate(to):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(to)
    return executor.loader.project_state(to).apps


@pytest.mark.django_db(transaction=True)
def test_vectors_stored_as_json_are_read_after_the_migration():
    config = EngineConfig.from_dict({"rubric": "r", "criteria": "c", **semantic_spec()})
    s = config.semantic
    key = embedding_key(provider=s.provider, model=s.model, dimensions=s.dimensions, text="the answer")
    try:
        old = _migrate(BEFORE).get_model("judges", "CachedEmbedding")
        old.objects.create(key=key, vector=[0.1, -2.5, 1e-300])
        old.objects.create(key="b" * 64, vector=["not", "numbers"])
        old.objects.create(key="c" * 64, vector=[])
        _migrate(AFTER)
        # On to today's tables, where the install's entries became its one project's (migration 0022).
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
        from judges.models import CachedEmbedding

        [(stored_key, project_id)] = CachedEmbedding.objects.values_list("key", "project_id")
        assert stored_key == key
        cases = [{"output": "the answer", "golden_answer": "a reference"}]
        [vector] = stored_vectors(config=config, cases=cases, project_id=project_id).values()
        assert vector.tolist() == [0.1, -2.5, 1e-300]  # the same float64 numbers, not rounded
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


def test_bytes_that_are_no_whole_number_of_floats_are_a_miss():
    assert vector_from_bytes(vector_bytes([1.5, 2.0])[:-1]) is None
    assert vector_from_bytes(memoryview(vector_bytes([1.5, 2.0]))).tolist() == [1.5, 2.0]
