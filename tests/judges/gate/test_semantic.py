"""The semantic layer in CI: the gate config ships the embeddings model's price, the CI command runs the
layer through the stand-in, keeps embeddings in its cache folder's embeddings/, and refuses (exit 2) a
check whose embeddings variable is not set."""

from decimal import Decimal

import pytest

from judges.configs import services as config_services
from judges.engine import FolderCache
from judges.gate import cli as gate_cli
from judges.models import ModelPrice
from judges.promotion.gate_config import gate_config
from judges.promotion.services import rubric_promote, rubric_thresholds_change
from tests.conftest import store_project
from tests.judges.gate.test_cli import GOOD, case, gate_rubric, run, workdir, write_config, write_outputs
from tests.judges.promotion_factories import REASON, evidence_run

CACHE_KEY = b"a test cache key, 32 bytes long!!"  # the gate step's secret (FolderCache signs with it)

__all__ = ["workdir"]  # the fixture, shared with the CI command's own tests

EMBEDDING_MODEL = "text-embedding-3-small"
SEMANTIC = {
    "provider": "openai-compatible", "model": EMBEDDING_MODEL, "base_url_env": "EVALHUB_JUDGE_OPENAI_URL",
    "api_key_env": "EVALHUB_JUDGE_API_KEY", "pass_at": 0.6,
}
GOLDEN = "Returns are accepted within 30 days of delivery."  # the answers say "Yes, " first


def semantic_rubric(**semantic) -> dict:
    rubric = gate_rubric(layers=["semantic"], semantic={**SEMANTIC, **semantic}, provider=None, model=None,
                         base_url_env=None, api_key_env=None, params={})
    rubric["prices"][EMBEDDING_MODEL] = {"input_per_mtok": 0.02, "output_per_mtok": 0.0}
    return rubric


def with_golden(cases: list[dict]) -> list[dict]:
    return [{**c, "golden_answer": GOLDEN} for c in cases]


@pytest.mark.django_db
def test_the_gate_config_ships_the_embeddings_models_price(rubric, dataset, lead, reviewer):
    for model, price in (("gpt-4o-mini-2024-07-18", "0.15"), (EMBEDDING_MODEL, "0.02")):
        ModelPrice.objects.create(model=model, input_per_mtok=Decimal(price), output_per_mtok=Decimal(0),
                                  updated_by=lead)
    spec = {
        "layers": ["semantic", "behavioral"], "semantic": SEMANTIC, "provider": "openai",
        "model": "gpt-4o-mini-2024-07-18", "base_url_env": "EVALHUB_JUDGE_OPENAI_URL",
        "api_key_env": "EVALHUB_JUDGE_API_KEY",
    }
    config = config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)
    run_ = evidence_run(rubric, dataset, lead, reviewer, config=config)
    # OpenAI's embeddings models have no dated snapshot: the lead turns the pinned rule off, audited.
    rubric_thresholds_change(rubric=rubric, reason="text-embedding-3-small has no dated snapshot.", by=lead,
                             require_pinned_models=False)
    rubric_promote(rubric=rubric, to_stage="observe", run=run_, reason=REASON, by=lead)
    [entry] = gate_config(project=store_project())["rubrics"]
    assert entry["judge"]["semantic"]["model"] == EMBEDDING_MODEL
    assert entry["prices"][EMBEDDING_MODEL] == {"input_per_mtok": 0.02, "output_per_mtok": 0.0}


def test_the_ci_command_decides_by_similarity(workdir, fake_provider, capsys):
    cases = with_golden([*GOOD, case("bad-1", "We sell gift cards in three colours.")])
    assert run(workdir, [semantic_rubric()], cases) == 1
    out = capsys.readouterr().out
    assert "bad-1" in out
    assert fake_provider.stats()["by_endpoint"] == {"embeddings": 1}  # one call embeds every answer


def test_the_cache_folder_keeps_embeddings_for_another_config(workdir, fake_provider):
    outputs = write_outputs(workdir / "outputs.jsonl", with_golden(GOOD))
    cache = workdir / "cache"
    for pass_at in (0.6, 0.7):  # another config_hash: the judgment cache cannot answer, the embeddings can
        config = write_config(workdir / "gates.json", semantic_rubric(pass_at=pass_at))
        assert gate_cli.main(["check", "--config", config, "--outputs", outputs, "--cache-dir", str(cache)]) == 0
    assert fake_provider.stats()["by_endpoint"] == {"embeddings": 1}
    assert len(FolderCache(cache / "embeddings", key=CACHE_KEY)) == 2  # the shared answer and the golden answer


def test_it_exits_2_when_the_embeddings_variable_is_unset(workdir, fake_provider, capsys, monkeypatch):
    monkeypatch.delenv("EVALHUB_JUDGE_OPENAI_URL")
    assert run(workdir, [semantic_rubric()], with_golden(GOOD)) == 2
    assert "EVALHUB_JUDGE_OPENAI_URL is not set" in capsys.readouterr().err
    assert fake_provider.stats()["total"] == 0
