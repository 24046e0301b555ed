"""Migration 0004: config_hash covers the env names; stored hashes, cache keys and CI results follow."""

import importlib

import pytest
from django.apps import apps

from judges.configs.cases import engine_case
from judges.engine import JudgeConfig as EngineConfig
from judges.engine import cache_key
from judges.models import CachedJudgment, CiResult, JudgeConfig, Judgment, Run
from tests.judges.helpers import CONTRACT_SPEC, behavioral_spec, make_cases

migration = importlib.import_module("judges.migrations.0004_config_hash_covers_env_names")


def old_config(rubric, lead, version, spec) -> JudgeConfig:
    spec = EngineConfig.from_dict({**spec, "rubric": rubric.slug, "criteria": rubric.criteria}).to_dict()
    return JudgeConfig.objects.create(
        rubric=rubric, version=version, spec=spec, config_hash=migration._old_hash(spec), created_by=lead
    )


@pytest.mark.django_db
def test_it_rewrites_hashes_cache_keys_and_ci_results(rubric, dataset, lead):
    behavioral = old_config(rubric, lead, 1, behavioral_spec())
    contract = old_config(rubric, lead, 2, CONTRACT_SPEC)
    old_hash, contract_hash = behavioral.config_hash, contract.config_hash
    case = make_cases(dataset, 2)[1]
    run = Run.objects.create(config=behavioral, dataset=dataset, created_by=lead)
    Judgment.objects.create(run=run, case=case, repeat=1, outcome="pass")
    old_key = cache_key(engine_case(case), old_hash, 1)
    CachedJudgment.objects.create(project=dataset.project, key=old_key, judgment={"outcome": "pass"})
    ci = CiResult.objects.create(
        rubric=rubric, config_hash=old_hash, stage="gate", outcome="pass", passed=1, failed=0, not_evaluated=0,
        total=1, exit_code=0, token_name="ci",
    )

    migration.forwards(apps, None)

    behavioral.refresh_from_db()
    contract.refresh_from_db()
    new_hash = EngineConfig.from_dict(behavioral.spec).config_hash
    assert behavioral.config_hash == new_hash != old_hash
    assert contract.config_hash == contract_hash  # names no variable: its hash (and gate config) stand
    assert list(CachedJudgment.objects.values_list("key", flat=True)) == [cache_key(engine_case(case), new_hash, 1)]
    ci.refresh_from_db()
    assert ci.config_hash == new_hash

    migration.backwards(apps, None)

    behavioral.refresh_from_db()
    assert behavioral.config_hash == old_hash
    assert list(CachedJudgment.objects.values_list("key", flat=True)) == [old_key]
