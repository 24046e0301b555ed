"""Promotion: the only writes of a rubric's stage, thresholds and fail_closed, each one audited.

docs/promotion.md: stages go one step at a time (draft → observe → warn → gate). Observe needs no
evidence: entering it names a kept config version for CI (and at observe a lead may switch CI to another
one the same way); warn and gate need the evidence of a run that meets every rule; a renewal puts new
evidence under the current stage by the same rules; demotion is always allowed, to any earlier stage.
Every change leaves a RubricEvent in the same transaction as the change itself, so the audit log can
never miss one.

Tiers (docs/promotion.md, "Tiers"): every evidence service takes a `tier`. The default tier is the rubric's
stage and the judge CI runs on pull requests. A rubric above draft may also promote a config of the `release`
tier, with its own evidence under the same rules ("newest" counted within the tier), at the rubric's stage: the
judge `evalhub-gate check --tier release` runs. It is renewed the same way and withdrawn by a release demotion;
a demotion to draft clears both tiers.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from django.db import transaction
from django.utils import timezone

from judges.calibration.rules import RuleResult, needs_human_evidence, promotable
from judges.calibration.selectors import rubric_thresholds, run_figures, run_rules
from judges.drift.selectors import ci_events
from judges.models import JudgeConfig, RubricEvent, Run, Tier
from labeling.models import Rubric

STAGES: tuple[str, ...] = tuple(Rubric.Stage.values)  # draft, observe, warn, gate, in order
# What a lead may change per rubric, and the type each holds.
COUNT_THRESHOLDS: tuple[str, ...] = ("min_cases", "min_repeats")
RATE_THRESHOLDS: tuple[str, ...] = (
    "agreement_floor", "agreement_ceiling", "min_true_pass_rate", "min_true_fail_rate", "max_flip_rate",
    "min_coverage",
)
# Rules a lead may add or take away: None means the rubric has no such rule.
OPTIONAL_COUNT_THRESHOLDS: tuple[str, ...] = ("min_cases_per_kind",)  # cases of each calibration kind
OPTIONAL_RATE_THRESHOLDS: tuple[str, ...] = ("max_probe_moved",)  # verdicts moved by bias probes
# On by default; off lets a deterministic judge be promoted without human labels, a judge name a model
# by an alias or a tag (a local model served under a tag, say), or a judge agree with the labels more than
# the reviewers agree with each other.
SWITCH_THRESHOLDS: tuple[str, ...] = (
    "require_human_evidence", "require_pinned_models", "refuse_judge_above_reviewers",
)
# What CI gates on at gate stage (docs/gate.md): every case, or the agent's corrected pass rate with its minimum.
GATE_ON_FIELDS: tuple[str, ...] = ("gate_on", "min_agent_pass_rate")
THRESHOLD_FIELDS: tuple[str, ...] = (
    COUNT_THRESHOLDS + RATE_THRESHOLDS + OPTIONAL_COUNT_THRESHOLDS + OPTIONAL_RATE_THRESHOLDS + SWITCH_THRESHOLDS
    + GATE_ON_FIELDS
)
MAX_REPEATS = 20  # a run has at most 20 repeats, so a higher minimum could never be met
# The figures a promotion keeps: the gate config's `calibration` and the rates beside them.
SNAPSHOT_KEYS: tuple[str, ...] = (
    "n", "agreement", "agreement_ci95", "kappa", "kappa_note", "false_pass", "false_fail", "false_pass_rate",
    "false_fail_rate", "true_pass_rate", "true_fail_rate", "flip_rate", "coverage", "cases", "cases_single",
)


class PromotionError(Exception):
    """A change that cannot be made as asked; the message says why."""


class PromotionRefused(PromotionError):
    """The evidence breaks a rule: `results` holds every rule, `failing` the ones not met."""

    def __init__(self, results: list[RuleResult]) -> None:
        self.results = results
        self.failing = [r for r in results if not r.met]
        broken = "; ".join(f"{r.label} {r.threshold_text}" for r in self.failing)
        super().__init__(f"The promotion is refused: {broken}")


def next_stage(stage: str) -> str | None:
    index = STAGES.index(stage)
    return STAGES[index + 1] if index + 1 < len(STAGES) else None


def earlier_stages(stage: str) -> list[str]:
    return list(STAGES[: STAGES.index(stage)])


def figures_snapshot(*, run: Run, figures: dict[str, Any], human_evidence: bool = True) -> dict[str, Any]:
    """The granted figures, as the gate config ships them (`calibration`) and the audit log shows them.

    `human_evidence` false (a deterministic judge granted without human labels): `coverage` is the one
    the rule checked, over every judgment, and the snapshot says so.
    """
    snapshot = {"run": run.pk, "repeats": run.repeats, "config_version": run.config.version} | {
        key: figures.get(key) for key in SNAPSHOT_KEYS
    }
    snapshot["deterministic"] = run.config.deterministic
    snapshot["human_evidence"] = human_evidence
    if not human_evidence:
        snapshot["coverage"] = figures.get("coverage_all")
    return snapshot


def _reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise PromotionError("Type the reason for this change: the audit log keeps it.")
    return reason


def _locked(rubric: Rubric, *, by) -> Rubric:
    """The rubric's row, locked; PromotionError unless `by` leads the rubric's project (or is the instance admin)."""
    check_lead(rubric=rubric, by=by)
    # Two leads acting at once: the second waits, then sees the stage the first left.
    return Rubric.objects.select_for_update().get(pk=rubric.pk)


def check_lead(*, rubric: Rubric, by) -> None:
    """Only a lead of the rubric's own project (or the instance admin) changes its stage, evidence or thresholds:
    the pages' door says so too, and a script or another caller must not get round it. One query."""
    if by is None or not getattr(by, "is_authenticated", False) or not by.leads(rubric.project_id):
        raise PromotionError(f"Only a lead of {rubric.slug}'s project may change its promotion.")


def _checked_evidence(*, rubric: Rubric, run: Run, tier: str) -> tuple[Run, dict[str, Any], list[RuleResult]]:
    """The run (reloaded), its figures and every rule, or PromotionError / PromotionRefused; call it
    inside the rubric's lock so the rules read the thresholds as they stand."""
    run = Run.objects.select_related("config__rubric", "dataset").get(pk=run.pk)
    if run.config.rubric_id != rubric.pk:
        raise PromotionError(f"Run {run.pk} judged the rubric {run.config.rubric.slug}, not {rubric.slug}.")
    if run.dataset.project_id != rubric.project_id:
        # Named without the other project's dataset: the refusal must not tell what another project holds.
        raise PromotionError(
            f"Run {run.pk} judged a dataset of another project: {rubric.slug}'s evidence is a run over a dataset of "
            "its own project."
        )
    if run.config.tier != tier:
        raise PromotionError(
            f"Run {run.pk} judged with v{run.config.version}, a config of the {run.config.tier} tier: the evidence of "
            f"the {tier} tier is a run of a {tier}-tier config."
        )
    if run.parent_id is not None and not run.probe:
        raise PromotionError(f"Run {run.pk} is a drift check of run {run.parent_id}: it is never evidence.")
    if run.parent_id is not None:
        raise PromotionError(
            f"Run {run.pk} is a {run.probe} probe of run {run.parent_id}: it judged variants, so it is never "
            "evidence."
        )
    run.config.rubric = rubric  # the locked row: its thresholds as they stand now
    figures = run_figures(run=run)
    results = run_rules(run=run, figures=figures)
    if not promotable(results):
        raise PromotionRefused(results)
    return run, figures, results


def _evidence_event(*, rubric: Rubric, kind: str, from_stage: str, run: Run, figures: dict[str, Any],
                    results: list[RuleResult], reason: str, by) -> RubricEvent:
    human = needs_human_evidence(thresholds=rubric_thresholds(rubric), deterministic=run.config.deterministic)
    return RubricEvent.objects.create(
        rubric=rubric, kind=kind, tier=run.config.tier, from_stage=from_stage, to_stage=rubric.stage, run=run,
        figures=figures_snapshot(run=run, figures=figures, human_evidence=human),
        rules=[asdict(r) for r in results], reason=reason, by=by,
    )


def _kept_config(*, rubric: Rubric, config: JudgeConfig) -> JudgeConfig:
    """The config reloaded, or PromotionError unless it is a kept (not external) version of this rubric."""
    config = JudgeConfig.objects.select_related("rubric").get(pk=config.pk)
    if config.rubric_id != rubric.pk:
        raise PromotionError(f"Config v{config.version} is a config of {config.rubric.slug}, not {rubric.slug}.")
    if config.external:
        raise PromotionError(
            f"Config v{config.version} holds verdicts imported from another tool: CI cannot run it."
        )
    if config.proposal:
        raise PromotionError(
            f"Config v{config.version} is a {config.proposal} judge improvement: CI runs kept versions only."
        )
    if config.tier != Tier.DEFAULT:
        raise PromotionError(
            f"Config v{config.version} is of the {config.tier} tier: only the default tier's config is named without "
            "evidence (a release tier is promoted on a run)."
        )
    return config


def rubric_promote(
    *, rubric: Rubric, to_stage: str, reason: str, by, run: Run | None = None, config: JudgeConfig | None = None,
    tier: str = Tier.DEFAULT,
) -> RubricEvent:
    """Move `rubric` one stage up, or raise PromotionError / PromotionRefused; with `tier="release"`, promote the
    run's release-tier config at the rubric's stage (`to_stage` is that stage: the release judge gates where the
    rubric does) by the same rules (_promote_release).

    Entering observe needs no evidence: it names the kept `config` version CI runs from now on (the audit
    entry holds that config and no run). Naming a `run` instead enters observe with that run as evidence,
    checked by every rule like a promotion to warn or gate, which always needs one.

    Together or not at all: the rubric is locked and its stage re-read, the run's figures and every
    rule are computed inside the lock (thresholds as they stand now), and the new stage and the
    audit entry with the granted figures are written in one transaction. A refused promotion writes
    nothing. The run must be one of this rubric's; an external config's run fails the newest-config
    rule, so it can never be evidence. A deterministic judge promoted where the rubric does not
    require human evidence is recorded as such (`figures.human_evidence` false).
    """
    if tier != Tier.DEFAULT:
        return _promote_release(rubric=rubric, to_stage=to_stage, reason=reason, by=by, run=run, config=config,
                                tier=tier)
    reason = _reason(reason)
    with transaction.atomic():
        rubric = _locked(rubric, by=by)
        expected = next_stage(rubric.stage)
        if expected is None:
            raise PromotionError(f"{rubric.slug} is at gate already: there is no stage above it.")
        if to_stage != expected:
            raise PromotionError(
                f"A promotion goes one stage at a time: {rubric.slug} is at {rubric.stage}, so the next stage "
                f"is {expected}, not {to_stage}."
            )
        if run is not None and config is not None:
            raise PromotionError("Name either the evidence run or the config version, not both.")
        if run is None and to_stage != Rubric.Stage.OBSERVE:
            raise PromotionError(
                f"A promotion to {to_stage} names the run that is its evidence: choose a finished run."
            )
        if run is None and config is None:
            raise PromotionError("Entering observe names the judge config version CI runs: choose one.")
        from_stage = rubric.stage
        if run is None:  # observe from day one: the config CI runs, no evidence
            config = _kept_config(rubric=rubric, config=config)
            _set_stage(rubric, to_stage)
            return RubricEvent.objects.create(
                rubric=rubric, kind=RubricEvent.Kind.PROMOTE, from_stage=from_stage, to_stage=to_stage,
                config=config, reason=reason, by=by,
            )
        run, figures, results = _checked_evidence(rubric=rubric, run=run, tier=tier)
        _set_stage(rubric, to_stage)
        return _evidence_event(rubric=rubric, kind=RubricEvent.Kind.PROMOTE, from_stage=from_stage, run=run,
                               figures=figures, results=results, reason=reason, by=by)


def _promote_release(
    *, rubric: Rubric, to_stage: str, reason: str, by, run: Run | None, config: JudgeConfig | None, tier: str
) -> RubricEvent:
    """The release tier's promotion: a run of a release-tier config, every rule checked, at the rubric's stage.

    Together or not at all, as a promotion: the rubric locked, the rules checked inside the lock, the audit entry
    (kind `promote`, tier `release`, the same stage from and to) written in the same transaction.
    """
    if tier not in Tier.values:
        raise PromotionError(f"There is no {tier!r} tier: the tiers are {', '.join(Tier.values)}.")
    reason = _reason(reason)
    with transaction.atomic():
        rubric = _locked(rubric, by=by)
        if rubric.stage == Rubric.Stage.DRAFT:
            raise PromotionError(
                f"{rubric.slug} is a draft: promote its default judge first; the {tier} tier gates at the rubric's "
                "stage."
            )
        if to_stage != rubric.stage:
            raise PromotionError(
                f"The {tier} tier has no stage of its own: it is promoted at {rubric.slug}'s stage, {rubric.stage}, "
                f"not {to_stage}."
            )
        if run is None or config is not None:
            raise PromotionError(f"A promotion of the {tier} tier names the run that is its evidence: choose a run.")
        run, figures, results = _checked_evidence(rubric=rubric, run=run, tier=tier)
        rubric.updated_at = timezone.now()
        rubric.save(update_fields=["updated_at"])
        return _evidence_event(rubric=rubric, kind=RubricEvent.Kind.PROMOTE, from_stage=rubric.stage, run=run,
                               figures=figures, results=results, reason=reason, by=by)


def _set_stage(rubric: Rubric, stage: str) -> None:
    rubric.stage = stage
    rubric.updated_at = timezone.now()
    rubric.save(update_fields=["stage", "updated_at"])


def rubric_switch_config(*, rubric: Rubric, config: JudgeConfig, reason: str, by) -> RubricEvent:
    """At observe, make CI run another kept config version of `rubric`, with no evidence (audited).

    The rubric is locked and its stage re-read; the audit entry (kind `switch`, holding the config and no
    run) is written in the same transaction. From then on the gate config ships that config with
    `calibration: null`, until a renewal or a promotion names a run again. Only at observe: at warn and
    gate CI runs the judge that was calibrated, and only new evidence changes it.
    """
    reason = _reason(reason)
    with transaction.atomic():
        rubric = _locked(rubric, by=by)
        if rubric.stage != Rubric.Stage.OBSERVE:
            raise PromotionError(
                f"{rubric.slug} is at {rubric.stage}: CI's config is switched without evidence only at observe."
            )
        config = _kept_config(rubric=rubric, config=config)
        current = ci_events(rubric_ids=[rubric.pk]).first()
        if current is not None and current.ci_config == config:
            raise PromotionError(f"CI already runs v{config.version} of {rubric.slug}: nothing changed.")
        rubric.updated_at = timezone.now()
        rubric.save(update_fields=["updated_at"])
        return RubricEvent.objects.create(
            rubric=rubric, kind=RubricEvent.Kind.SWITCH, from_stage=rubric.stage, to_stage=rubric.stage,
            config=config, reason=reason, by=by,
        )


def rubric_renew(*, rubric: Rubric, run: Run, reason: str, by, tier: str = Tier.DEFAULT) -> RubricEvent:
    """Make `run` the evidence of `rubric`'s `tier` at the stage it is at, by the promotion rules, or raise
    PromotionRefused: how "recalibration needed" clears without a demotion.

    As a promotion: rubric locked, rules checked inside the lock, the audit entry (kind `renew`, the
    same stage from and to) written in the same transaction; a refusal writes nothing. A draft rubric
    has no evidence to renew.
    """
    reason = _reason(reason)
    with transaction.atomic():
        rubric = _locked(rubric, by=by)
        if rubric.stage == Rubric.Stage.DRAFT:
            raise PromotionError(f"{rubric.slug} is a draft: it has no evidence to renew; promote it instead.")
        if tier != Tier.DEFAULT and not ci_events(rubric_ids=[rubric.pk], tier=tier).exists():
            raise PromotionError(f"{rubric.slug} has no {tier} tier to renew: promote one instead.")
        run, figures, results = _checked_evidence(rubric=rubric, run=run, tier=tier)
        rubric.updated_at = timezone.now()
        rubric.save(update_fields=["updated_at"])
        return _evidence_event(rubric=rubric, kind=RubricEvent.Kind.RENEW, from_stage=rubric.stage, run=run,
                               figures=figures, results=results, reason=reason, by=by)


def rubric_demote(*, rubric: Rubric, to_stage: str = "", reason: str, by, tier: str = Tier.DEFAULT) -> RubricEvent:
    """Move `rubric` down to any earlier stage; always allowed, with a reason.

    The stage and its audit entry are written together. A demotion to draft takes the rubric out of
    the gate config and leaves it with no evidence (in either tier): the next promotion needs a run again.
    With `tier="release"` it withdraws the release tier instead (`to_stage` unused; the stage stays): from then
    on `--tier release` judges with the default judge.
    """
    reason = _reason(reason)
    if tier != Tier.DEFAULT:
        with transaction.atomic():
            rubric = _locked(rubric, by=by)
            if not ci_events(rubric_ids=[rubric.pk], tier=tier).exists():
                raise PromotionError(f"{rubric.slug} has no {tier} tier to withdraw.")
            rubric.updated_at = timezone.now()
            rubric.save(update_fields=["updated_at"])
            return RubricEvent.objects.create(
                rubric=rubric, kind=RubricEvent.Kind.DEMOTE, tier=tier, from_stage=rubric.stage,
                to_stage=rubric.stage, reason=reason, by=by,
            )
    with transaction.atomic():
        rubric = _locked(rubric, by=by)
        if to_stage not in earlier_stages(rubric.stage):
            below = ", ".join(earlier_stages(rubric.stage)) or "none"
            raise PromotionError(
                f"{rubric.slug} is at {rubric.stage}: a demotion goes to an earlier stage ({below}), not {to_stage}."
            )
        from_stage = rubric.stage
        rubric.stage = to_stage
        rubric.updated_at = timezone.now()
        rubric.save(update_fields=["stage", "updated_at"])
        return RubricEvent.objects.create(
            rubric=rubric, kind=RubricEvent.Kind.DEMOTE, from_stage=from_stage, to_stage=to_stage, reason=reason,
            by=by,
        )


def _gates_deterministic(rubric: Rubric) -> bool:
    """Whether the judge CI runs for `rubric` (or, before there is one, its newest config) is deterministic."""
    event = ci_events(rubric_ids=[rubric.pk]).first()
    config = event.ci_config if event is not None else rubric.judge_configs.order_by("-version").first()
    return config is not None and config.deterministic


def threshold_errors(values: dict[str, Any]) -> dict[str, str]:
    """{field: message} for the thresholds in `values` that no rule could sensibly use; {} when all fit.

    Shared by the form and the service, so a page and a script are refused alike.
    """
    errors: dict[str, str] = {}
    for name in COUNT_THRESHOLDS:
        if name in values:
            value = values[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                errors[name] = "A whole number of at least 1."
            elif name == "min_repeats" and value > MAX_REPEATS:
                errors[name] = f"A run has at most {MAX_REPEATS} repeats."
    for name in OPTIONAL_COUNT_THRESHOLDS:
        value = values.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            errors[name] = "A whole number of at least 1, or blank for no such rule."
    for name in SWITCH_THRESHOLDS:
        if name in values and not isinstance(values[name], bool):
            errors[name] = "On or off (true or false)."
    for name in RATE_THRESHOLDS + OPTIONAL_RATE_THRESHOLDS:
        if name in values:
            value = values[name]
            if value is None and name in OPTIONAL_RATE_THRESHOLDS:
                continue  # no such rule
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                errors[name] = "A number from 0 to 1."
            elif not 0 <= value <= 1:
                errors[name] = "A fraction from 0 to 1 (0.8 is 80 %)."
    if "gate_on" in values and values["gate_on"] not in Rubric.GateOn.values:
        errors["gate_on"] = "Every case or pass rate."
    minimum = values.get("min_agent_pass_rate")
    if minimum is not None and (isinstance(minimum, bool) or not isinstance(minimum, int | float)
                                or not math.isfinite(minimum) or not 0 <= minimum <= 1):
        errors["min_agent_pass_rate"] = "A fraction from 0 to 1 (0.8 is 80 %), or blank."
    elif values.get("gate_on") == Rubric.GateOn.PASS_RATE and minimum is None and "min_agent_pass_rate" in values:
        errors["min_agent_pass_rate"] = "Gating on the pass rate needs the minimum rate the agent must reach."
    floor, ceiling = values.get("agreement_floor"), values.get("agreement_ceiling")
    both_valid = not {"agreement_floor", "agreement_ceiling"} & set(errors)
    if both_valid and floor is not None and ceiling is not None and floor >= ceiling:
        errors["agreement_ceiling"] = "The ceiling must be above the floor, or no agreement could pass."
    return errors


def rubric_thresholds_change(
    *, rubric: Rubric, reason: str, by, fail_closed: bool | None = None, **thresholds: int | float | bool | None
) -> list[RubricEvent]:
    """Change the rubric's promotion thresholds and/or fail_closed; returns the audit entries written.

    Only what differs is changed and recorded, as {field: [old, new]}: one `thresholds` entry for the
    thresholds, one `fail_closed` entry for the safety contract, written with the rubric in one
    transaction. Changing nothing is an error (an empty audit entry would say nothing). A threshold
    change never re-checks the rubric's current stage: "recalibration needed" shows when its evidence
    no longer meets the new thresholds.
    """
    unknown = sorted(set(thresholds) - set(THRESHOLD_FIELDS))
    if unknown:
        raise PromotionError(f"Unknown threshold(s): {', '.join(unknown)}.")
    errors = threshold_errors(thresholds)
    reason = _reason(reason)
    with transaction.atomic():
        rubric = _locked(rubric, by=by)
        merged = {name: getattr(rubric, name) for name in THRESHOLD_FIELDS} | thresholds
        errors = errors or threshold_errors(merged)
        if not errors and merged["gate_on"] == Rubric.GateOn.PASS_RATE and _gates_deterministic(rubric):
            errors = {"gate_on": "This rubric's judge is deterministic (contract checks only): a safety contract "
                                 "gates on every case, never on a rate."}
        if errors:
            raise PromotionError(" ".join(f"{name}: {message}" for name, message in errors.items()))
        changes = {
            name: [getattr(rubric, name), value] for name, value in thresholds.items() if getattr(rubric, name) != value
        }
        closed_changed = fail_closed is not None and fail_closed != rubric.fail_closed
        if not changes and not closed_changed:
            raise PromotionError("Nothing changed: the thresholds and fail_closed already have these values.")
        events = []
        stage = rubric.stage
        if changes:
            for name, (_, value) in changes.items():
                setattr(rubric, name, value)
            events.append(
                RubricEvent(rubric=rubric, kind=RubricEvent.Kind.THRESHOLDS, from_stage=stage, to_stage=stage,
                            changes=changes, reason=reason, by=by)
            )
        if closed_changed:
            events.append(
                RubricEvent(rubric=rubric, kind=RubricEvent.Kind.FAIL_CLOSED, from_stage=stage, to_stage=stage,
                            changes={"fail_closed": [rubric.fail_closed, fail_closed]}, reason=reason, by=by)
            )
            rubric.fail_closed = fail_closed
        rubric.updated_at = timezone.now()
        rubric.save(update_fields=[*changes, *(["fail_closed"] if closed_changed else []), "updated_at"])
        for event in events:
            event.save()
        return events
