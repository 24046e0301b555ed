"""config_hash now covers the NAMES of the environment variables a config reads (never their values).

Rewrites the stored hash of every config that names one (a config naming none keeps its hash), the
cache keys its judgments were cached under (they embed the hash), and the CI results that name the
old hash of exactly one config. Gate configs exported before this must be exported again: the CI
command refuses a judge whose config_hash does not match its content.
"""

import hashlib
import json

from django.db import migrations

from judges.engine import JudgeConfig as EngineConfig
from judges.engine import cache_key
from judges.engine.cache import CASE_CONTENT_FIELDS
from judges.engine.config import HASHED_ONLY_WHEN_SET

BATCH = 1000


def _old_hash(spec: dict) -> str:
    """The hash as it was before: without the env names, whatever their value."""
    env_names = ("base_url_env", "api_key_env")
    payload = {
        k: v
        for k, v in EngineConfig.from_dict(spec).to_dict().items()
        if k not in env_names and not (k in HASHED_ONLY_WHEN_SET and v == HASHED_ONLY_WHEN_SET[k])
    }
    if payload["secondary"] is not None:
        payload["secondary"] = {k: v for k, v in payload["secondary"].items() if k not in env_names}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _new_hash(spec: dict) -> str:
    return EngineConfig.from_dict(spec).config_hash


def _rehash(apps, compute) -> None:
    JudgeConfig = apps.get_model("judges", "JudgeConfig")
    Judgment = apps.get_model("judges", "Judgment")
    CachedJudgment = apps.get_model("judges", "CachedJudgment")
    CiResult = apps.get_model("judges", "CiResult")
    renamed: dict[tuple[int, str], set[str]] = {}
    for config in JudgeConfig.objects.filter(external=False).order_by("pk").iterator():
        try:
            new = compute(config.spec)
        except ValueError:
            continue  # not an engine config: nothing hashes it
        old = config.config_hash
        if new == old:
            continue
        renamed.setdefault((config.rubric_id, old), set()).add(new)
        JudgeConfig.objects.filter(pk=config.pk).update(config_hash=new)
        # The cache entries of this config's work: one per (case content, repeat) it judged.
        keys: dict[str, str] = {}
        judgments = Judgment.objects.filter(run__config_id=config.pk).select_related("case").order_by("pk")
        for j in judgments.iterator(chunk_size=BATCH):
            case = j.variant or {name: getattr(j.case, name) for name in CASE_CONTENT_FIELDS}
            keys[cache_key(case, old, j.repeat)] = cache_key(case, new, j.repeat)
        old_keys = list(keys)
        for i in range(0, len(old_keys), BATCH):
            for entry in CachedJudgment.objects.filter(key__in=old_keys[i : i + BATCH]):
                if not CachedJudgment.objects.filter(key=keys[entry.key]).exists():
                    CachedJudgment.objects.filter(pk=entry.pk).update(key=keys[entry.key])
    for (rubric_id, old), news in renamed.items():
        if len(news) == 1:  # two configs once shared the hash: which one CI ran cannot be told
            CiResult.objects.filter(rubric_id=rubric_id, config_hash=old).update(config_hash=news.pop())


def forwards(apps, schema_editor) -> None:
    _rehash(apps, _new_hash)


def backwards(apps, schema_editor) -> None:
    _rehash(apps, _old_hash)


class Migration(migrations.Migration):
    dependencies = [
        ("judges", "0003_probes"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
