"""A run's calibration figures and promotion rules, read from the database (docs/calibration.md).

The ORM side of `judges.calibration.metrics` (pure pandas) and `judges.calibration.rules` (pure checks):
the database counts each case's judgments, one query reads the cases' human verdicts, one the
not-evaluated judgments (the figures list each), and the figures come from the frames they make. The
report page, the JSON command, the API, the versions chart and promotion all read runs through
`case_frame` and `not_evaluated_judgments`, so they show the same numbers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd
from django.db import connection
from django.db.models import Count, IntegerField, Max, OuterRef, Q, Subquery, Value

from judges.calibration.explorer import EXPLORER_COLUMNS
from judges.calibration.frames import raw_rows, typed_frame
from judges.calibration.metrics import CASE_COLUMNS, COLUMNS, FIRST_COLUMNS, calibration_figures
from judges.calibration.rules import RuleResult, Thresholds, config_models, evaluate_rules, relaxed_thresholds
from judges.models import JudgeConfig, Judgment, Outcome, Run, Tier
from labeling.disputes.agreement import agreement_figures, paired_labels
from labeling.disputes.selectors import cases_with_human_verdict
from labeling.models import Adjudication, Case, Label, Rubric
from labeling.policies.selectors import policy_newest_versions

NOT_FINISHED = "the run has not finished"


def pct(value: float | None | str) -> str:
    """0.8421 → "84.2 %"; None → "—". Pages show percentages with one decimal (JSON stays unrounded)."""
    if not isinstance(value, int | float):  # None, or a template's "" for a missing interval
        return "—"
    return f"{value * 100:.1f} %"


def case_frame(*, runs: list[Run]) -> pd.DataFrame:
    """One row per case each run judged: `run_id`, metrics.CASE_COLUMNS, FIRST_COLUMNS and the case's calibration
    `kind` ("" for none), the human verdict being the one for the run's rubric (runs need `config__rubric`
    loaded). Two queries.

    The database counts each (run, case)'s judgments, so 100,000 judgments arrive as 20,000 rows; a
    second query reads the runs' datasets' cases with labeling's `cases_with_human_verdict`, one UNION
    branch per rubric, so the rule for a human verdict stays labeling's. They meet in pandas.
    """
    if not runs:
        return pd.DataFrame(columns=["run_id", *CASE_COLUMNS, *FIRST_COLUMNS, "kind"])
    evaluated = [Outcome.PASS, Outcome.FAIL]
    counts = (
        Judgment.objects.filter(run__in=[run.pk for run in runs]).order_by().values("run_id", "case_id")
        .annotate(
            judgments=Count("pk"),
            passes=Count("pk", filter=Q(outcome=Outcome.PASS)),
            fails=Count("pk", filter=Q(outcome=Outcome.FAIL)),
            contested=Count("pk", filter=Q(contested=True, outcome__in=evaluated)),
            first_pass=Count("pk", filter=Q(repeat=1, outcome=Outcome.PASS)),
            first_fail=Count("pk", filter=Q(repeat=1, outcome=Outcome.FAIL)),
        )
        .values_list("run_id", "case_id", "judgments", "passes", "fails", "contested", *FIRST_COLUMNS)
    )
    count_columns = ["run_id", "case_id", "judgments", "passes", "fails", "contested", *FIRST_COLUMNS]
    frame = typed_frame(raw_rows(counts), count_columns, integers=tuple(count_columns))
    rubric_of = {run.pk: run.config.rubric for run in runs}
    datasets: dict[Rubric, set[int]] = {}
    for run in runs:
        datasets.setdefault(rubric_of[run.pk], set()).add(run.dataset_id)
    branches = [
        cases_with_human_verdict(rubric=rubric, cases=Case.objects.filter(dataset_id__in=sorted(ids)))
        .annotate(rubric_key=Value(rubric.pk, output_field=IntegerField()))
        .order_by()
        .values_list("rubric_key", "pk", "external_id", "category", "split", "human_verdict", "kind")
        for rubric, ids in datasets.items()
    ]
    # The combined query must not inherit Case's default ordering (a UNION cannot order by a column it
    # does not select).
    query = branches[0].union(*branches[1:], all=True).order_by() if len(branches) > 1 else branches[0]
    case_columns = ["rubric_id", "case_id", "external_id", "category", "split", "human", "kind"]
    cases = typed_frame(raw_rows(query), case_columns, integers=("rubric_id", "case_id"))
    frame["rubric_id"] = frame["run_id"].map({pk: rubric.pk for pk, rubric in rubric_of.items()})
    frame = frame.merge(cases, on=["rubric_id", "case_id"], how="left", sort=False)
    frame["human"] = _none_for_missing(frame["human"])
    frame["kind"] = frame["kind"].fillna("")
    # A config's example cases (shown to its judge in the prompt) never count in its runs' figures.
    shown = [(run.pk, external_id) for run in runs for external_id in example_ids(run.config.spec)]
    if shown:
        frame = frame[~pd.MultiIndex.from_frame(frame[["run_id", "external_id"]]).isin(shown)]
    return frame[["run_id", *CASE_COLUMNS, *FIRST_COLUMNS, "kind"]]


def example_ids(spec: dict) -> set[str]:
    """The external ids of the cases a config shows its judge as examples (docs/improving.md)."""
    return {str(example.get("external_id")) for example in spec.get("examples") or []}


def example_cases_left_out(*, run: Run) -> int:
    """How many of the run's judged cases its figures leave out for being its config's examples; one query,
    none for a config without examples."""
    ids = example_ids(run.config.spec)
    if not ids:
        return 0
    return run.judgments.filter(case__external_id__in=ids).values("case_id").distinct().count()


def not_evaluated_judgments(*, cases: pd.DataFrame) -> pd.DataFrame:
    """The not-evaluated judgments of `case_frame`'s runs, with their reason and the engine's error:
    `run_id` and metrics.COLUMNS. One query (an index on run and outcome finds them), none without runs.
    """
    if cases.empty:
        return pd.DataFrame(columns=["run_id", *COLUMNS])
    fields = ["run_id", "case_id", "repeat", "outcome", "reason", "error", "contested"]
    rows = (
        Judgment.objects.filter(run__in=cases["run_id"].unique().tolist(), outcome=Outcome.NOT_EVALUATED)
        .order_by()  # the metrics sort what they show
        .values_list(*fields)
    )
    frame = typed_frame(list(rows), fields, integers=("run_id", "case_id", "repeat"))
    frame = frame.merge(cases[["run_id", "case_id", "external_id", "category", "split", "human"]],
                        on=["run_id", "case_id"], how="left", sort=False)
    frame["human"] = _none_for_missing(frame["human"])
    return frame[["run_id", *COLUMNS]]


def _none_for_missing(values: pd.Series) -> pd.Series:
    """None (not NaN) where there is nothing, as the metrics' frames are documented."""
    values = values.astype(object)
    return values.where(values.notna(), None)


def run_frames(*, run: Run) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One run's cases frame and its not-evaluated judgments, columns metrics.CASE_COLUMNS (and FIRST_COLUMNS,
    `kind`) and COLUMNS: what `calibration_figures` and `evidence_figures` read. Three queries (two for a run
    without judgments); `run.config.rubric` must be loaded (select_related)."""
    cases = case_frame(runs=[run])
    return cases[[*CASE_COLUMNS, *FIRST_COLUMNS, "kind"]], not_evaluated_judgments(cases=cases)[list(COLUMNS)]


def evidence_figures(cases: pd.DataFrame) -> dict[str, Any]:
    """What the promotion rules read beyond `calibration_figures`, from a cases frame with `kind`:
    `coverage_all` (evaluated / all judgments, labelled or not: a deterministic judge promoted without
    human evidence is held to it) and `cases_by_kind` / `cases_by_kind_all` ({kind: cases with a human
    verdict / judged cases}, kinds that have none left out)."""
    cases = cases.reindex(columns=[*CASE_COLUMNS, "kind"])
    judgments = int(cases["judgments"].fillna(0).sum())
    evaluated = int((cases["passes"].fillna(0) + cases["fails"].fillna(0)).sum())
    kinds = cases["kind"].fillna("")
    labelled = kinds[cases["human"].isin(("pass", "fail"))]
    return {
        "coverage_all": evaluated / judgments if judgments else None,
        "cases_by_kind": {str(k): int(v) for k, v in labelled[labelled != ""].value_counts().sort_index().items()},
        "cases_by_kind_all": {str(k): int(v) for k, v in kinds[kinds != ""].value_counts().sort_index().items()},
    }


def explorer_frame(*, run: Run, cases: pd.DataFrame) -> pd.DataFrame | None:
    """The threshold explorer's frame (explorer.EXPLORER_COLUMNS): every judgment of the run with its case's
    human verdict from `cases` (run_frames' first frame). None when no judgment has a similarity. One
    query, none for a config that cannot have similarities (neither a semantic layer nor imported)."""
    if not run.config.spec.get("semantic") and not run.config.external:
        return None
    rows = Judgment.objects.filter(run=run).order_by().values_list("case_id", "outcome", "layer", "similarity")
    frame = typed_frame(raw_rows(rows), ["case_id", "outcome", "layer", "similarity"], integers=("case_id",))
    frame["similarity"] = pd.to_numeric(frame["similarity"], errors="coerce").astype("float64")
    if not frame["similarity"].notna().any():
        return None
    frame = frame.merge(cases[["case_id", "human"]], on="case_id", how="left", sort=False)
    frame["human"] = _none_for_missing(frame["human"])
    return frame[list(EXPLORER_COLUMNS)]


def case_judgments(*, run: Run, case_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """case_id → the run's judgments of these cases only (one page of a table) in repeat order:
    {repeat, outcome, reason, similarity} where reason is the judge's, or the engine's error when it gave
    none, and similarity the semantic layer's (None where it did not run). One query."""
    rows = (
        Judgment.objects.filter(run=run, case_id__in=case_ids).order_by("case_id", "repeat")
        .values_list("case_id", "repeat", "outcome", "reason", "error", "similarity")
    )
    out: dict[int, list[dict[str, Any]]] = {}
    for case_id, repeat, outcome, reason, error, similarity in rows:
        out.setdefault(case_id, []).append(
            {"repeat": repeat, "outcome": outcome, "reason": reason or error, "similarity": similarity}
        )
    return out


def contested_judgments(*, run: Run, case_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """case_id → its contested judgments in repeat order, {repeat, primary, secondary, adjudicator, decided_by}
    (each judge's verdict, and who decided: the adjudicator, else the primary's verdict stands for a human to
    decide), for these cases only (the report's contested table). One query."""
    rows = (
        Judgment.objects.filter(run=run, case_id__in=case_ids, contested=True)
        .order_by("case_id", "repeat")
        .values_list("case_id", "repeat", "outcome", "secondary_outcome", "judge", "opinions")
    )
    out: dict[int, list[dict[str, Any]]] = {}
    for case_id, repeat, outcome, secondary, judge, opinions in rows:
        # Posted by CI as well: read defensively (ci_cases checks the shape; older rows have none).
        opinions = {k: v for k, v in opinions.items() if isinstance(v, dict)} if isinstance(opinions, dict) else {}
        first = opinions.get("primary") or opinions.get("fallback") or {}
        adjudicator = (opinions.get("adjudicator") or {}).get("outcome")
        out.setdefault(case_id, []).append({
            "repeat": repeat, "primary": first.get("outcome", outcome), "secondary": secondary,
            "adjudicator": adjudicator, "decided_by": "adjudicator" if judge == "adjudicator" else "human",
        })
    return out


def stale_reasons(*, run: Run) -> list[str]:
    """Why the run's judgments no longer judge what stands (docs/promotion.md, "Stale evidence"); [] when fresh.

    Label changes do not count: the figures follow the current labels, and neither does a newer config
    version (a candidate). One query (two when the config references a policy document).
    """
    if run.status != Run.Status.FINISHED or run.finished_at is None:
        return [NOT_FINISHED]
    reasons = []
    # A case created after the run is new, not changed: the run never judged it, so no judgment of
    # the run is out of date (its figures simply do not cover it).
    changed = Case.objects.filter(
        dataset_id=run.dataset_id, content_changed_at__gt=run.finished_at, created_at__lte=run.finished_at
    ).count()
    if changed:
        reasons.append(f"{changed} case{'' if changed == 1 else 's'} changed since this run finished")
    spec = run.config.spec
    reasons += criteria_stale_reasons(spec, run.config.rubric.criteria)
    # The policy is the rubric's project's (a slug names a policy within its project only).
    project_id = run.config.rubric.project_id
    newest = policy_newest_versions(project_ids={project_id}).get(project_id, {}) if spec.get("policy_ref") else {}
    return reasons + policy_stale_reasons(spec, newest)


def criteria_stale_reasons(spec: dict, criteria: str) -> list[str]:
    """The stale reason of a config whose copy of the rubric's criteria is no longer the rubric's; [] otherwise.
    (A newer config version is a candidate, never a stale reason: docs/promotion.md.)"""
    if spec.get("criteria", criteria) == criteria:
        return []
    return ["the rubric's criteria were edited after this run's config was saved"]


def policy_stale_reasons(spec: dict, newest: dict[str, int]) -> list[str]:
    """The stale reason of a config whose policy document has a newer version than it references
    (`newest`: slug → newest version); [] otherwise."""
    ref = spec.get("policy_ref")
    latest = newest.get(ref["slug"]) if ref else None
    if latest is None or latest <= ref["version"]:
        return []
    return [f"policy {ref['slug']} is at v{latest}; this run's config uses v{ref['version']}"]


def newest_version(*, rubric_id: int, tier: str = Tier.DEFAULT) -> int | None:
    """The newest kept config version of the rubric's tier (JudgeConfigQuerySet.kept: an imported or proposed one
    never counts)."""
    return JudgeConfig.objects.filter(rubric_id=rubric_id).kept_of_tier(tier).aggregate(v=Max("version"))["v"]


# Figures a package above calibration adds to runs' figures: bias probes (judges.probes) add "probes" and the
# rule's "probe_moved" once a run has a finished probe. Calibration may not import the packages above it,
# so judges/apps.py registers them here. Each takes {run id: the run's cases frame} and returns {run id:
# the figures to add}, leaving out a run it has nothing for, in a fixed number of queries for all the runs.
RUN_FIGURE_EXTRAS: list[Callable[[dict[int, pd.DataFrame]], dict[int, dict[str, Any]]]] = []


def _extra_figures(frames: dict[int, pd.DataFrame]) -> dict[int, dict[str, Any]]:
    """{run id: what RUN_FIGURE_EXTRAS add to its figures} for the runs of `frames` ({run id: cases frame})."""
    added: dict[int, dict[str, Any]] = {}
    for extra in RUN_FIGURE_EXTRAS:
        for run_id, figures in extra(frames).items():
            added.setdefault(run_id, {}).update(figures)
    return added


def run_figures(*, run: Run, frames: tuple[pd.DataFrame, pd.DataFrame] | None = None) -> dict[str, Any]:
    """The figures (docs/calibration.md) of one run against its rubric's current human verdicts, JSON-serialisable.

    `calibration_figures` and `evidence_figures` plus run, repeats, config_version, deterministic,
    stale_reasons, reviewer_agreement and judge_above_reviewers (over the run's dataset), cost_usd (None when
    partly unknown), unknown_cost_judgments, tokens, cache_hits and provider_calls. Pass `frames` when the
    caller already holds `run_frames(run=run)` (the report page needs them for its tables too).
    """
    rubric = run.config.rubric
    cases, judgments = run_frames(run=run) if frames is None else frames
    labels = paired_labels(rubric_ids=[rubric.pk], dataset_ids=[run.dataset_id])
    figures = calibration_figures(
        judgments, cases=cases, reviewer_agreement=agreement_figures(labels), reviewer_labels=labels
    )
    figures = {**figures, **_extra_figures({run.pk: cases}).get(run.pk, {})}
    return {
        **figures,
        **evidence_figures(cases),
        "run": run.pk,
        "repeats": run.repeats,
        "config_version": run.config.version,
        "deterministic": run.config.deterministic,
        "stale_reasons": stale_reasons(run=run),
        # Unknown is not zero: null when a judgment's call had no price (what is known is on the run's page).
        "cost_usd": None if run.unknown_cost_judgments else float(run.cost_usd),
        "unknown_cost_judgments": run.unknown_cost_judgments,
        "tokens": {"input": run.input_tokens, "output": run.output_tokens},
        "cache_hits": run.cache_hits,
        "provider_calls": run.provider_calls,
        # Calls a killed worker made and never recorded (their cost is not in cost_usd), at least this many.
        "calls_not_recorded": run.calls_not_recorded,
        "example_cases_left_out": example_cases_left_out(run=run),
    }


def rubric_thresholds(rubric: Rubric) -> Thresholds:
    """The rubric's promotion thresholds (the defaults unless a lead changed them, audited)."""
    return Thresholds(
        min_cases=rubric.min_cases,
        min_repeats=rubric.min_repeats,
        agreement_floor=rubric.agreement_floor,
        agreement_ceiling=rubric.agreement_ceiling,
        min_true_pass_rate=rubric.min_true_pass_rate,
        min_true_fail_rate=rubric.min_true_fail_rate,
        max_flip_rate=rubric.max_flip_rate,
        min_coverage=rubric.min_coverage,
        max_probe_moved=rubric.max_probe_moved,
        require_human_evidence=rubric.require_human_evidence,
        min_cases_per_kind=rubric.min_cases_per_kind,
        require_pinned_models=rubric.require_pinned_models,
        refuse_judge_above_reviewers=rubric.refuse_judge_above_reviewers,
    )


def run_rules(*, run: Run, figures: dict | None = None) -> list[RuleResult]:
    """Every promotion rule for this run as evidence, met or not (docs/promotion.md, "The rules").

    With `figures` from `run_figures` (its stale reasons included) this costs one query.
    """
    figures = run_figures(run=run) if figures is None else figures
    config = run.config
    reasons = figures["stale_reasons"] if "stale_reasons" in figures else stale_reasons(run=run)
    newest = newest_version(rubric_id=config.rubric_id, tier=config.tier)
    return evaluate_rules(
        figures=figures,
        repeats=run.repeats,
        thresholds=rubric_thresholds(config.rubric),
        is_newest_config=not config.external and not config.proposal and newest == config.version,
        stale_reasons=reasons,
        newest_version=newest,
        is_external=config.external,
        deterministic=config.deterministic,
        models=config_models(config.spec),
    )


# Runs, not cases, make this loop: the versions chart shows at most this many (the newest).
VERSIONS_SHOWN = 12


def version_figures(*, rubric: Rubric) -> list[dict[str, Any]]:
    """Each config version of the rubric (the newest VERSIONS_SHOWN, oldest first) with the figures of
    its newest finished run: [{"version", "external", "config", "run", "figures" (None without a run),
    "probes" (the figures of that run's bias probes, {} without a finished one)}]. Probe runs are never
    a version's newest run.

    Six queries however many versions (seven with a finished probe): the configs with their newest
    finished run's id, those runs, their cases' counts and human verdicts (`case_frame`), their
    not-evaluated judgments, and their probes' (RUN_FIGURE_EXTRAS).
    """
    newest_run = (
        Run.objects.filter(config=OuterRef("pk"), status=Run.Status.FINISHED, parent__isnull=True)
        .order_by("-finished_at", "-pk")
        .values("pk")[:1]
    )
    configs = list(
        JudgeConfig.objects.filter(rubric=rubric).exclude(proposal="discarded")  # a discarded proposal: no version
        .annotate(newest_run=Subquery(newest_run))
        .order_by("-version")[:VERSIONS_SHOWN]
    )[::-1]
    newest_runs = Run.objects.filter(pk__in=[c.newest_run for c in configs if c.newest_run])
    runs = {run.pk: run for run in newest_runs.select_related("config__rubric")}
    figures: dict[int, dict] = {}
    probes: dict[int, dict] = {}
    if runs:
        cases = case_frame(runs=list(runs.values()))
        missing = dict(iter(not_evaluated_judgments(cases=cases).groupby("run_id", sort=False)))
        frames = {int(run_id): rows for run_id, rows in cases.groupby("run_id", sort=False)}
        added = _extra_figures(frames)
        for run_id, rows in frames.items():
            judgments = missing.get(run_id, pd.DataFrame(columns=list(COLUMNS)))[list(COLUMNS)]
            figures[run_id] = calibration_figures(judgments, cases=rows[list(CASE_COLUMNS)])
            probes[run_id] = added.get(run_id, {}).get("probes", {})
    return [
        {
            "version": config.version, "external": config.external, "config": config.pk,
            "run": config.newest_run,
            # A finished run without judgments still has (empty) figures: its gap is "no figures", not "no run".
            "figures": figures.get(config.newest_run, calibration_figures(pd.DataFrame()))
            if config.newest_run else None,
            "probes": probes.get(config.newest_run, {}),
        }
        for config in configs
    ]


# ---- the rules as pages and the command show them --------------------------------------------------

# Rules whose number is a fraction, shown as a percentage with its threshold (attribute, comparison).
RATE_RULES = {
    "agreement_floor": ("agreement_floor", "≥"),
    "agreement_ceiling": ("agreement_ceiling", "<"),
    "min_true_pass_rate": ("min_true_pass_rate", "≥"),
    "min_true_fail_rate": ("min_true_fail_rate", "≥"),
    "max_flip_rate": ("max_flip_rate", "≤"),
    "min_coverage": ("min_coverage", "≥"),
    "max_probe_moved": ("max_probe_moved", "≤"),  # the largest share of verdicts a bias probe moved
}
COUNT_RULES = {"min_cases": ("min_cases", "≥"), "min_repeats": ("min_repeats", "≥")}


@dataclass
class ShownRule:
    key: str
    label: str
    met: bool
    value: str
    threshold: str
    applies: bool = True  # False: not a rule for this evidence (shown, never counted against it)


def shown_threshold(rule: RuleResult, thresholds: Thresholds) -> str:
    """What a rule needs, as the pages show it: rates as percentages with one decimal; a rule that does not
    apply to this evidence says why instead."""
    if not rule.applies:
        return rule.threshold_text
    if rule.key in RATE_RULES:
        attribute, op = RATE_RULES[rule.key]
        threshold = f"{op} {pct(getattr(thresholds, attribute))}"
        return threshold + (" (100 % means overfit or sycophantic)" if rule.key == "agreement_ceiling" else "")
    if rule.key in COUNT_RULES:
        attribute, op = COUNT_RULES[rule.key]
        return f"{op} {getattr(thresholds, attribute)}"
    return rule.threshold_text


def shown_label(rule: RuleResult) -> str:
    labels = {"agreement_floor": "agreement (floor)", "agreement_ceiling": "agreement (ceiling)"}
    return labels.get(rule.key, rule.label)


def shown_rules(run: Run, rules: list[RuleResult]) -> list[ShownRule]:
    """The rules as the page shows them: numbers as percentages with one decimal, thresholds alike; a
    rule that does not apply to this evidence says why instead of a threshold."""
    thresholds = rubric_thresholds(run.config.rubric)
    shown = []
    for rule in rules:
        if rule.key in RATE_RULES:
            value = pct(rule.value)
        elif rule.key in COUNT_RULES:
            value = "—" if rule.value is None else str(rule.value)
        elif rule.key == "newest_config":
            value = f"v{run.config.version}" + (
                " (external)" if run.config.external else "" if rule.met else f" (a newer version v{rule.value} exists)"
            )
        elif rule.key == "not_stale":
            value = "; ".join(rule.value) if rule.value else "fresh"
        elif rule.key == "pinned_models":
            value = "aliases: " + ", ".join(rule.value) if rule.value else "all pinned"
        elif rule.key == "judge_above_reviewers":
            test = rule.value or {}
            value = (
                f"{pct(test['judge'])} vs the reviewers' {pct(test['reviewers'])} on {test['cases']} cases"
                if test.get("judge") is not None else "—"
            )
            if test.get("z") is not None:
                value += f" (z = {test['z']:.2f})"
        elif rule.key == "min_cases_per_kind":
            value = ", ".join(f"{kind} {count}" for kind, count in rule.value.items())
        else:  # a rule added later (probes): its own texts
            value = str(rule.value)
        shown.append(ShownRule(rule.key, shown_label(rule), rule.met, value, shown_threshold(rule, thresholds),
                               rule.applies))
    return shown


# ---- thresholds looser than the defaults, as pages show them ---------------------------------------

_THRESHOLD_LABELS = {
    "min_cases": "cases", "min_repeats": "repeats K", "agreement_floor": "agreement floor",
    "agreement_ceiling": "agreement ceiling", "min_true_pass_rate": "true pass rate",
    "min_true_fail_rate": "true fail rate", "max_flip_rate": "flip rate", "min_coverage": "coverage",
}


def shown_relaxed(rubric: Rubric) -> list[str]:
    """Each of the rubric's thresholds looser than its default, as a short text ("agreement floor
    70.0 % (default 80.0 %)"); [] when none is. Pages show them wherever the stage and figures are."""
    out = []
    for name, value, default in relaxed_thresholds(rubric_thresholds(rubric)):
        if name == "require_human_evidence":
            out.append("no human evidence required (deterministic judges)")
        elif name == "require_pinned_models":
            out.append("models need not be pinned snapshots")
        elif name == "refuse_judge_above_reviewers":
            out.append("a judge above the reviewers' agreement is not refused")
        elif name in COUNT_RULES:
            out.append(f"{_THRESHOLD_LABELS[name]} {value} (default {default})")
        else:
            out.append(f"{_THRESHOLD_LABELS[name]} {pct(value)} (default {pct(default)})")
    return out


# ---- a key that changes whenever a run's figures could ---------------------------------------------

# PostgreSQL stamps every row version with the id of the transaction that wrote it (xmin): any insert,
# update or delete changes the set of (id, xmin) pairs of a table's rows. Summing a 64-bit hash of each
# pair gives a fingerprint of the set that changes with it (a collision is a 1-in-2^64 chance); with the
# count beside it. Judgments are written only together with their run's counters (the run services,
# the import) and are read-only in the admin, so the run row's version and their count stand for them:
# hashing 100,000 judgments would cost more than the rest together.
_FINGERPRINT = "count(*) || '/' || coalesce(sum(hashtextextended({t}.id || ':' || {t}.xmin::text, 0)), 0)"
_EVIDENCE_SQL = """
SELECT
  (SELECT {fp_r} FROM {run} r WHERE r.id = %(run)s),
  (SELECT count(*) FROM {judgment} j WHERE j.run_id = %(run)s),
  (SELECT {fp_c} FROM {case} c WHERE c.dataset_id = %(dataset)s),
  (SELECT {fp_l} FROM {label} l JOIN {case} c ON c.id = l.case_id
     WHERE l.rubric_id = %(rubric)s AND c.dataset_id = %(dataset)s),
  (SELECT {fp_a} FROM {adjudication} a JOIN {case} c ON c.id = a.case_id
     WHERE a.rubric_id = %(rubric)s AND c.dataset_id = %(dataset)s),
  (SELECT {fp_g} FROM {config} g WHERE g.rubric_id = %(rubric)s),
  (SELECT {fp_p} FROM {run} p WHERE p.parent_id = %(run)s),
  pg_current_xact_id_if_assigned()
"""


def evidence_key(*, run: Run) -> str | None:
    """A cache key for what `run_figures` reads: the run and its judgments, the dataset's cases, the
    rubric's labels and adjudications on them, the rubric's configs, and the run's bias probes (a probe's
    row changes with each batch of its judgments, like the run's own). None where it cannot be sure:
    not on PostgreSQL, or inside a transaction that has written (every row it writes carries the same
    xmin, so a second update of a row in it would not show). One query.
    """
    if connection.vendor != "postgresql":
        return None
    sql = _EVIDENCE_SQL.format(
        run=Run._meta.db_table, judgment=Judgment._meta.db_table, case=Case._meta.db_table,
        label=Label._meta.db_table, adjudication=Adjudication._meta.db_table, config=JudgeConfig._meta.db_table,
        **{f"fp_{t}": _FINGERPRINT.format(t=t) for t in ("r", "c", "l", "a", "g", "p")},
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, {"run": run.pk, "dataset": run.dataset_id, "rubric": run.config.rubric_id})
        *parts, writing = cursor.fetchone()
    if writing is not None:
        return None
    digest = hashlib.sha256("|".join(str(part) for part in parts).encode()).hexdigest()[:32]
    return f"evalhub:calibration:{run.pk}:{digest}"
