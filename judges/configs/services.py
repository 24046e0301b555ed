"""Writes of judge configs: a new immutable version per edit."""


from django.conf import settings
from django.db import transaction
from django.db.models import Max

from judges.engine import JudgeConfig as EngineConfig
from judges.engine import env_name_refusals
from judges.models import JudgeConfig, ModelPrice, Tier
from labeling.models import PolicyDocument, Rubric


def engine_prices() -> dict[str, dict[str, float]]:
    return {price.model: price.as_engine_price() for price in ModelPrice.objects.all()}


class EnvNamesRefused(ValueError):
    """The config names environment variables a judge may not read; one message per variable."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("; ".join(messages))
        self.messages = messages


def with_policy(spec: dict, *, project_id: int) -> dict:
    """The spec with the referenced policy document version's text and sha256 copied in (docs/words.md, "Judge config"),
    so CI and the prompt preview have them and the hash covers them; a spec without `policy_ref`
    is returned as it is. The policy is the project's own (a slug names a policy within its project only).
    Raises ValueError naming policy_ref when the project has no such version."""
    ref = spec.get("policy_ref")
    if ref is None:
        return {**spec, "policy_sha256": None}
    if not isinstance(ref, dict) or not isinstance(ref.get("slug"), str) or not isinstance(ref.get("version"), int):
        raise ValueError("policy_ref: expected {slug, version}")
    policy = PolicyDocument.objects.filter(project_id=project_id, slug=ref["slug"], version=ref["version"]).first()
    if policy is None:
        raise ValueError(f"policy_ref: there is no policy {ref['slug']!r} v{ref['version']}")
    return {**spec, "policy": policy.text, "policy_sha256": policy.sha256}


def judge_config_save(
    *, rubric: Rubric, spec: dict, by, note: str = "", external: bool = False, tier: str = Tier.DEFAULT,
    proposed: bool = False,
) -> JudgeConfig:
    """Validate `spec` with the engine and save it as the rubric's next version, of `tier`.

    The rubric's slug and current criteria are copied in: a config keeps the criteria it was saved
    with; so is the text of the policy document version it references (`with_policy`). Saving what
    the newest version of its tier already says returns that version instead of a duplicate. The tier is not
    in the spec, so not hashed; versions are numbered across the rubric's tiers.
    Raises ValueError (naming the field) when the engine refuses the spec, EnvNamesRefused when it
    names a variable a judge may not read (settings.EVALHUB_JUDGE_ENV_ALLOW adds allowed names).
    `proposed` saves a judge improvement's candidate (docs/improving.md): never the newest until kept.
    """
    if tier not in Tier.values:
        raise ValueError(f"tier: expected one of {', '.join(Tier.values)}, got {tier!r}")
    spec = with_policy({**spec, "rubric": rubric.slug, "criteria": rubric.criteria}, project_id=rubric.project_id)
    spec.pop("config_hash", None)
    engine_config = EngineConfig.from_dict(spec)
    refusals = env_name_refusals(engine_config, extra_allowed=settings.EVALHUB_JUDGE_ENV_ALLOW)
    if refusals:
        raise EnvNamesRefused(refusals)
    with transaction.atomic():
        Rubric.objects.select_for_update().filter(pk=rubric.pk).first()  # serialise version numbers
        if external:
            same_kind = JudgeConfig.objects.filter(rubric=rubric, external=True, tier=tier)
        elif proposed:
            same_kind = JudgeConfig.objects.filter(rubric=rubric, proposal="proposed", tier=tier)
        else:
            same_kind = JudgeConfig.objects.filter(rubric=rubric).kept_of_tier(tier)
        newest = same_kind.order_by("-version").first()
        if newest is not None and newest.config_hash == engine_config.config_hash:
            return newest
        version = (rubric.judge_configs.aggregate(v=Max("version"))["v"] or 0) + 1
        return JudgeConfig.objects.create(
            rubric=rubric,
            version=version,
            spec=engine_config.to_dict(),
            config_hash=engine_config.config_hash,
            external=external,
            tier=tier,
            proposal="proposed" if proposed else "",
            note=note,
            created_by=by,
        )
