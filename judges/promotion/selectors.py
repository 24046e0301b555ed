"""Reads for promotion, the gate config and CI results: each rubric's evidence and whether it still holds.

A rubric's evidence is the run of its newest promotion or renewal, unless a demotion to draft came
after it (judges.models.RubricEvent). "Recalibration needed" (docs/promotion.md) is computed for every
promoted rubric at once, in a fixed number of queries however many rubrics there are: the staleness
of all evidence runs in one query, then the same readers the report uses for all their runs at once
(`judges.calibration.selectors.case_frame` and `not_evaluated_judgments`: each case's judgment counts, the
human verdicts of all their rubrics, the not-evaluated judgments), and the rules from the same pure functions
`judges.calibration.selectors.run_rules` uses (tests pin that both agree).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pandas as pd
from django.db.models import Count, Exists, IntegerField, Max, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from evalhub.models import Project
from judges.calibration.metrics import CASE_COLUMNS, COLUMNS, calibration_figures
from judges.calibration.rules import RuleResult, config_models, evaluate_rules
from judges.calibration.selectors import (
    NOT_FINISHED,
    ShownRule,
    case_frame,
    criteria_stale_reasons,
    evidence_figures,
    not_evaluated_judgments,
    policy_stale_reasons,
    rubric_thresholds,
    shown_label,
    shown_relaxed,
    shown_rules,
    shown_threshold,
)
from judges.configs.selectors import newest_config
from judges.drift.selectors import ci_events, drift_reason, evidence_events, fresh_drift_reason, newest_checks
from judges.models import CiResult, JudgeConfig, Judgment, RubricEvent, Run, Tier
from judges.probes.selectors import probe_judgments, with_probe_figures
from labeling.disputes.agreement import paired_labels
from labeling.models import Case, Label, Rubric
from labeling.policies.selectors import policy_newest_versions

# Rules that are no recalibration reason of their own: staleness is shown once, as its stale reasons, and a
# newer config version is a candidate, which leaves the evidence standing (docs/promotion.md).
_SAID_BY_STALENESS = {"newest_config", "not_stale"}


def evidence_for(*, rubric: Rubric) -> RubricEvent | None:
    return evidence_events(rubric_ids=[rubric.pk]).first()


def label_in_granted_evidence(label: Label) -> str:
    """Why undoing this label would change a promotion's evidence: a promotion or renewal of its rubric,
    granted since the label was given on a run that judged its case, counted it. "" when none did.

    Registered with labeling.queue.services.UNDO_REFUSALS (judges/apps.py)."""
    judged = Judgment.objects.filter(run=OuterRef("run"), case=label.case_id)
    event = (
        RubricEvent.objects.filter(rubric=label.rubric_id, kind__in=[RubricEvent.Kind.PROMOTE, RubricEvent.Kind.RENEW],
                                   at__gte=label.updated_at)
        .filter(Exists(judged)).order_by("-at").first()
    )
    if event is None:
        return ""
    return (f"the {event.get_kind_display()} to {event.to_stage} on {event.at:%Y-%m-%d %H:%M} counted your label "
            "in its evidence.")


# ---- does the evidence still hold? --------------------------------------------------------------------


def _stale_reasons(runs: list[Run]) -> tuple[dict[int, list[str]], dict[int, int | None]]:
    """(run_id → calibration.stale_reasons(run=…), run_id → the newest kept config version of its config's tier) for
    every run, in one query instead of two per run (two when a run's config references a policy
    document); runs need `config__rubric` loaded."""
    changed = (
        Case.objects.filter(
            dataset_id=OuterRef("dataset_id"),
            content_changed_at__gt=OuterRef("finished_at"),
            created_at__lte=OuterRef("finished_at"),
        )
        .order_by()
        .values("dataset_id")
        .annotate(n=Count("pk"))
        .values("n")
    )
    newest_kept = (
        JudgeConfig.objects.filter(rubric_id=OuterRef("config__rubric_id")).kept_of_tier(OuterRef("config__tier"))
        .order_by()
        .values("rubric_id")
        .annotate(v=Max("version"))
        .values("v")
    )
    rows = Run.objects.filter(pk__in=[run.pk for run in runs]).annotate(
        changed=Coalesce(Subquery(changed, output_field=IntegerField()), 0),
        newest=Subquery(newest_kept, output_field=IntegerField()),
    ).values_list("pk", "status", "finished_at", "changed", "newest")
    specs = {run.pk: run.config.spec for run in runs}
    criteria = {run.pk: run.config.rubric.criteria for run in runs}
    projects = {run.pk: run.config.rubric.project_id for run in runs}
    referenced = {projects[pk] for pk, spec in specs.items() if spec.get("policy_ref")}
    policies = policy_newest_versions(project_ids=referenced) if referenced else {}
    reasons: dict[int, list[str]] = {}
    newest: dict[int, int | None] = {}
    for pk, status, finished_at, changed_count, newest_version in rows:
        newest[pk] = newest_version
        if status != Run.Status.FINISHED or finished_at is None:
            reasons[pk] = [NOT_FINISHED]
            continue
        mine = []
        if changed_count:
            mine.append(f"{changed_count} case{'' if changed_count == 1 else 's'} changed since this run finished")
        mine += criteria_stale_reasons(specs[pk], criteria[pk])
        reasons[pk] = mine + policy_stale_reasons(specs[pk], policies.get(projects[pk], {}))
    return reasons, newest


def evidence_rules(*, runs: list[Run]) -> dict[int, list[RuleResult]]:
    """run_id → every promotion rule for the run as it stands now; runs need config__rubric loaded.

    The same rules as `judges.calibration.selectors.run_rules`, for many runs in five queries (seven with probes).
    """
    if not runs:
        return {}
    stale, newest_versions = _stale_reasons(runs)
    cases = case_frame(runs=runs)
    missing = not_evaluated_judgments(cases=cases)
    case_groups = {int(run_id): rows for run_id, rows in cases.groupby("run_id", sort=False)}
    judgment_groups = {int(run_id): rows for run_id, rows in missing.groupby("run_id", sort=False)}
    # Bias probes are read only where a rubric's rules name them: one more query then.
    probed = [run.pk for run in runs if run.config.rubric.max_probe_moved is not None]
    probes = probe_judgments(parent_ids=probed) if probed else None
    labels = paired_labels(rubric_ids=sorted({run.config.rubric_id for run in runs}),
                           dataset_ids=sorted({run.dataset_id for run in runs}))
    label_groups = {key: rows for key, rows in labels.groupby(["rubric", "dataset"], sort=False)}
    out = {}
    columns = [*CASE_COLUMNS, "kind"]
    for run in runs:
        mine = case_groups.get(run.pk, pd.DataFrame(columns=columns))[columns]
        judgments = judgment_groups.get(run.pk, pd.DataFrame(columns=list(COLUMNS)))[list(COLUMNS)]
        mine_labels = label_groups.get((run.config.rubric_id, run.dataset_id), labels.iloc[0:0])
        figures = calibration_figures(judgments, cases=mine, reviewer_labels=mine_labels) | evidence_figures(mine)
        if probes is not None and run.pk in probed:
            figures = with_probe_figures(figures, mine, probes[probes["parent_id"] == run.pk])
        config = run.config
        newest = not config.external and not config.proposal and newest_versions[run.pk] == config.version
        out[run.pk] = evaluate_rules(
            figures=figures, repeats=run.repeats, thresholds=rubric_thresholds(config.rubric),
            is_newest_config=newest, stale_reasons=stale[run.pk], newest_version=newest_versions[run.pk],
            is_external=config.external,
            deterministic=config.deterministic, models=config_models(config.spec),
        )
    return out


def recalibration_reasons(rules: list[RuleResult], shown: list) -> list[str]:
    """Why a promoted rubric needs recalibrating: its stale reasons, then each rule its figures now break.

    `shown` is `calibration.shown_rules(run, rules)` (the same texts as the report page).
    """
    reasons: list[str] = []
    for rule, text in zip(rules, shown, strict=True):
        if rule.met:
            continue
        if rule.key == "not_stale":
            reasons.extend(rule.value)
        elif rule.key not in _SAID_BY_STALENESS:
            reasons.append(f"{text.label} is now {text.value}, needs {text.threshold}")
    return reasons


def evidence_checks(events: list[RubricEvent]) -> dict[int, tuple[list[RuleResult], list[str]]]:
    """rubric_id → (every rule for its evidence run now, why it needs recalibrating: [] when it holds),
    for `evidence_events` rows whose `rubric` is loaded. Six queries however many (eight with probes):
    the rules, then the newest drift check of each evidence (its reason last). The promotion pages and
    the gate config both read it, so they always agree."""
    for event in events:
        # The event's rubric object, so the rules read its current thresholds with no further query.
        event.run.config.rubric = event.rubric
    rules = evidence_rules(runs=[e.run for e in events])
    drift = newest_checks(events=events)
    out = {}
    for e in events:
        reasons = recalibration_reasons(rules[e.run_id], shown_rules(e.run, rules[e.run_id]))
        check = drift.get(e.rubric_id)
        drifted = [r for r in (drift_reason(check=check, rubric=e.rubric), fresh_drift_reason(check=check,
                                                                                           rubric=e.rubric)) if r]
        out[e.rubric_id] = (rules[e.run_id], reasons + drifted)
    return out


# ---- the overview and a rubric's promotion page -------------------------------------------------------


@dataclass
class PromotionRow:
    rubric: Rubric
    evidence: RubricEvent | None
    # The entry that chose the config CI runs: the evidence, or a config named at observe (then no evidence).
    ci: RubricEvent | None = None
    recalibration: list[str] = field(default_factory=list)
    rules: list[RuleResult] = field(default_factory=list)
    last_ci: CiResult | None = None
    relaxed: list[str] = field(default_factory=list)  # thresholds looser than the defaults
    # (its newest run with an audit sample, the agent's pass rate on it): filled by the overview page
    pass_rate: tuple[Run, dict] | None = None

    @property
    def agreement_now(self) -> float | None:
        """The evidence run's agreement on the current labels (the figure stored at the grant is
        `evidence.figures["agreement"]`); None without evidence or when undefined."""
        return next((rule.value for rule in self.rules if rule.key == "agreement_floor"), None)

    @property
    def candidate(self) -> int | None:
        """The kept config version newer than the evidence's (it leaves the evidence standing), or None."""
        newest = next((rule for rule in self.rules if rule.key == "newest_config"), None)
        return None if newest is None or newest.met else newest.value


def _latest_ci(rubric_ids: list[int]) -> dict[int, CiResult]:
    newest = CiResult.objects.filter(rubric=OuterRef("rubric")).order_by("-received_at", "-id").values("pk")[:1]
    latest = CiResult.objects.filter(rubric_id__in=rubric_ids, pk=Subquery(newest)).defer("cases")
    return {result.rubric_id: result for result in latest}


def promotion_rows(*, rubrics: list[Rubric]) -> list[PromotionRow]:
    """Each rubric with the entry choosing its CI config, its evidence, what breaks it now, and its latest CI
    result. Eight queries however many rubrics (CI entries, staleness, human verdicts, judgments, reviewers'
    labels, drift checks,
    latest CI results)."""
    ids = [r.pk for r in rubrics]
    chosen = {e.rubric_id: e for e in ci_events(rubric_ids=ids)} if ids else {}
    by_pk = {r.pk: r for r in rubrics}
    for event in chosen.values():
        event.rubric = by_pk[event.rubric_id]  # the caller's rubric objects
    events = {rubric_id: e for rubric_id, e in chosen.items() if e.run_id is not None}
    checks = evidence_checks(list(events.values()))
    latest = _latest_ci(ids) if ids else {}
    rows = []
    for rubric in rubrics:
        event = events.get(rubric.pk)
        row = PromotionRow(rubric=rubric, evidence=event, ci=chosen.get(rubric.pk), last_ci=latest.get(rubric.pk),
                           relaxed=shown_relaxed(rubric))
        if event is not None:
            row.rules, row.recalibration = checks[rubric.pk]
        rows.append(row)
    return rows


def promotion_overview(*, project: Project) -> list[PromotionRow]:
    """Every rubric of the project, those needing recalibration first (a lead's to-do), then by slug."""
    rows = promotion_rows(rubrics=list(project.rubrics.order_by("slug")))
    return sorted(rows, key=lambda row: not row.recalibration)


def candidate_runs(*, rubric: Rubric, tier: str | None = None) -> QuerySet[Run]:
    """Finished runs of the rubric's configs (of `tier`, when given), newest first, for the promotion form's evidence
    menu.

    Not sliced: the form looks the chosen run up in this same queryset. External configs' runs are
    listed too, so choosing one is refused with its rule rather than silently missing. Only runs over the rubric's
    own project's datasets: a rubric is never paired with another project's (docs/projects.md).
    """
    runs = (
        Run.objects.filter(config__rubric=rubric, dataset__project_id=rubric.project_id, status=Run.Status.FINISHED,
                           parent__isnull=True)  # no probe
        .select_related("config", "dataset")
        .order_by("-finished_at", "-pk")
    )
    return runs if tier is None else runs.filter(config__tier=tier)


@dataclass
class ReleaseTier:
    """A rubric's release tier on its promotion page: the entry holding its evidence, its rules now and why it needs
    recalibrating, and the newest kept release-tier config (what a promotion of the tier needs a run of)."""

    evidence: RubricEvent | None
    newest: JudgeConfig | None
    rules: list[RuleResult] = field(default_factory=list)
    recalibration: list[str] = field(default_factory=list)


def release_tier(*, rubric: Rubric) -> ReleaseTier:
    """The rubric's release tier. Two queries without one; eight with its evidence (`evidence_checks`)."""
    event = ci_events(rubric_ids=[rubric.pk], tier=Tier.RELEASE).first()
    tier = ReleaseTier(evidence=event, newest=newest_config(rubric=rubric, tier=Tier.RELEASE))
    if event is not None:
        event.rubric = rubric
        tier.rules, tier.recalibration = evidence_checks([event])[rubric.pk]
    return tier


def default_evidence_run(*, rubric: Rubric, runs: QuerySet[Run], tier: str = Tier.DEFAULT) -> Run | None:
    """The run the promote and renew forms offer first: the newest of `runs` (candidate_runs) that can be
    evidence, of the newest kept config of `tier` and not stale; None when no run can. Three queries."""
    newest = newest_config(rubric=rubric, tier=tier)
    if newest is None:
        return None
    mine = list(runs.filter(config=newest))
    for run in mine:
        run.config.rubric = rubric  # the staleness check reads its criteria
    stale, _ = _stale_reasons(mine) if mine else ({}, {})
    return next((run for run in mine if not stale[run.pk]), None)


def kept_configs(*, rubric: Rubric) -> QuerySet[JudgeConfig]:
    """The rubric's kept config versions of the default tier, newest first: what CI may run at observe."""
    return JudgeConfig.objects.filter(rubric=rubric).kept_of_tier(Tier.DEFAULT)


def warn_needs(*, rubric: Rubric, config: JudgeConfig | None) -> list[ShownRule]:
    """The rules a promotion to warn will check, each with what it needs under this rubric's thresholds, as the
    refusal shows them, for a run of `config` (deterministic or not); those that would not apply are left out.
    No query."""
    thresholds = rubric_thresholds(rubric)
    rules = evaluate_rules(
        figures={}, repeats=0, thresholds=thresholds, is_newest_config=True, stale_reasons=[],
        deterministic=config is not None and config.deterministic,
        models=config_models(config.spec if config is not None else {}),
    )
    return [ShownRule(rule.key, shown_label(rule), False, "", shown_threshold(rule, thresholds))
            for rule in rules if rule.applies]


def rubric_events(*, project: Project | None = None, rubric: Rubric | None = None) -> QuerySet[RubricEvent]:
    """The audit log of the project's rubrics (or of one rubric), newest first, with who, the rubric and the run;
    one query per page."""
    if project is None and rubric is None:
        raise ValueError("The audit log is a project's, or a rubric's: name one.")
    events = RubricEvent.objects.select_related("rubric", "by", "run__config", "config").order_by("-id")
    if project is not None:
        events = events.filter(rubric__project=project)
    return events if rubric is None else events.filter(rubric=rubric)


# ---- CI results over time -----------------------------------------------------------------------------

CI_PERIODS = {"7": 7, "30": 30, "90": 90}
CI_MAX_SHOWN = 60


def ci_results(*, rubric: Rubric, days: int) -> list[CiResult]:
    """The rubric's CI results of the last `days` days, oldest first (newest last), at most CI_MAX_SHOWN."""
    since = timezone.now() - timedelta(days=days)
    newest = list(
        CiResult.objects.filter(rubric=rubric, received_at__gte=since).defer("cases")  # the chart needs no cases
        .order_by("-received_at", "-id")[:CI_MAX_SHOWN]
    )
    return newest[::-1]


CI_CASES_SHOWN = 500
_CASE_ORDER = {"fail": 0, "not_evaluated": 1, "pass": 2}


def ci_result_cases(*, result: CiResult) -> tuple[list[dict[str, Any]], int]:
    """(the cases shown, how many the result holds): failures first, then not evaluated, then flips among
    the passes, then the rest, in the order CI judged them; at most CI_CASES_SHOWN."""
    ordered = sorted(result.cases, key=lambda case: (_CASE_ORDER[case["verdict"]], not case["flipped"]))
    return ordered[:CI_CASES_SHOWN], len(result.cases)


def stand_in_hashes(*, rubric: Rubric, results: list[CiResult]) -> set[str]:
    """The config_hashes among `results` of this rubric's configs the scripted stand-in served (a run of theirs
    rests on its marked answers, JudgeConfig.uses_stand_in): those CI verdicts are the stand-in's, not a model's.
    One query, none without results."""
    hashes = {result.config_hash for result in results}
    if not hashes:
        return set()
    served = Judgment.objects.filter(run__config_id=OuterRef("pk"), stand_in=True)
    configs = JudgeConfig.objects.filter(rubric=rubric, config_hash__in=hashes).filter(Exists(served))
    return set(configs.values_list("config_hash", flat=True))
