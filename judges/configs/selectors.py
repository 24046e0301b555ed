"""Reads of judge configs for the pages: versions, their runs, the price table, the prompt preview."""

import difflib
import json
from dataclasses import dataclass

from django.db.models import Count, Max, Q, QuerySet

from judges.engine import DEFAULT_PROMPT_TEMPLATE, build_messages, is_pinned_snapshot, references
from judges.engine.prompt import check_prompt_template
from judges.engine.providers import DEFAULT_KEY_ENVS
from judges.models import JudgeConfig, ModelPrice, Run
from judges.runs.services import engine_case
from labeling.models import Case, Dataset, Rubric
from labeling.selectors import policy_newest_versions


def alias_warnings(spec: dict) -> list[str]:
    """A model named by a moving alias can change the gate's verdicts without any config change."""
    warnings = []
    for where, model in (("model", spec.get("model")), ("secondary model", (spec.get("secondary") or {}).get("model"))):
        if model and not is_pinned_snapshot(model):
            warnings.append(
                f"The {where} {model!r} is an alias, not a pinned snapshot: the provider can change what it "
                "answers with, and the verdicts with it. Prefer a dated snapshot."
            )
    return warnings


def key_warnings(spec: dict) -> list[str]:
    """A behavioral judge that names no variable for its key reads the provider's default one, which the
    worker (or CI) may well not have: say so before a run finds out."""
    if "behavioral" not in spec.get("layers", []) or spec.get("api_key_env"):
        return []
    default = DEFAULT_KEY_ENVS.get(spec.get("provider") or "")
    fallback = f"the provider's default {default}" if default else "no key at all"
    return [
        f"This behavioral config names no key variable (api_key_env): its runs use {fallback}. "
        "Name the variable that holds the key where the worker and CI run, e.g. EVALHUB_JUDGE_API_KEY."
    ]


def config_warnings(spec: dict) -> list[str]:
    """What a lead should know about a config before running it: aliases, a missing key variable."""
    return alias_warnings(spec) + key_warnings(spec)


def mark_policy_behind(configs: list[JudgeConfig]) -> list[JudgeConfig]:
    """Set `policy_behind` on each config: the newest version of the policy document it references when
    that is newer than its own (the config is "behind"), else None. One query, none when no config
    references a policy."""
    newest = policy_newest_versions() if any(c.spec.get("policy_ref") for c in configs) else {}
    for config in configs:
        ref = config.spec.get("policy_ref")
        latest = newest.get(ref["slug"]) if ref else None
        config.policy_behind = latest if latest is not None and latest > ref["version"] else None
    return configs


def rubrics_with_configs() -> QuerySet[Rubric]:
    """Every rubric with how many judge config versions and runs it has, and its newest version."""
    return Rubric.objects.annotate(
        config_count=Count("judge_configs", distinct=True),
        newest_version=Max("judge_configs__version", filter=Q(judge_configs__external=False)),
        run_count=Count("judge_configs__runs", distinct=True, filter=Q(judge_configs__runs__parent__isnull=True)),
    ).order_by("slug")


def rubric_configs(*, rubric: Rubric) -> QuerySet[JudgeConfig]:
    """A rubric's config versions, newest first, with their authors and run counts."""
    return (
        JudgeConfig.objects.filter(rubric=rubric)
        .select_related("created_by")
        .annotate(run_count=Count("runs", filter=Q(runs__parent__isnull=True)))  # bias probes are not runs here
        .order_by("-version")
    )


def newest_config(*, rubric: Rubric) -> JudgeConfig | None:
    """The version an edit starts from: the newest one that is not an imported (external) config."""
    return rubric.judge_configs.filter(external=False).order_by("-version").first()


def config_for_page(config_id: int) -> JudgeConfig:
    return (
        JudgeConfig.objects.select_related("rubric", "created_by")
        .annotate(run_count=Count("runs"))
        .get(pk=config_id)
    )


def config_recent_runs(*, config: JudgeConfig, limit: int = 10) -> QuerySet[Run]:
    runs = Run.objects.filter(config=config, parent__isnull=True)  # bias probes show on their parent's report
    return runs.select_related("dataset").order_by("-created_at")[:limit]


def spec_diff(old: dict, new: dict) -> list[tuple[str, str]]:
    """(kind, line) of a unified diff over the pretty JSON of two specs; kind is add, del, hunk or same."""
    a = json.dumps(old, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    b = json.dumps(new, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    lines = []
    for line in difflib.unified_diff(a, b, lineterm="", n=2):
        if line.startswith(("---", "+++")):
            continue
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "same")
        lines.append((kind, line))
    return lines


def prices_for_list() -> QuerySet[ModelPrice]:
    return ModelPrice.objects.select_related("updated_by").order_by("model")


def models_without_price() -> list[str]:
    """Models that saved configs name (primary or secondary) and the price table lacks."""
    named: set[str] = set()
    for spec in JudgeConfig.objects.filter(external=False).values_list("spec", flat=True):
        if spec.get("model"):
            named.add(spec["model"])
        if (spec.get("secondary") or {}).get("model"):
            named.add(spec["secondary"]["model"])
        if (spec.get("semantic") or {}).get("model"):
            named.add(spec["semantic"]["model"])
    priced = set(ModelPrice.objects.filter(model__in=named).values_list("model", flat=True))
    return sorted(named - priced)


@dataclass
class PromptPreview:
    case: Case | None = None
    system: str = ""
    user: str = ""
    error: str = ""
    # The semantic layer's side, when the config has it: its thresholds, and what the answer is compared with.
    semantic: dict | None = None
    references: list[tuple[str, str]] | None = None
    references_error: str = ""
    behavioral: bool = True


def prompt_preview(
    *, dataset: Dataset | None, external_id: str, template: str, criteria: str, policy: str, output_kind: str,
    semantic: dict | None = None, behavioral: bool = True,
) -> PromptPreview:
    """The (system, user) messages the engine would send for one case, built by the engine's own function,
    and, with a `semantic` block, the references the semantic layer compares the answer with.

    Blank `external_id` takes the dataset's first case. Problems (no case, a broken template) come back
    as `error` rather than an exception: the preview is where a lead finds them. The template is checked
    first, exactly as a save checks it: a template the save refuses is never filled in.
    """
    try:
        check_prompt_template(template or DEFAULT_PROMPT_TEMPLATE, behavioral=behavioral)
    except ValueError as exc:
        return PromptPreview(error=f"A save would refuse this template: {exc}")
    if dataset is None:
        return PromptPreview(error="Choose a dataset to preview the prompt with one of its cases.")
    cases = Case.objects.filter(dataset=dataset)
    case = (
        cases.filter(external_id=external_id.strip()).first() if external_id.strip() else cases.order_by("id").first()
    )
    if case is None:
        if external_id.strip():
            return PromptPreview(error=f"The dataset {dataset.slug} has no case {external_id.strip()!r}.")
        return PromptPreview(error=f"The dataset {dataset.slug} has no cases yet.")
    found = PromptPreview(case=case, semantic=semantic, behavioral=behavioral)
    if semantic is not None:
        try:
            found.references = references(engine_case(case))
        except ValueError as exc:
            found.references, found.references_error = [], str(exc)
    if not behavioral:
        return found
    if output_kind not in ("verdict", "scores"):
        output_kind = "verdict"
    try:
        system, user = build_messages(
            engine_case(case), template=template or DEFAULT_PROMPT_TEMPLATE, criteria=criteria, policy=policy,
            output_kind=output_kind,
        )
    except (KeyError, IndexError, ValueError) as exc:
        found.error = f"The prompt template cannot be filled in: {exc!r}"
        return found
    found.system, found.user = system, user
    return found
