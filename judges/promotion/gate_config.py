"""The gate config CI reads (docs/gate.md): every promoted rubric with its pinned judge.

`judge` is the config of the rubric's evidence run — the judge that was calibrated — not a newer
version; `calibration` is the snapshot the promotion (or renewal) was granted on (an older
snapshot without the case counts `cases` / `cases_single` ships them null); `recalibration_needed`
and its reasons say whether that evidence still holds today, exactly as the promotion pages show it
(evidence stale, a rule its figures now break, drift on new cases: judges.drift). A rubric at observe
with no evidence ships the kept config last named at observe with `calibration: null`: nothing to
recalibrate yet. Draft rubrics are left out. A rubric that promoted a release tier (docs/promotion.md, "Tiers")
ships that tier's evidence config as `release_judge` and its snapshot as `release_calibration` (both null
without one): what `evalhub-gate check --tier release` judges with. `requires_cli` is the lowest evalhub-gate that
knows every field used (judges.gate.versions.FIELD_VERSIONS). A gate config is one project's (`project`: its
slug): served by GET /api/gates for the token's project (gates:read) and written by `manage.py export_gates
--project SLUG`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from evalhub.models import Project
from judges.drift.selectors import ci_events
from judges.engine import JudgeConfig as EngineConfig
from judges.gate.config import GATES_SCHEMA
from judges.gate.versions import requires_cli
from judges.models import ModelPrice, RubricEvent, Tier
from judges.promotion.selectors import evidence_checks
from labeling.models import Rubric

# The `calibration` keys of docs/gate.md, in its order, taken from the promotion's snapshot.
CALIBRATION_KEYS: tuple[str, ...] = (
    "run", "n", "repeats", "agreement", "agreement_ci95", "kappa", "false_pass", "false_fail", "true_pass_rate",
    "true_fail_rate", "flip_rate", "coverage", "cases", "cases_single",
)


def _judge_models(judge: dict[str, Any]) -> list[str]:
    """Every model the judge may call: its own, its secondary's and its semantic layer's embeddings model."""
    models = [judge.get("model"), *(
        (judge.get(part) or {}).get("model")
        for part in ("secondary", "semantic", "fallback", "second_opinion", "adjudicator")
    )]
    return [m for m in models if m]


def _calibration(event: RubricEvent) -> dict[str, Any] | None:
    """The evidence snapshot CI reads (`calibration`, `release_calibration`); None without evidence."""
    if event.run_id is None:
        return None
    snapshot = event.figures or {}
    return {key: snapshot.get(key) for key in CALIBRATION_KEYS} | {"run": event.run_id, "repeats": event.run.repeats}


def gate_config(*, project: Project, now: datetime | None = None) -> dict[str, Any]:
    """The gate config (docs/gate.md) of one project as a JSON-able dict: its promoted rubrics only, and its slug as
    `project` (what `evalhub-gate check --post` sends back, so results land in the project whose judges made them).
    Eight queries however many rubrics: the entries choosing each rubric's CI config (rubric, run or config, who
    promoted), those of the release tier, whether the evidence still holds (`evidence_checks`: five, the drift
    check's included) and the prices of the models those judges name (prices are instance-wide)."""
    events = list(ci_events(project=project))
    releases = {event.rubric_id: event for event in ci_events(project=project, tier=Tier.RELEASE)}
    checks = evidence_checks([event for event in events if event.run_id is not None])
    judges = {}
    for event in [*events, *releases.values()]:
        config = event.ci_config
        # Through the engine: the spec with its defaults and the hash CI will verify.
        judge = EngineConfig.from_dict(config.spec).to_dict(include_hash=True)
        if judge["config_hash"] != config.config_hash:  # a stored config never changes; if it did, stop here
            raise ValueError(f"judge config {config.pk} no longer matches its config_hash")
        judges[event.pk] = judge
    wanted = {model for judge in judges.values() for model in _judge_models(judge)}
    prices = {p.model: p.as_engine_price() for p in ModelPrice.objects.filter(model__in=wanted)}
    rubrics = []
    for event in events:
        judge = judges[event.pk]
        release = releases.get(event.rubric_id)
        release_judge = judges[release.pk] if release is not None else None
        # No evidence yet (observe from day one): no figures, so nothing that could need recalibrating.
        _, reasons = checks.get(event.rubric_id, ([], []))
        rubrics.append(
            {
                "slug": event.rubric.slug,
                "criteria": event.rubric.criteria,
                "stage": event.rubric.stage,
                "fail_closed": event.rubric.fail_closed,
                "judge": judge,
                "prices": {m: prices[m] for m in dict.fromkeys(_judge_models(judge)
                                                               + _judge_models(release_judge or {})) if m in prices},
                "calibration": _calibration(event),
                # A deterministic judge is a safety contract: it gates on every case whatever was chosen.
                "gate_on": Rubric.GateOn.EVERY_CASE if event.ci_config.deterministic else event.rubric.gate_on,
                "min_agent_pass_rate": event.rubric.min_agent_pass_rate,
                "release_judge": release_judge,
                "release_calibration": _calibration(release) if release is not None else None,
                "recalibration_needed": bool(reasons),
                "recalibration_reasons": reasons,
                "promoted_by": event.by.get_username(),
                "promoted_at": event.at.isoformat(),
            }
        )
    config: dict[str, Any] = {"schema": GATES_SCHEMA, "project": project.slug,
                              "generated_at": (now or timezone.now()).isoformat(), "requires_cli": None,
                              "rubrics": rubrics}
    config["requires_cli"] = requires_cli(config)  # the field itself counts: it is one the command must know
    return config
