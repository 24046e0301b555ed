"""Reads of bias probes: their judgments as frames, and the report page's "Bias probes" panel.

Every read is a fixed number of queries whatever the number of cases or probes; the figures come from the pure
functions in judges.probes.variants. `run_probe_figures` adds the probes' figures to calibration's `run_figures` (the
rule's `probe_moved`) and `version_figures`, registered there by judges/apps.py: calibration sits below probes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from django.core.cache import cache
from django.db import connection
from django.db.models import Count, F, Max, Q, QuerySet

from judges.calibration.frames import raw_rows, typed_frame
from judges.engine import model_family
from judges.models import Judgment, Run
from judges.probes.variants import (
    CHANGED_FIELD,
    PROBE_HELP,
    PROBE_LABELS,
    name_moved_cases,
    probe_moved,
    probes_figures,
    self_preference_from_counts,
)
from judges.runs.variants import PROBE_KINDS
from labeling.models import Case

PROBE_COLUMNS = ["parent_id", "run_id", "probe", "case_id", "passes", "fails"]
MOVED_LISTED = 100  # moved cases listed per probe on the page; the rest are counted


def _counted(judgments) -> QuerySet:
    # Passes and fails per case, summed by the database: a case's K repeats come back as one row.
    return judgments.order_by().annotate(
        passes=Count("pk", filter=Q(outcome="pass")), fails=Count("pk", filter=Q(outcome="fail"))
    )


def probe_judgments(*, parent_ids: list[int]) -> pd.DataFrame:
    """The judgments of the newest finished probe of each kind of these runs, counted per case: columns
    PROBE_COLUMNS. Two queries (one without a finished probe): those probe runs, then their judgments
    counted per (run, case) by the database; each run's parent and kind join in pandas, not on the
    230,000 rows of three probes.

    An unfinished probe has no figures yet: a half-judged probe would move a share of half its cases.
    """
    newest = (
        Run.objects.filter(parent_id__in=parent_ids, status=Run.Status.FINISHED)
        .exclude(probe="")  # a drift run (judges.drift) is a child of its evidence run too, not a probe
        .order_by()
        .values("parent_id", "probe")
        .annotate(newest=Max("pk"))
        .values_list("newest", "parent_id", "probe")
    )
    probes = {run_id: (parent_id, kind) for run_id, parent_id, kind in newest}
    if not probes:
        return pd.DataFrame(columns=PROBE_COLUMNS)
    counts = _counted(Judgment.objects.filter(run_id__in=sorted(probes)).values("run_id", "case_id")).values_list(
        "run_id", "case_id", "passes", "fails"
    )
    columns = ["run_id", "case_id", "passes", "fails"]
    frame = typed_frame(raw_rows(counts), columns, integers=tuple(columns))
    frame["parent_id"] = frame["run_id"].map({run_id: parent for run_id, (parent, _) in probes.items()})
    frame["probe"] = frame["run_id"].map({run_id: kind for run_id, (_, kind) in probes.items()})
    return frame[PROBE_COLUMNS]


def with_probe_figures(figures: dict[str, Any], parent: pd.DataFrame, probes: pd.DataFrame) -> dict[str, Any]:
    """`figures` plus "probes" ({kind: probes.probe_result and its run}) and "probe_moved" (the largest share
    moved) when the run has a finished probe; `figures` unchanged otherwise. `parent` is the run's cases
    frame (metrics.CASE_COLUMNS: passes and fails per case) or its judgments, `probes` its rows of
    `probe_judgments`."""
    results = probes_figures(parent, probes)
    if not results:
        return figures
    return {**figures, "probes": results, "probe_moved": probe_moved(results)}


def run_probe_figures(frames: dict[int, pd.DataFrame]) -> dict[int, dict[str, Any]]:
    """{run id: "probes" and "probe_moved"} for each run of `frames` ({run id: its cases frame}) with a finished
    probe, as calibration's figures carry them (judges.calibration.selectors.RUN_FIGURE_EXTRAS). One query
    without a finished probe, two with, however many runs."""
    probes = probe_judgments(parent_ids=list(frames))
    added = {}
    for run_id, cases in frames.items():
        mine = probes[probes["parent_id"] == run_id]
        if len(mine):
            added[run_id] = with_probe_figures({}, cases, mine)
    return added


_PROBES_KEY_SQL = """
SELECT string_agg(id || ':' || xmin::text, ',' ORDER BY id), pg_current_xact_id_if_assigned()
FROM {run} WHERE id = %(run)s OR (parent_id = %(run)s AND status = %(finished)s)
"""
PROBES_CACHE_SECONDS = 3600


def probes_key(*, run: Run) -> str | None:
    """A cache key for `probe_figures`: what moved depends on the run's judgments and its finished probes'
    only (not on labels), and each of those runs' rows changes with every write of its judgments (the
    run services and the import count them on the row), so their row versions (PostgreSQL's xmin) stand
    for them. None off PostgreSQL, or inside a transaction that has written. One query."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute(_PROBES_KEY_SQL.format(run=Run._meta.db_table),
                       {"run": run.pk, "finished": Run.Status.FINISHED})
        versions, writing = cursor.fetchone()
    if writing is not None:
        return None
    return f"evalhub:probes:{run.pk}:{hashlib.sha256((versions or '').encode()).hexdigest()[:32]}"


def probe_figures(*, run: Run) -> dict[str, Any]:
    """{"probes": {kind: figures}, "probe_moved": share} of the run's newest finished probe of each kind
    ({} without one), as `run_figures` carries them. Cached under `probes_key` (the panel polls this
    while probes work): one query when cached, else five (the key, the newest probes and their counts,
    the run's, and the external ids of the cases that moved, none when nothing moved)."""
    key = probes_key(run=run)
    figures = cache.get(key) if key else None
    if figures is None:
        figures = _probe_figures(run)
        if key:
            cache.set(key, figures, PROBES_CACHE_SECONDS)
    return figures


def _probe_figures(run: Run) -> dict[str, Any]:
    probes = probe_judgments(parent_ids=[run.pk])
    if probes.empty:
        return {}
    counts = _counted(Judgment.objects.filter(run=run).values("case_id")).values_list("case_id", "passes", "fails")
    parent = pd.DataFrame.from_records(list(counts), columns=["case_id", "passes", "fails"])
    figures = with_probe_figures({}, parent, probes)
    moved = {case["case_id"] for result in figures["probes"].values() for case in result["moved_cases"]}
    names = dict(Case.objects.filter(pk__in=moved).values_list("pk", "external_id")) if moved else {}
    for result in figures["probes"].values():
        result["moved_cases"] = name_moved_cases(result["moved_cases"], names)
    return figures


def agent_model_counts(*, dataset_ids) -> dict[str | None, int]:
    """{metadata.agent_model: cases} over these datasets, None for cases that name no agent. One query."""
    rows = (
        Case.objects.filter(dataset_id__in=dataset_ids)
        .annotate(agent_model=F("metadata__agent_model"))
        .order_by()
        .values("agent_model")
        .annotate(n=Count("pk"))
        .values_list("agent_model", "n")
    )
    counts: dict[str | None, int] = {}
    for model, n in rows:
        key = model if isinstance(model, str) else None  # a JSON number or object names no model
        counts[key] = counts.get(key, 0) + n
    return counts


def self_preference(*, spec: dict, dataset_ids) -> str | None:
    """judges.probes.variants.self_preference_warning over the cases of these datasets (ids, or a values() queryset
    of them). One query; none when no model of a known family judges (contract checks alone)."""
    judged_by_model = spec.get("model") and "behavioral" in (spec.get("layers") or [])
    if not judged_by_model or model_family(spec["model"], spec.get("model_family")) == "unknown":
        return None
    return self_preference_from_counts(spec, agent_model_counts(dataset_ids=dataset_ids))


# ---- the panel on a run's report ------------------------------------------------------------------------


@dataclass
class ProbeRow:
    kind: str
    label: str
    help: str
    run: Run | None = None  # the newest probe of this kind, whatever its status
    figures: dict[str, Any] | None = None  # of the newest finished probe of this kind
    moved_cases: list[dict[str, Any]] = field(default_factory=list)  # listed, with their variant text
    more: int = 0

    @property
    def unfinished(self) -> bool:
        return self.run is not None and self.run.status in (Run.Status.QUEUED, Run.Status.RUNNING)

    @property
    def older_figures(self) -> bool:
        """The figures shown are of an earlier probe than the newest (which is still at work)."""
        return self.figures is not None and self.run is not None and self.figures["run"] != self.run.pk


@dataclass
class ProbePanel:
    run: Run
    rows: list[ProbeRow]
    warning: str | None
    can_start: bool
    why_not: str = ""
    probe_moved: float | None = None

    @property
    def unfinished(self) -> bool:
        return any(row.unfinished for row in self.rows)


def _why_not(run: Run) -> str:
    if run.parent_id is not None:
        what = f"a {run.probe} probe" if run.probe else "a drift check"
        return f"This run is itself {what} of run {run.parent_id}."
    if run.config.external:
        return "An imported (external) config holds another tool's verdicts: it cannot judge variants."
    if run.status != Run.Status.FINISHED:
        return "Probes are compared with this run's verdicts: they can start once it has finished."
    return ""


def probe_panel(*, run: Run, figures: dict[str, Any] | None = None) -> ProbePanel:
    """The "Bias probes" panel of a run's report: each kind's newest probe with its status, the figures of
    its newest finished one and its moved cases (variant text included), and the self-preference warning.

    Pass the report's `figures` (run_figures carries "probes") to save reading the judgments again.
    Constant queries: the probe runs, the dataset's agent models, the variants of the listed moved cases
    (only when some moved), and without `figures` the probe figures (`probe_figures`: one when cached).
    """
    results = (figures or {}).get("probes") if figures is not None else probe_figures(run=run).get("probes")
    results = results or {}
    newest: dict[str, Run] = {}
    for probe in Run.objects.filter(parent=run).exclude(probe="").order_by("-pk"):
        newest.setdefault(probe.probe, probe)
    rows = []
    for kind in PROBE_KINDS:
        result = results.get(kind)
        listed = result["moved_cases"][:MOVED_LISTED] if result else []
        rows.append(ProbeRow(
            kind=kind, label=PROBE_LABELS[kind], help=PROBE_HELP[kind], run=newest.get(kind), figures=result,
            moved_cases=[dict(case) for case in listed],
            more=max(0, len(result["moved_cases"]) - MOVED_LISTED) if result else 0,
        ))
    _attach_variants(rows)
    why_not = _why_not(run)
    return ProbePanel(
        run=run, rows=rows, why_not=why_not, can_start=not why_not,
        warning=self_preference(spec=run.config.spec, dataset_ids=[run.dataset_id]),
        probe_moved=(figures or {}).get("probe_moved") if figures is not None else probe_moved(results),
    )


def _attach_variants(rows: list[ProbeRow]) -> None:
    """Each listed moved case gets `variant_text`: the field its probe changed, as judged (repeat 1). One
    query for every probe's listed cases together."""
    wanted = {(row.figures["run"], case["case_id"]) for row in rows if row.figures for case in row.moved_cases}
    if not wanted:
        return
    run_ids, case_ids = {r for r, _ in wanted}, {c for _, c in wanted}
    found = {
        (run_id, case_id): variant
        for run_id, case_id, variant in Judgment.objects.filter(run_id__in=run_ids, case_id__in=case_ids, repeat=1)
        .values_list("run_id", "case_id", "variant")
        if (run_id, case_id) in wanted
    }
    for row in rows:
        for case in row.moved_cases:
            variant = found.get((row.figures["run"], case["case_id"])) or {}
            case["variant_field"] = CHANGED_FIELD[row.kind]
            case["variant_text"] = variant.get(CHANGED_FIELD[row.kind], "")


# ---- the rubric's config page: each version's newest run's probes -------------------------------------


def version_probe_rows(columns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """[{"label", "run", "probe_moved", "cells": [{kind, label, figures or None}]}] for the versions chart's
    columns (charts.versions_chart: each version's newest run, with "probes") whose run has a finished
    probe; [] when none has."""
    rows = []
    for column in columns:
        probes = column.get("probes") or {}
        if probes:
            rows.append({
                "label": column["label"], "run": column["run"], "probe_moved": probe_moved(probes),
                "cells": [{"kind": k, "label": PROBE_LABELS[k], "figures": probes.get(k)} for k in PROBE_KINDS],
            })
    return rows
