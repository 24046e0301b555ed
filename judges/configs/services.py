"""Writes of judge configs: a new immutable version per edit."""


from django.conf import settings
from django.db import transaction
from django.db.models import Max

from judges.engine import JudgeConfig as EngineConfig
from judges.engine import env_name_refusals
from judges.models import JudgeConfig, ModelPrice
from labeling.models import Rubric


def engine_prices() -> dict[str, dict[str, float]]:
    return {price.model: price.as_engine_price() for price in ModelPrice.objects.all()}


class EnvNamesRefused(ValueError):
    """The config names environment variables a judge may not read; one message per variable."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("; ".join(messages))
        self.messages = messages


def judge_config_save(*, rubric: Rubric, spec: dict, by, note: str = "", external: bool = False) -> JudgeConfig:
    """Validate `spec` with the engine and save it as the rubric's next version.

    The rubric's slug and current criteria are copied in: a config keeps the criteria it was saved
    with. Saving what the newest version already says returns that version instead of a duplicate.
    Raises ValueError (naming the field) when the engine refuses the spec, EnvNamesRefused when it
    names a variable a judge may not read (settings.EVALHUB_JUDGE_ENV_ALLOW adds allowed names).
    """
    spec = {**spec, "rubric": rubric.slug, "criteria": rubric.criteria}
    spec.pop("config_hash", None)
    engine_config = EngineConfig.from_dict(spec)
    refusals = env_name_refusals(engine_config, extra_allowed=settings.EVALHUB_JUDGE_ENV_ALLOW)
    if refusals:
        raise EnvNamesRefused(refusals)
    with transaction.atomic():
        Rubric.objects.select_for_update().filter(pk=rubric.pk).first()  # serialise version numbers
        newest = rubric.judge_configs.filter(external=external).order_by("-version").first()
        if newest is not None and newest.config_hash == engine_config.config_hash:
            return newest
        version = (rubric.judge_configs.aggregate(v=Max("version"))["v"] or 0) + 1
        return JudgeConfig.objects.create(
            rubric=rubric,
            version=version,
            spec=engine_config.to_dict(),
            config_hash=engine_config.config_hash,
            external=external,
            note=note,
            created_by=by,
        )
