"""Reads of judge configs for the pages: versions, their runs, the price table, the prompt preview."""

import difflib
import json
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Max, Q, QuerySet

from evalhub.models import Project
from evalhub.params import object_id
from judges.configs.cases import engine_case
from judges.engine import DEFAULT_PROMPT_TEMPLATE, build_messages, is_pinned_snapshot, references
from judges.engine.prompt import check_prompt_template
from judges.engine.providers import DEFAULT_KEY_ENVS
from judges.models import JudgeConfig, ModelPrice, Run, Tier
from labeling.models import Case, Dataset, Label, Rubric
from labeling.policies.selectors import policy_newest_versions

# The judges beside the primary, by the spec's field and how a page names them.
OTHER_JUDGES = (
    ("secondary", "secondary model"), ("fallback", "fallback"), ("second_opinion", "second opinion"),
    ("adjudicator", "adjudicator"),
)


def judge_models(spec: dict) -> list[tuple[str, str]]:
    """(how a page names it, model) of every judge model the spec names: the primary's, then the others'."""
    named = [("model", spec.get("model"))]
    named += [(where, (spec.get(part) or {}).get("model")) for part, where in OTHER_JUDGES]
    return [(where, model) for where, model in named if model]


def alias_warnings(spec: dict) -> list[str]:
    """A model named by a moving alias can change the gate's verdicts without any config change."""
    warnings = []
    for where, model in judge_models(spec):
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


def adjudicator_warnings(spec: dict) -> list[str]:
    """The adjudicator decides where two judges disagree: one cheaper than either (by the price table, the
    only measure of strength the app has) is likely the weaker model, and its word the less trustworthy."""
    adjudicator = (spec.get("adjudicator") or {}).get("model")
    if not adjudicator:
        return []
    judges = [spec.get("model"), (spec.get("second_opinion") or {}).get("model")]
    prices = {p.model: p.input_per_mtok + p.output_per_mtok
              for p in ModelPrice.objects.filter(model__in=[adjudicator, *judges])}
    if adjudicator not in prices:
        return [f"The adjudicator {adjudicator!r} has no price, so whether it is stronger than the judges it decides "
                "between cannot be told: add its price."]
    cheaper_than = [m for m in judges if m in prices and prices[adjudicator] < prices[m]]
    if not cheaper_than:
        return []
    return [f"The adjudicator {adjudicator!r} costs less than {', '.join(repr(m) for m in cheaper_than)} by the price "
            "table: it is likely the weaker model, yet its verdict decides where the two judges disagree."]


def config_warnings(spec: dict) -> list[str]:
    """What a lead should know about a config before running it: aliases, a missing key variable, a weaker
    adjudicator."""
    return alias_warnings(spec) + key_warnings(spec) + adjudicator_warnings(spec)


def mark_policy_behind(configs: list[JudgeConfig], *, project: Project) -> list[JudgeConfig]:
    """Set `policy_behind` on each config (of `project`'s rubrics): the newest version of the project's policy
    document it references when that is newer than its own (the config is "behind"), else None. One query, none
    when no config references a policy."""
    wanted = any(c.spec.get("policy_ref") for c in configs)
    newest = policy_newest_versions(project_ids={project.pk}).get(project.pk, {}) if wanted else {}
    for config in configs:
        ref = config.spec.get("policy_ref")
        latest = newest.get(ref["slug"]) if ref else None
        config.policy_behind = latest if latest is not None and latest > ref["version"] else None
    return configs


def rubrics_with_configs(*, project: Project) -> QuerySet[Rubric]:
    """Every rubric of the project with how many judge config versions and runs it has, and its newest version."""
    return project.rubrics.annotate(
        config_count=Count("judge_configs", distinct=True),
        newest_version=Max("judge_configs__version",
                           filter=Q(judge_configs__external=False, judge_configs__proposal="",
                                    judge_configs__tier=Tier.DEFAULT)),
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


def newest_config(*, rubric: Rubric, tier: str = Tier.DEFAULT) -> JudgeConfig | None:
    """The newest kept version of a tier (JudgeConfigQuerySet.kept_of_tier): what an edit of that tier starts from,
    and the one a promotion or renewal of that tier needs a run of."""
    return JudgeConfig.objects.filter(rubric=rubric).kept_of_tier(tier).first()


def config_for_page(config_id: int, *, project: Project) -> JudgeConfig:
    """The config of the page, through its rubric's project: another project's config does not exist here."""
    return (
        JudgeConfig.objects.filter(rubric__project=project).select_related("rubric", "created_by")
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


def models_without_price(*, projects: QuerySet[Project] | None) -> list[str]:
    """Models that saved configs of `projects` name (every judge's, the embeddings') and the price table lacks;
    `projects` None: every project's (the instance admin's view). A lead sees only the models of the projects they
    lead: the table is the instance's, the configs are each project's own."""
    configs = JudgeConfig.objects.filter(external=False)
    if projects is not None:
        configs = configs.filter(rubric__project__in=projects)
    named: set[str] = set()
    for spec in configs.values_list("spec", flat=True):
        named.update(model for _, model in judge_models(spec))
        if (spec.get("semantic") or {}).get("model"):
            named.add(spec["semantic"]["model"])
    priced = set(ModelPrice.objects.filter(model__in=named).values_list("model", flat=True))
    return sorted(named - priced)


def preview_default_dataset(*, rubric: Rubric) -> Dataset | None:
    """The dataset of the rubric's project the preview starts on: the one the rubric's newest run judged, else one
    its reviewers labeled, else the first by slug. (A rubric is tied to no dataset; these are the ones it has met.)"""
    run = (Run.objects.filter(config__rubric=rubric, dataset__project_id=rubric.project_id, parent__isnull=True)
           .select_related("dataset").first())
    if run is not None:
        return run.dataset
    labeled = Label.objects.filter(rubric=rubric, dataset__isnull=False).order_by("-updated_at").values("dataset")[:1]
    datasets = Dataset.objects.filter(project_id=rubric.project_id)  # a rubric meets its own project's datasets only
    return datasets.filter(pk__in=labeled).first() or datasets.order_by("slug").first()


# Cases the picker lists at once: enough to choose among, few enough to stay beside the preview.
PICKER_CASES = 8


@dataclass
class CasePicker:
    """The preview's case picker: the chosen case first, then the dataset's cases matching the search."""

    search: str = ""
    cases: list[Case] = field(default_factory=list)
    chosen_id: int | None = None
    matched: bool = False  # some case matches the search (the chosen one is listed either way)
    more: int = 0  # matching cases not listed


def case_picker(*, dataset: Dataset | None, search: str, chosen: Case | None) -> CasePicker:
    """Up to PICKER_CASES cases of `dataset` whose external_id or input contains `search`, in dataset order;
    the chosen case is always listed (first when the search leaves it out), so it stays chosen."""
    search = search.strip()
    picker = CasePicker(search=search, chosen_id=chosen.pk if chosen else None)
    if dataset is None:
        return picker
    matching = Case.objects.filter(dataset=dataset).only("id", "external_id", "input", "category")
    if search:
        matching = matching.filter(Q(external_id__icontains=search) | Q(input__icontains=search))
    listed = list(matching.order_by("id")[: PICKER_CASES + 1])
    picker.matched = bool(listed)
    if len(listed) > PICKER_CASES:
        picker.more = matching.count() - PICKER_CASES
        listed = listed[:PICKER_CASES]
    if chosen is not None and all(case.pk != chosen.pk for case in listed):
        listed = [chosen, *listed[: PICKER_CASES - 1]]
    picker.cases = listed
    return picker


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
    examples_error: str = ""  # why the editor's examples, as typed, are left out of the preview
    behavioral: bool = True
    # Who is sent this same prompt: (who, model, when), the primary first (judges_sent).
    judges: list[tuple[str, str, str]] = field(default_factory=list)


def judges_sent(spec: dict) -> list[tuple[str, str, str]]:
    """(who, model, when) of each judge a spec sends the prompt to: the primary, the fallback, the second opinion
    (its modes) and the adjudicator; an older `secondary` as the one it names."""
    if not spec.get("model"):
        return []
    parts = {role: spec.get(role) or {} for role in ("fallback", "second_opinion", "adjudicator")}
    secondary = spec.get("secondary") or {}
    if secondary.get("model"):
        parts[secondary.get("role") or "fallback"] = secondary
    modes = parts["second_opinion"].get("when") or [{"mode": "always"}]
    if isinstance(modes, dict):  # an older `secondary`'s one mode
        modes = [modes]
    described = ", ".join(
        str(w.get("mode")) + (f" {w['share']}" if w.get("share") else "") for w in modes if isinstance(w, dict)
    )
    sent = [("judge", str(spec["model"]), "every case the earlier layers leave")]
    for role, who, when in (
        ("fallback", "fallback", "when the judge cannot answer"),
        ("second_opinion", "second opinion", f"when: {described}"),
        ("adjudicator", "adjudicator", "where the judge and the second opinion disagree"),
    ):
        if parts[role].get("model"):
            sent.append((who, str(parts[role]["model"]), when))
    return sent


def preview_case(*, dataset: Dataset, case_id: str) -> Case:
    """The case the preview is filled in from: `case_id` (a Case pk) when it is one of `dataset`'s cases;
    blank takes the dataset's first case. ValueError says what is wrong: a case of another dataset gets the
    same words as no case at all, so the preview shows nothing of it."""
    case_id = case_id.strip()
    cases = Case.objects.filter(dataset=dataset)
    if not case_id:
        case = cases.order_by("id").first()
        if case is None:
            raise ValueError(f"The dataset {dataset.slug} has no cases yet.")
        return case
    if (pk := object_id(case_id)) is None:
        raise ValueError(f"{case_id[:40]!r} is not a case id: choose a case from the list.")
    case = cases.filter(pk=pk).first()
    if case is None:
        raise ValueError(f"The dataset {dataset.slug} has no case with id {case_id}: choose one of its cases "
                         "from the list.")
    return case


def preview_panel(
    *, dataset: Dataset | None, case_id: str, search: str, **prompt: Any
) -> tuple[CasePicker, PromptPreview]:
    """The preview's case picker and the preview of the chosen case; `prompt` goes to prompt_preview."""
    case, error = None, ""
    if dataset is None:
        error = "Choose a dataset to preview the prompt with one of its cases."
    else:
        try:
            case = preview_case(dataset=dataset, case_id=case_id)
        except ValueError as exc:
            error = str(exc)
    return case_picker(dataset=dataset, search=search, chosen=case), prompt_preview(case=case, error=error, **prompt)


def prompt_preview(
    *, case: Case | None, error: str = "", template: str, criteria: str, policy: str, output_kind: str,
    semantic: dict | None = None, behavioral: bool = True, judges: list[tuple[str, str, str]] | None = None,
    guidance: str = "", examples: list[dict] | tuple[dict, ...] = (),
) -> PromptPreview:
    """The (system, user) messages the engine would send for `case`, built by the engine's own function,
    and, with a `semantic` block, the references the semantic layer compares the answer with.

    Problems (no case: `error` says why; a broken template) come back as `error` rather than an exception:
    the preview is where a lead finds them. The template is checked first, exactly as a save checks it: a
    template the save refuses is never filled in.
    """
    try:
        check_prompt_template(template or DEFAULT_PROMPT_TEMPLATE, behavioral=behavioral)
    except ValueError as exc:
        return PromptPreview(error=f"A save would refuse this template: {exc}")
    if case is None:
        return PromptPreview(error=error)
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
            output_kind=output_kind, guidance=guidance, examples=tuple(examples),
        )
    except (KeyError, IndexError, ValueError) as exc:
        found.error = f"The prompt template cannot be filled in: {exc!r}"
        return found
    found.system, found.user = system, user
    found.judges = judges or []
    return found
