"""Reads of the judges app for its pages: configs, runs, judgments, and a run's cost estimate.

Every page's query count is fixed whatever its rows: relations come with select_related and counts
with annotations, never one query per row.
"""

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db.models import Case as DbCase
from django.db.models import Count, F, FloatField, IntegerField, Max, Q, QuerySet, Sum, When
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Length
from django.http import Http404

from evalhub.models import Project
from evalhub.params import object_id, object_id_or_404
from judges.configs.cases import engine_case
from judges.engine import JudgeConfig as EngineConfig
from judges.engine import build_messages, cache_key, judge_cache_key, run_contract_checks
from judges.engine.escalation import SecondOpinion, rotating_sample
from judges.engine.providers import DEFAULT_MAX_TOKENS
from judges.engine.semantic import EMBED_BATCH, embedding_key, texts_to_embed
from judges.models import (
    CachedEmbedding,
    CachedJudgment,
    DriftCheck,
    JudgeConfig,
    Judgment,
    ModelPrice,
    Outcome,
    Run,
    RunCaseTally,
)
from labeling.models import Dataset

# The estimate reads the prompt of this many cases (chars / 4 tokens each) and takes their mean.
ESTIMATE_SAMPLE = 20
# Above this many (case, repeat) pairs the estimate does not look each one up in the cache.
ESTIMATE_CACHE_LOOKUP_MAX = 20_000
CHARS_PER_TOKEN = 4
# The time estimate takes the mean latency of this many of the model's recent calls.
LATENCY_SAMPLE = 200














# The run list's sort keys (evalhub.tables).
RUN_SORTS = {
    "created": ("created_at", "id"),
    "rubric": ("config__rubric__slug", "config__version", "-id"),
    "dataset": ("dataset__slug", "-id"),
    "status": ("status", "-id"),
    "cost": ("cost_usd", "-id"),
    "not_evaluated": ("not_evaluated", "-id"),
}


def project_runs(*, project: Project) -> QuerySet[Run]:
    """Every run of the project: of its datasets, by its rubrics' configs (services never pair them across
    projects; both are asked, so a run no project owns whole is no run of either). The dataset's project_id index
    finds them."""
    return Run.objects.filter(dataset__project=project, config__rubric__project=project)


def runs_for_list(
    *, project: Project, search: str = "", ordering: tuple[str, ...] = ("-created_at", "-id")
) -> QuerySet[Run]:
    """The project's ordinary runs, newest first: a bias probe is listed on its parent's report, not here.
    `search` matches the run's number, its rubric, dataset, model or creator."""
    runs = (
        project_runs(project=project).filter(parent__isnull=True)
        .select_related("config__rubric", "dataset", "created_by")
        .order_by(*ordering)
    )
    if search:
        matches = (
            Q(config__rubric__slug__icontains=search) | Q(dataset__slug__icontains=search)
            | Q(config__spec__model__icontains=search) | Q(created_by__username__icontains=search)
        )
        if (run_id := object_id(search.removeprefix("#"))) is not None:
            matches |= Q(pk=run_id)
        runs = runs.filter(matches)
    return runs


def run_for_page(run_id: int, *, project: Project) -> Run:
    """The project's run `run_id`; Run.DoesNotExist for another project's, as for one that does not exist."""
    return project_runs(project=project).select_related("config__rubric", "dataset", "created_by").get(pk=run_id)


def run_for_page_or_404(run_id: int | str | None, *, project: Project) -> Run:
    """`run_for_page` for the judges' views: 404 for a run that does not exist or is another project's, or an id
    that is none or not a number (a query string's missing or malformed run)."""
    try:
        return run_for_page(run_id if isinstance(run_id, int) else object_id_or_404(run_id), project=project)
    except Run.DoesNotExist:
        raise Http404("No such run.") from None


def run_drift_check(*, run: Run) -> DriftCheck | None:
    """The drift check a run belongs to, as its run or its fresh sample: a run with a parent and no probe."""
    if not run.parent_id or run.probe:
        return None
    return DriftCheck.objects.filter(Q(run=run) | Q(fresh_run=run)).select_related("rubric").first()


# The run table's sort keys (evalhub.tables): a case's id, its failing and not-evaluated repeats, whether its
# verdicts flipped, its lowest similarity, its slowest repeat.
CASE_SORTS = {
    "case": ("external_id",),
    "fails": ("fails", "external_id"),
    "not_evaluated": ("not_evaluated", "external_id"),
    "flipped": ("verdicts", "external_id"),
    "similarity": ("similarity", "external_id"),
    "latency": ("latency_ms", "external_id"),
}


def run_judgments(
    *, run: Run, outcome: str = "", layer: str = "", error: str = "", search: str = ""
) -> QuerySet[Judgment]:
    """A run's judgments matching the table's filters, in case then repeat order; raw output is left
    behind (it can be long)."""
    rows = (
        Judgment.objects.filter(run=run)
        .annotate(external_id=F("case__external_id"))
        .defer("raw_output", "variant")
        .order_by("case_id", "repeat")
    )
    if outcome:
        rows = rows.filter(outcome=outcome)
    if layer:
        rows = rows.filter(layer=layer)
    if error:
        rows = rows.filter(error=error)
    if search:
        rows = rows.filter(case__external_id__icontains=search)
    return rows


def run_case_rows(
    *, run: Run, ordering: tuple[str, ...] = ("external_id",), **filters: str
) -> QuerySet:
    """One row per case of the run that has a judgment matching the filters (every repeat of it counts
    in the row, matching or not): {case_id, external_id, judged, fails, not_evaluated, verdicts,
    similarity, latency_ms}, for paging; `verdicts` is the number of distinct evaluated verdicts (2: flipped).
    Read from the run's per-case tallies (judges.runs.tallies); only a filter reads the judgments."""
    rows = RunCaseTally.objects.filter(run=run)
    if any(filters.values()):
        rows = rows.filter(case_id__in=run_judgments(run=run, **filters).values("case_id"))
    return (
        rows.annotate(
            external_id=F("case__external_id"),
            verdicts=DbCase(When(passes__gt=0, then=1), default=0) + DbCase(When(fails__gt=0, then=1), default=0),
            similarity=F("lowest_similarity"),
            latency_ms=F("slowest_ms"),
        )
        .values("case_id", "external_id", "judged", "fails", "not_evaluated", "verdicts", "similarity", "latency_ms")
        .order_by(*ordering)
    )


def run_case_judgments(*, run: Run, case_ids: list[int]) -> dict[int, dict[int, Judgment]]:
    """{case_id: {repeat: judgment}} of these cases of the run, in one query."""
    grouped: dict[int, dict[int, Judgment]] = {}
    for judgment in Judgment.objects.filter(run=run, case_id__in=case_ids).defer("raw_output", "variant"):
        grouped.setdefault(judgment.case_id, {})[judgment.repeat] = judgment
    return grouped


def run_filter_choices(*, run: Run) -> dict[str, list[str]]:
    """The layers and errors this run's judgments actually have, for the filter menus (one pass over them)."""
    pairs = list(Judgment.objects.filter(run=run).order_by().values_list("layer", "error").distinct())
    return {
        "layers": sorted({layer for layer, _ in pairs}),
        "errors": sorted({error for _, error in pairs if error}),
    }






# ---- the prompt preview -------------------------------------------------------------------------






# ---- the cost estimate of a run before it starts ------------------------------------------------


@dataclass
class Estimate:
    cases: int
    judgments: int
    contract_only: bool = False
    cached: int | None = None  # None: not looked up (too many pairs)
    calls: int = 0  # the primary judge's calls: at most this many
    calls_low: int = 0  # ... and at least this many (fewer when the semantic layer may decide cases)
    # The other judges' calls, at least and at most: (label, model, (low, high)) for the fallback, the second
    # opinion and the adjudicator ("second opinion <model> (borderline)", "fallback <model> (…)").
    others: list[tuple[str, str, tuple[int, int]]] = field(default_factory=list)
    embedding_calls: tuple[int, int] = (0, 0)  # the semantic layer's embeddings calls, at least and at most
    input_tokens_per_call: int = 0
    output_tokens_per_call: int = 0
    cost_usd: Decimal | None = Decimal(0)
    cost_usd_high: Decimal | None = Decimal(0)  # above cost_usd when a call count is a range
    missing_prices: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    embedding_tokens: int = 0  # the semantic layer's: every answer and golden answer embedded once
    concurrency: int = 1
    latency_ms: int | None = None  # the model's mean latency on its recent uncached calls; None: none yet

    @property
    def judge_calls(self) -> tuple[int, int]:
        return (self.calls_low, self.calls)

    @property
    def second_calls(self) -> tuple[int, int]:
        """Every other judge's calls together: (at least, at most)."""
        return (sum(low for _, _, (low, _) in self.others), sum(high for _, _, (_, high) in self.others))

    @property
    def all_calls(self) -> tuple[int, int]:
        """Every provider call of the run, judges' and embeddings' alike: (at least, at most)."""
        return (
            self.calls_low + self.second_calls[0] + self.embedding_calls[0],
            self.calls + self.second_calls[1] + self.embedding_calls[1],
        )

    @property
    def waves(self) -> int:
        """Rounds of calls at the concurrency cap, at most."""
        return -(-self.all_calls[1] // max(self.concurrency, 1))

    @property
    def seconds(self) -> float | None:
        return None if self.latency_ms is None else self.waves * self.latency_ms / 1000

    @property
    def total_tokens(self) -> int:
        """The judges' tokens, at most (the embeddings' are embedding_tokens)."""
        judge_calls = self.calls + self.second_calls[1]
        return judge_calls * (self.input_tokens_per_call + self.output_tokens_per_call)


def _call_cost(price: ModelPrice, calls: int, input_tokens: int, output_tokens: int) -> Decimal:
    per_call = input_tokens * price.input_per_mtok + output_tokens * price.output_per_mtok
    return (calls * per_call / Decimal(1_000_000)).quantize(Decimal("0.0001"))


def _embedding_estimate(estimate: Estimate, spec: dict, dataset: Dataset, needing: list[dict]) -> Decimal | None:
    """The semantic layer's share: each answer and reference embedded once, whatever the repeats (characters
    ÷ 4 tokens; embeddings already stored count too), and its calls: the texts of `needing` (the cases it
    embeds for) not stored yet, EMBED_BATCH to a call at best; a batch sends a call unfilled when nothing
    else is in flight, at most once for each case that brought new texts since the last call. Decimal(0)
    without the layer, None when the embeddings model has no price (added to `missing_prices`)."""
    semantic = spec.get("semantic")
    if not semantic:
        return Decimal(0)
    chars = dataset.cases.answered().aggregate(chars=Sum(Length("output")) + Sum(Length("golden_answer")))["chars"] or 0
    estimate.embedding_tokens = round(chars / CHARS_PER_TOKEN)
    keys_by_case = [
        {
            embedding_key(provider=semantic["provider"], model=semantic["model"],
                          dimensions=semantic.get("dimensions"), text=text)
            for text in texts_to_embed(case)
        }
        for case in needing
    ]
    stored = set(
        CachedEmbedding.objects.filter(project_id=dataset.project_id, key__in=set().union(*keys_by_case))
        .values_list("key", flat=True)
    ) if keys_by_case else set()
    new_texts: set[str] = set()
    bringing = 0
    for keys in keys_by_case:
        new = keys - stored - new_texts
        bringing += bool(new)
        new_texts |= new
    # At best every call is full; at worst the full ones and one unfilled call per case that brought texts.
    new = len(new_texts)
    estimate.embedding_calls = (-(-new // EMBED_BATCH), min(new, new // EMBED_BATCH + bringing))
    estimate.notes.append(
        f"The semantic layer embeds each answer and reference once (~{estimate.embedding_tokens:,} tokens with "
        f"{semantic['model']}); the cases it decides by similarity call no judge"
        + (", so the judge's calls above are at most." if "behavioral" in spec.get("layers", []) else ".")
    )
    price = ModelPrice.objects.filter(model=semantic["model"]).first()
    if price is None:
        estimate.missing_prices.append(semantic["model"])
        return None
    return (estimate.embedding_tokens * price.input_per_mtok / Decimal(1_000_000)).quantize(Decimal("0.0001"))


def _second_opinion_calls(
    second: SecondOpinion, asked_on: list[tuple[dict, int]], decided_early: int, sampled: frozenset[str] | None
) -> tuple[int, int]:
    """The second opinion's calls over the (case, repeat) pairs it may be asked on, (at least, at most): exact
    where its modes read the case alone (always, sample, safety); a range where one depends on the primary's
    verdict (borderline). `decided_early`: how many pairs the semantic layer may decide before any judge."""
    drawn = [
        "always" in second.modes()
        or second.asks_on(case, None, None, pass_score=0, pass_at=None, sampled=sampled)
        for case, _ in asked_on
    ]
    asked = sum(drawn)
    high = len(asked_on) if "borderline" in second.modes() else asked
    return (max(asked - decided_early, 0), high)


def _other_judges(
    estimate: Estimate, cfg: EngineConfig, asked_on: list[tuple[dict, int]], sampled: frozenset[str] | None
) -> None:
    """The fallback (asked when the primary cannot answer: 0 to every call), the second opinion by its modes
    over `asked_on` (every pair a judge decides, its primary verdict cached or not, but its own verdict not
    cached), the adjudicator (asked where the two disagree: 0 to every second opinion) into `estimate.others`."""
    if cfg.fallback_judge is not None:
        estimate.others.append((
            f"fallback {cfg.fallback_judge.model} (when the primary cannot answer)", cfg.fallback_judge.model,
            (0, estimate.calls),
        ))
    second = cfg.second_opinion_judge
    if second is not None:
        calls = _second_opinion_calls(second, asked_on, estimate.calls - estimate.calls_low, sampled)
        estimate.others.append((f"second opinion {second.model} ({', '.join(second.modes())})", second.model, calls))
        if cfg.adjudicator is not None:
            estimate.others.append(
                (f"adjudicator {cfg.adjudicator.model} (where the two disagree)", cfg.adjudicator.model, (0, calls[1]))
            )


def _sample_for(config: JudgeConfig, dataset: Dataset, turn: int) -> frozenset[str] | None:
    """The cases a rotating `sample` second opinion draws on the `turn`-th run (0 first) of `config` on
    `dataset`: a permutation of the dataset's answered cases seeded by the config and the dataset, walked
    ⌈share · N⌉ a run (escalation.rotating_sample). None when the config has no rotating sample."""
    second = EngineConfig.from_dict(config.spec).second_opinion_judge
    share = second.sample_share if second is not None else None
    if share is None:
        return None
    ids = list(dataset.cases.answered().values_list("external_id", flat=True))
    return rotating_sample(ids, share, seed=f"{config.config_hash}:{dataset.pk}", turn=turn)


def _runs_before(config: JudgeConfig, dataset: Dataset, run: Run | None = None) -> int:
    earlier = Run.objects.filter(config=config, dataset=dataset, probe="")
    return earlier.filter(pk__lt=run.pk).count() if run is not None else earlier.count()


def second_opinion_sample(run: Run) -> frozenset[str] | None:
    """The external ids this run's rotating sample draws for a second opinion: the run's turn is the number
    of earlier runs of its config on its dataset, so every case is drawn within ⌈1 / share⌉ runs."""
    return _sample_for(run.config, run.dataset, _runs_before(run.config, run.dataset, run))


def _recent_latency_ms(model: str, *, project_id: int) -> int | None:
    """The mean latency of the model's last LATENCY_SAMPLE uncached behavioral calls, on any run of the project
    (another project's calls are none of its business)."""
    latencies = list(
        Judgment.objects.filter(run__dataset__project_id=project_id, run__config__spec__model=model, cached=False,
                                layer="behavioral")
        .order_by("-id").values_list("latency_ms", flat=True)[:LATENCY_SAMPLE]
    )
    return round(sum(latencies) / len(latencies)) if latencies else None


def run_estimate(
    *, config: JudgeConfig, dataset: Dataset, repeats: int, concurrency: int = 1, fresh: bool = False
) -> Estimate:
    """What a run would cost and how many calls it makes, every judge counted, before it starts.
    Only the dataset's project's cache counts (docs/projects.md): a hit never tells a project what another's
    judge said.

    Expected input tokens are the characters of the prompt built for a sample of the dataset's cases
    divided by 4; expected output tokens are params.max_tokens (the engine's default when unset), an
    upper bound. Pairs already in the cache cost nothing, and a case a contract check fails never
    reaches a model. The secondary judge counts by its mode (_second_opinion_calls), the semantic layer
    by its embeddings (_embedding_estimate); where the count is a range, so is the cost. The time is the
    calls in rounds of `concurrency` at the model's recent mean latency. Retries are not counted. A `fresh` run
    finds nothing in the cache (its keys are its own), so nothing is looked up.
    """
    spec = config.spec
    cases = dataset.cases.answered().count()
    estimate = Estimate(cases=cases, judgments=cases * repeats, concurrency=concurrency)
    if unanswered := dataset.cases.unanswered().count():
        estimate.notes.append(
            f"{unanswered} case{'' if unanswered == 1 else 's'} with no answer yet (a golden set's, say) "
            f"{'is' if unanswered == 1 else 'are'} left out: nothing to judge."
        )
    engine_config = EngineConfig.from_dict(spec)
    # The (case, repeat) pairs that would reach a model: not cached, no contract check failed; and those a
    # second opinion may be asked on: the judge decided them (now, or in the cache), its own verdict not cached.
    judged: list[tuple[dict, int]] = []
    second_asked_on: list[tuple[dict, int]] = []
    if 0 < estimate.judgments <= ESTIMATE_CACHE_LOOKUP_MAX:
        all_cases = [engine_case(case) for case in dataset.cases.answered().order_by("id")]
        keys = {
            (i, repeat): cache_key(case, engine_config.cache_scope, repeat)
            for i, case in enumerate(all_cases) for repeat in range(1, repeats + 1)
        }
        # A fresh run reuses nothing cached (its keys are salted with the run); the cache is the project's own.
        cached = CachedJudgment.objects.filter(project_id=dataset.project_id)
        layers = {} if fresh else dict(
            cached.filter(key__in=keys.values()).values_list("key", "judgment__layer")
        )
        hits = set(layers)
        estimate.cached = sum(key in hits for key in keys.values())
        contract = "contract" in engine_config.layers
        passing = [
            not contract or all(check["passed"] for check in run_contract_checks(case, engine_config))
            for case in all_cases
        ]
        judged = [
            (case, repeat) for i, case in enumerate(all_cases) for repeat in range(1, repeats + 1)
            if passing[i] and keys[(i, repeat)] not in hits
        ]
        if engine_config.second_opinion_judge is not None:
            second_keys = {key: judge_cache_key(key, "second_opinion") for key in keys.values()}
            seconded = set() if fresh else set(
                cached.filter(key__in=second_keys.values()).values_list("key", flat=True)
            )
            second_asked_on = [
                (case, repeat) for i, case in enumerate(all_cases) for repeat in range(1, repeats + 1)
                if passing[i] and layers.get(keys[(i, repeat)], "behavioral") == "behavioral"
                and second_keys[keys[(i, repeat)]] not in seconded
            ]
        if estimate.cached:
            estimate.notes.append(
                f"{estimate.cached} of {estimate.judgments} judgments are already in the cache: "
                "they call no model and cost nothing."
            )
    else:  # too many pairs to look up: every pair counts
        judged = second_asked_on = [
            (engine_case(case), r) for case in dataset.cases.answered().order_by("id") for r in range(1, repeats + 1)
        ]
    needing = list({case["external_id"]: case for case, _ in judged}.values())  # each case once, whatever the repeats
    embedding_cost = _embedding_estimate(estimate, spec, dataset, needing)
    if "behavioral" not in spec.get("layers", []):
        estimate.contract_only = True  # no judge model: the embeddings, if any, are the whole cost
        estimate.cost_usd = estimate.cost_usd_high = embedding_cost
        if not spec.get("semantic"):
            estimate.notes.append("Contract checks only: no model is called, so the run costs nothing.")
        return estimate

    sample = [
        engine_case(case) for case in dataset.cases.answered().order_by("id")[:ESTIMATE_SAMPLE]
    ]
    if sample:
        chars = [
            sum(map(len, build_messages(
                case, template=spec["prompt_template"], criteria=spec["criteria"], policy=spec["policy"],
                output_kind=spec["output_kind"], guidance=spec.get("guidance", ""), examples=spec.get("examples") or (),
            )))
            for case in sample
        ]
        estimate.input_tokens_per_call = round(sum(chars) / len(chars) / CHARS_PER_TOKEN)
    estimate.output_tokens_per_call = int((spec.get("params") or {}).get("max_tokens", DEFAULT_MAX_TOKENS))

    estimate.calls = len(judged)
    # The semantic layer may decide any of them by similarity before the judge is asked.
    estimate.calls_low = 0 if spec.get("semantic") else estimate.calls
    estimate.latency_ms = _recent_latency_ms(spec["model"], project_id=dataset.project_id) if estimate.calls else None
    sampled = _sample_for(config, dataset, _runs_before(config, dataset))
    _other_judges(estimate, engine_config, second_asked_on, sampled)
    # A model that makes no call (everything cached) needs no price to cost nothing.
    calling = [spec["model"]] if estimate.calls else []
    calling += [model for _, model, (_, high) in estimate.others if high]
    prices = {p.model: p for p in ModelPrice.objects.filter(model__in=calling)}
    estimate.missing_prices += [m for m in dict.fromkeys(calling) if m not in prices]
    if estimate.missing_prices:
        estimate.cost_usd = estimate.cost_usd_high = None
        return estimate
    assert embedding_cost is not None

    def judges_cost(primary: int, end: int) -> Decimal:
        tokens = (estimate.input_tokens_per_call, estimate.output_tokens_per_call)
        cost = _call_cost(prices[spec["model"]], primary, *tokens) if primary else Decimal(0)
        for _, model, calls in estimate.others:
            cost += _call_cost(prices[model], calls[end], *tokens) if calls[end] else Decimal(0)
        return cost

    estimate.cost_usd = embedding_cost + judges_cost(estimate.calls_low, 0)
    estimate.cost_usd_high = embedding_cost + judges_cost(estimate.calls, 1)
    return estimate


JUDGE_ROLES = ("embeddings", "primary", "fallback", "second_opinion", "adjudicator")


def calls_by_judge(*, run: Run) -> list[tuple[str, int, float | None]]:
    """(judge, provider calls, cost in USD or None when some of it is unpriced) of each judge that made calls in
    the run: the primary, the fallback, the second opinion, the adjudicator, the embeddings. One query."""
    aggregates: dict[str, Any] = {}
    for role in JUDGE_ROLES:
        aggregates[f"{role}_calls"] = Sum(Cast(KeyTextTransform(role, "calls_by_judge"), IntegerField()))
        aggregates[f"{role}_cost"] = Sum(Cast(KeyTextTransform(role, "cost_by_judge"), FloatField()))
        # A JSON null under the role: a call of an unpriced model.
        aggregates[f"{role}_unpriced"] = Count("pk", filter=Q(**{f"cost_by_judge__{role}": None}))
    totals = run.judgments.aggregate(**aggregates)
    return [
        (role, totals[f"{role}_calls"], None if totals[f"{role}_unpriced"] else totals[f"{role}_cost"] or 0.0)
        for role in JUDGE_ROLES if totals[f"{role}_calls"]
    ]


def ci_run_verdicts(*, dataset: Dataset, ref: str, config_hash: str) -> dict:
    """The CI run that posted `ref` to `dataset` with the config of this hash: {"run": id or None, "cases":
    {original external_id: verdict}}, each verdict the majority of its evaluated repeats (a tie, or none
    evaluated, is not evaluated), as the check decided it."""
    run = (Run.objects.filter(dataset=dataset, source=Run.Source.CI, ref=ref, config__config_hash=config_hash)
           .order_by("-pk").first())
    if run is None:
        return {"run": None, "cases": {}}
    votes: dict[str, dict[str, int]] = {}
    rows = (Judgment.objects.filter(run=run, outcome__in=(Outcome.PASS, Outcome.FAIL))
            .values("case__external_id", "outcome").annotate(n=Count("id")))
    for row in rows:
        votes.setdefault(row["case__external_id"], {})[row["outcome"]] = row["n"]
    for external_id in Judgment.objects.filter(run=run).values_list("case__external_id", flat=True).distinct():
        votes.setdefault(external_id, {})
    prefix = f"{ref}/"
    cases = {}
    for external_id, count in votes.items():
        passed, failed = count.get("pass", 0), count.get("fail", 0)
        verdict = "pass" if passed > failed else "fail" if failed > passed else "not_evaluated"
        cases[external_id.removeprefix(prefix)] = verdict
    return {"run": run.pk, "cases": cases}


def recent_dataset_slug(*, project: Project) -> str | None:
    """The dataset the start-run form offers first: the one whose cases were imported or changed last (the
    one a lead just imported), else the first by slug."""
    return (project.datasets.annotate(last_change=Max("cases__content_changed_at"))
            .order_by(F("last_change").desc(nulls_last=True), "slug").values_list("slug", flat=True).first())
