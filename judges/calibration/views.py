"""The calibration pages, for leads: one run's report, and two runs compared.

Every figure comes from judges.calibration.selectors (the same numbers as the JSON command and the API); the
views only choose what to show. Query counts are fixed whatever the number of cases: the run arrives as
two frames (its cases' counts and its not-evaluated judgments), the tables are sliced from them, and
each repeat's verdict and reason are read for the one page of a table shown.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import numpy as np
import pandas as pd
from django.contrib import messages
from django.core.cache import cache
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST
from django.views.decorators.vary import vary_on_headers

from evalhub.access import lead_required
from evalhub.http import HtmxHttpRequest
from evalhub.models import Project
from judges.calibration.charts import agreement_band, threshold_chart
from judges.calibration.explorer import Setting, replay, sweep
from judges.calibration.metrics import above_reviewers_warning, disagreements
from judges.calibration.rules import promotable
from judges.calibration.selectors import (
    case_judgments,
    contested_judgments,
    evidence_key,
    explorer_frame,
    run_figures,
    run_frames,
    run_rules,
    shown_relaxed,
    shown_rules,
)
from judges.engine import JudgeConfig as EngineConfig
from judges.models import Run
from judges.probes.selectors import probe_panel
from judges.runs import selectors
from labeling.disputes.services import request_more_labels
from labeling.models import LabelingRefused, LabelRequest

ROWS_PER_PAGE = 50
REPORT_ROWS_PER_PAGE = 20  # the report's disagreements: each row holds every repeat's reason
LIST_LIMIT = 100  # flipped and not-evaluated lists show this many; the rest are counted
REPORT_CACHE_SECONDS = 3600
ONLY_CHOICES = {"false_pass": "false passes", "false_fail": "false fails", "flips": "flips"}


def _filters(request: HttpRequest, figures: dict) -> dict[str, str]:
    only = request.GET.get("only", "")
    category = request.GET.get("category", "")
    split = request.GET.get("split", "")
    return {
        "only": only if only in ONLY_CHOICES else "",
        "category": category if category in figures["by_category"] else "",
        "split": split if split in figures["by_split"] else "",
    }


def filter_disagreements(rows: list[dict], figures: dict, filters: dict[str, str]) -> list[dict[str, Any]]:
    """The rows the filters keep. A flipped case always disagrees on some repeat, so "flips only" is a
    filter of this table too."""
    flipped = set(figures["flipped_cases"])
    wanted = {
        "false_pass": lambda row: row["human"] == "fail" and row["passes"] > 0,
        "false_fail": lambda row: row["human"] == "pass" and row["fails"] > 0,
        "flips": lambda row: row["external_id"] in flipped,
    }.get(filters["only"])
    return [
        row for row in rows
        if (not wanted or wanted(row))
        and (not filters["category"] or row["category"] == filters["category"])
        and (not filters["split"] or row["split"] == filters["split"])
    ]


def report_data(run: Run) -> dict[str, Any]:
    """What the report computes from the run's frame: the figures, every disagreement, the first
    flipped, not-evaluated and contested cases with their ids, and the ids of every contested case.

    Cached under `evidence_key`, which changes with anything the figures read, so filtering and paging
    a report (how a lead tunes a prompt) does not compute it again. The key is taken before the figures:
    a change in between makes the next key differ, so a cached value is never older than its key.
    """
    key = evidence_key(run=run)
    data = cache.get(key) if key else None
    if data is not None:
        return data
    cases, not_evaluated = run_frames(run=run)
    figures = run_figures(run=run, frames=(cases, not_evaluated))
    listed = {ne["external_id"] for ne in figures["not_evaluated"][:LIST_LIMIT]}
    listed.update(figures["flipped_cases"][:LIST_LIMIT])
    listed.update(figures["contested_cases"])  # every one: "send to reviewers" sends them all
    named = cases[cases["external_id"].isin(listed)]
    ids = dict(zip(named["external_id"].tolist(), named["case_id"].tolist(), strict=True))
    humans = dict(zip(named["external_id"].tolist(), named["human"].tolist(), strict=True))
    data = {
        "figures": figures,
        "rows": disagreements(cases),  # each repeat is read for the page shown
        "flipped": [{"external_id": e, "case_id": ids.get(e)} for e in figures["flipped_cases"][:LIST_LIMIT]],
        "not_evaluated": [ne | {"case_id": ids.get(ne["external_id"])} for ne in figures["not_evaluated"][:LIST_LIMIT]],
        "contested_ids": [ids[e] for e in figures["contested_cases"]],
        "contested": _contested_rows(run, [(ids[e], e, humans[e]) for e in figures["contested_cases"][:LIST_LIMIT]]),
        "explorer_frame": explorer_frame(run=run, cases=cases),  # None: no similarities to replay
    }
    if key:
        cache.set(key, data, REPORT_CACHE_SECONDS)
    return data


def _contested_rows(run: Run, cases: list[tuple[int, str, str]]) -> list[dict[str, Any]]:
    """(case_id, external_id, human) → the contested table's rows, each with its contested repeats and
    both judges' verdicts on them (one query, none when nothing is contested)."""
    judgments = contested_judgments(run=run, case_ids=[case_id for case_id, _, _ in cases]) if cases else {}
    return [
        {"case_id": case_id, "external_id": external_id, "human": human, "repeats": judgments.get(case_id, [])}
        for case_id, external_id, human in cases
    ]


def _second_opinion(run: Run) -> dict | None:
    """The config's second-opinion judge ({model, when: "its modes, told", adjudicator: its model or None}),
    or None (none, or only a fallback); an older `secondary` reads as the one it names."""
    try:
        cfg = EngineConfig.from_dict(run.config.spec)
    except ValueError:  # an external config's spec is no engine config
        return None
    second = cfg.second_opinion_judge
    if second is None:
        return None
    when = ", ".join(
        w["mode"] + (f": {', '.join(w['categories'])}" if w.get("categories") else "")
        + (f": {w['share']:.0%} of cases{'' if second.legacy else ' a run, rotating'}" if w.get("share") else "")
        for w in second.when
    )
    return {"model": second.model, "when": when, "adjudicator": cfg.adjudicator.model if cfg.adjudicator else None}


def _page_rows(run: Run, rows: list[dict], flipped: set[str]) -> list[dict]:
    """One page of the disagreements table, with each repeat's verdict and reason (read for this page only)."""
    judgments = case_judgments(run=run, case_ids=[row["case_id"] for row in rows]) if rows else {}
    return [
        row | {
            "flipped": row["external_id"] in flipped,
            "repeat_rows": [
                judgment | {"wrong": judgment["outcome"] in ("pass", "fail") and judgment["outcome"] != row["human"]}
                for judgment in judgments.get(row["case_id"], [])
            ],
        }
        for row in rows
    ]


def _threshold(request: HttpRequest, name: str, default: float | None) -> tuple[float | None, str]:
    text = request.GET.get(name, "").strip()
    if name not in request.GET:
        return default, ""
    if not text:
        return None, ""
    try:
        value = float(text)
    except ValueError:
        return default, f"{name} must be a number from 0 to 1, not {text[:20]!r}"
    if not 0 <= value <= 1:
        return default, f"{name} must be a number from 0 to 1, not {value:g}"
    return round(value, 2), ""


def _explorer(request: HtmxHttpRequest, run: Run, frame: pd.DataFrame | None) -> dict[str, Any] | None:
    """The threshold explorer's figures, chart and chosen setting (?pass_at=&fail_below=), or None when no
    judgment of the run has a similarity."""
    if frame is None:
        return None
    spec = run.config.spec
    semantic = spec.get("semantic")
    # An imported run's judge may have decided any case: the band replays its verdicts.
    behavioral = "behavioral" in spec.get("layers", []) or run.config.external
    current = {"pass_at": semantic["pass_at"], "fail_below": semantic.get("fail_below")} if semantic else None
    pass_at, pass_error = _threshold(request, "pass_at", current["pass_at"] if current else 0.8)
    fail_below, fail_error = _threshold(request, "fail_below", current["fail_below"] if current else None)
    errors = [e for e in (pass_error, fail_error) if e]
    if pass_at is None:
        pass_at = current["pass_at"] if current else 0.8
        errors.append("pass_at is needed")
    if not behavioral:
        fail_below = None  # no judge: every case below pass_at fails
    elif fail_below is not None and fail_below > pass_at:
        errors.append(f"fail_below {fail_below:g} is above pass_at {pass_at:g}: it is taken as {pass_at:g}")
        fail_below = pass_at
    chosen = {"pass_at": pass_at, "fail_below": fail_below}
    lowest = float(np.nanmin(frame["similarity"].to_numpy()))
    lo = max(0.0, min(0.5, np.floor(lowest * 10) / 10))
    points = sweep(frame, fail_below=fail_below, behavioral=behavioral, lo=lo)
    rows = [("chosen", replay(frame, Setting(pass_at, fail_below), behavioral=behavioral))]
    if current is not None:
        rows.insert(0, ("this run's", replay(frame, Setting(current["pass_at"], current["fail_below"]),
                                              behavioral=behavioral)))
    save_url = None
    if semantic and not run.config.external:
        query = {"from": run.config.pk, "pass_at": f"{pass_at:g}"}
        if fail_below is not None:
            query["fail_below"] = f"{fail_below:g}"
        save_url = reverse("judges:config_create", args=[request.project.slug, run.config.rubric.slug])
        save_url += "?" + urlencode(query)
    return {
        "chart": threshold_chart(points=points, floor=run.config.rubric.agreement_floor, current=current,
                                 chosen=chosen),
        "rows": rows, "chosen": chosen, "current": current, "behavioral": behavioral, "errors": errors,
        "save_url": save_url,
    }


GROUPINGS = (
    # (figures key, fold title, noun, plural): the report's per-group tables.
    ("by_category", "By category", "category", "categories"),
    ("by_split", "By split", "split", "splits"),
    ("by_kind", "By calibration kind", "kind", "kinds"),
)


def group_folds(figures: dict) -> list[dict[str, Any]]:
    """The per-group tables, each with the key figure its folded summary shows: its weakest group."""
    folds = []
    for key, title, noun, nouns in GROUPINGS:
        groups = figures[key]
        rated = [(g["agreement"], name) for name, g in groups.items() if g["agreement"] is not None]
        lowest = min(rated, default=None)
        folds.append({"key": key, "title": title, "noun": noun, "nouns": nouns, "groups": groups,
                      "lowest": {"agreement": lowest[0], "name": lowest[1]} if lowest else None})
    return folds


def _report_context(request: HtmxHttpRequest, run: Run) -> dict[str, Any]:
    data = report_data(run)
    figures = data["figures"]
    rules = run_rules(run=run, figures=figures)
    rubric = run.config.rubric
    filters = _filters(request, figures)
    rows = filter_disagreements(data["rows"], figures, filters)
    page = Paginator(rows, REPORT_ROWS_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    agreement = figures["agreement"]
    above = figures.get("judge_above_reviewers")
    # The warning metrics added when the judge is above the reviewers, shown as such (not as an overfit).
    suspect_warning = above_reviewers_warning(above) if above and above["above"] else None
    duration = run.finished_at - run.started_at if run.finished_at and run.started_at else None
    contested = data["contested"]
    # Which listed cases already wait for (or got) another label of this rubric: one query, only when
    # something is contested.
    requested = set(
        LabelRequest.objects.filter(rubric=rubric, case_id__in=[row["case_id"] for row in contested])
        .values_list("case_id", flat=True)
    ) if contested else set()
    return {
        "run": run, "rubric": rubric, "config": run.config, "figures": figures,
        "rules": shown_rules(run, rules), "relaxed": shown_relaxed(rubric),
        "promotable": promotable(rules), "failing": [r for r in rules if not r.met],
        "rules_met": sum(r.met for r in rules), "group_folds": group_folds(figures),
        "band": agreement_band(agreement=agreement, ci95=figures["agreement_ci95"],
                               floor=rubric.agreement_floor, ceiling=rubric.agreement_ceiling),
        "suspect_warning": suspect_warning, "filters": filters, "filter_query": query.urlencode(),
        "only_choices": ONLY_CHOICES, "page": page, "rows_per_page": REPORT_ROWS_PER_PAGE,
        # A filtered or paged table, or a replayed setting, comes back with its panel open (links work
        # without JavaScript); every panel is folded otherwise.
        "disagreement_cases": len(data["rows"]),
        "disagreements_open": any(name in request.GET for name in ("only", "category", "split", "page")),
        "explorer_open": any(name in request.GET for name in ("pass_at", "fail_below")),
        "rows": _page_rows(run, list(page.object_list), set(figures["flipped_cases"])),
        "flipped": data["flipped"], "not_evaluated": data["not_evaluated"],
        "flipped_more": max(0, len(figures["flipped_cases"]) - LIST_LIMIT),
        "not_evaluated_more": max(0, len(figures["not_evaluated"]) - LIST_LIMIT),
        "duration": duration,
        "probes": probe_panel(run=run, figures=figures),  # the "Bias probes" panel
        "second_opinion": _second_opinion(run),
        "contested": [row | {"requested": row["case_id"] in requested} for row in contested],
        "contested_more": max(0, len(figures["contested_cases"]) - LIST_LIMIT),
        "explorer": _explorer(request, run, data["explorer_frame"]),
    }


@lead_required
@vary_on_headers("HX-Request")
def run_report(request: HtmxHttpRequest, project: Project, run_id: int) -> HttpResponse:
    """Does this judge agree with the humans? Every figure, every promotion rule, and the cases behind them.

    Filters (?only=false_pass|false_fail|flips, ?category=, ?split=) narrow the disagreements table;
    with htmx only that table is swapped.
    """
    run = selectors.run_for_page_or_404(run_id, project=project)
    context = _report_context(request, run)
    if request.htmx and request.htmx.target == "disagreements":
        return render(request, "judges/calibration/report.html#disagreements", context)
    if request.htmx and request.htmx.target == "threshold-explorer" and context["explorer"] is not None:
        return render(request, "judges/calibration/report.html#explorer", context)
    return render(request, "judges/calibration/report.html", context)


@lead_required
def run_agreement(request: HttpRequest, project: Project, run_id: int) -> HttpResponse:
    """A run's agreement with the humans, for its row in the run list (loaded when the row shows): the
    report's own figure, from the report's cache when it is there."""
    run = selectors.run_for_page_or_404(run_id, project=project)
    agreement = report_data(run)["figures"]["agreement"] if run.status == Run.Status.FINISHED else None
    return render(request, "judges/runs/_agreement.html", {"run": run, "agreement": agreement})


@lead_required
@require_POST
def run_send_contested(request: HttpRequest, project: Project, run_id: int) -> HttpResponse:
    """Send the run's contested cases to the reviewers' queue for its rubric, as requests for another
    label (a human decides where the judges disagree). The reviewers see the case only, never
    either judge's verdict. A repeat changes nothing: cases asked for already are left alone.
    """
    run = selectors.run_for_page_or_404(run_id, project=project)
    rubric = run.config.rubric
    case_ids = report_data(run)["contested_ids"]  # the cases the report lists, by the same figures
    if not case_ids:
        messages.info(request, "No contested case with a human verdict to send.")
    else:
        try:
            sent = request_more_labels(
                case_ids=case_ids, rubric=rubric, by=request.user, reason=f"contested by second opinion (run {run.pk})"
            )
        except LabelingRefused as refused:  # lead_required lets only leads here; the service checks too
            messages.error(request, str(refused))
        else:
            already = f" ({sent.already} asked for already)" if sent.already else ""
            messages.success(
                request,
                f"Sent {sent.requested} contested case{'' if sent.requested == 1 else 's'} to the reviewers' queue "
                f"for {rubric.slug}{already}: each now needs one more label, from a reviewer who has not labeled it.",
            )
    return redirect(reverse("judges:run_report", args=[project.slug, run.pk]) + "#contested")


# ---- two runs side by side -----------------------------------------------------------------------

COMPARED = (
    # (key, label, kind): the rows of the side-by-side table. False passes and fails are compared as
    # rates (their counts beside them): runs with different K judge a case a different number of times.
    ("n", "cases with a human verdict", "count"),
    ("agreement", "agreement", "rate"),
    ("kappa", "Cohen's κ", "kappa"),
    ("false_pass_rate", "false pass rate", "rate"),
    ("false_fail_rate", "false fail rate", "rate"),
    ("true_pass_rate", "true pass rate", "rate"),
    ("true_fail_rate", "true fail rate", "rate"),
    ("flip_rate", "flip rate", "rate"),
    ("coverage", "coverage", "rate"),
)


def case_verdicts(cases: pd.DataFrame) -> pd.DataFrame:
    """One row per case of a cases frame (indexed by case_id): external_id, human, and the run's verdict,
    the majority of its evaluated repeats (a tie is "tie", none evaluated "not_evaluated", as the CI
    command decides)."""
    verdicts = cases.set_index("case_id")[["external_id", "human"]]
    verdicts["verdict"] = np.select(
        [cases["passes"] > cases["fails"], cases["fails"] > cases["passes"], cases["passes"] > 0],
        ["pass", "fail", "tie"], default="not_evaluated",
    )
    return verdicts


def verdict_changes(cases_a: pd.DataFrame, cases_b: pd.DataFrame) -> list[dict[str, Any]]:
    """Cases judged by both runs (their cases frames) whose verdict differs, by external_id, each marked
    "fixed" / "broken" when run B now agrees / no longer agrees with the human verdict (of run A's rubric)."""
    a, b = case_verdicts(cases_a), case_verdicts(cases_b)
    both = a.merge(b[["verdict"]], how="inner", left_index=True, right_index=True, suffixes=("_a", "_b"))
    changed = both[both["verdict_a"] != both["verdict_b"]].sort_values("external_id")
    human = changed["human"].astype(object).where(changed["human"].notna(), None)
    right_a, right_b = changed["verdict_a"].eq(human), changed["verdict_b"].eq(human)
    effect = np.select([right_b & ~right_a, right_a & ~right_b], ["fixed", "broken"], default="")
    return [
        {"case_id": case_id, "external_id": ext, "human": h, "verdict_a": va, "verdict_b": vb, "effect": e}
        for case_id, ext, h, va, vb, e in zip(
            [int(i) for i in changed.index], changed["external_id"].tolist(), human.tolist(),
            changed["verdict_a"].tolist(), changed["verdict_b"].tolist(), effect.tolist(), strict=True,
        )
    ]


def _side(run: Run) -> dict[str, Any]:
    cases, not_evaluated = run_frames(run=run)
    figures = run_figures(run=run, frames=(cases, not_evaluated))
    rules = run_rules(run=run, figures=figures)
    return {"run": run, "cases": cases, "figures": figures, "promotable": promotable(rules),
            "failing": [r.label for r in rules if not r.met]}


# A rate's count and what it counts over, as the confusion table holds them: (count, human verdict).
_COUNTED_OVER = {"false_pass_rate": ("judge_pass", "human_fail"), "false_fail_rate": ("judge_fail", "human_pass")}


def _counted(figures: dict, key: str) -> dict[str, int] | None:
    """{"count", "of"} for a rate of _COUNTED_OVER: 3 false passes of 24 judgments of human-failed cases."""
    if key not in _COUNTED_OVER:
        return None
    judge, human = _COUNTED_OVER[key]
    row = figures["confusion"][human]
    return {"count": row[judge], "of": row["judge_pass"] + row["judge_fail"]}


def _compared_rows(a: dict, b: dict) -> list[dict[str, Any]]:
    rows = []
    for key, label, kind in COMPARED:
        va, vb = a["figures"].get(key), b["figures"].get(key)
        delta = vb - va if va is not None and vb is not None else None
        rows.append({"key": key, "label": label, "kind": kind, "a": va, "b": vb, "delta": delta,
                     "counted_a": _counted(a["figures"], key), "counted_b": _counted(b["figures"], key)})
    return rows


@lead_required
@vary_on_headers("HX-Request")
def run_compare(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    """Two of the project's runs side by side (?a=<id>&b=<id>): the figures of each, and the cases whose verdict
    changed."""
    choices = selectors.runs_for_list(project=project).filter(status=Run.Status.FINISHED)[:100]
    context: dict[str, Any] = {"choices": choices, "a_id": request.GET.get("a", ""), "b_id": request.GET.get("b", "")}
    if not (request.GET.get("a") and request.GET.get("b")):
        return render(request, "judges/calibration/compare.html", context)
    a = _side(selectors.run_for_page_or_404(request.GET["a"], project=project))
    b = _side(selectors.run_for_page_or_404(request.GET["b"], project=project))
    changes = verdict_changes(a["cases"], b["cases"])
    page = Paginator(changes, ROWS_PER_PAGE).get_page(request.GET.get("page"))
    # Each run's outcomes, repeat by repeat, for this page's cases only: one query per run.
    shown = [change["case_id"] for change in page.object_list]
    judged_a, judged_b = (case_judgments(run=side["run"], case_ids=shown) if shown else {} for side in (a, b))
    page.object_list = [
        change | {"outcomes_a": [j["outcome"] for j in judged_a.get(change["case_id"], [])],
                  "outcomes_b": [j["outcome"] for j in judged_b.get(change["case_id"], [])]}
        for change in page.object_list
    ]
    query = request.GET.copy()
    query.pop("page", None)
    notes = []
    if a["run"].config.rubric_id != b["run"].config.rubric_id:
        notes.append("The runs judge different rubrics: each is measured against its own rubric's human verdicts, "
                     "and the changed cases show run A's.")
    if a["run"].dataset_id != b["run"].dataset_id:
        notes.append("The runs judged different datasets: only cases judged by both can change verdict.")
    stand_in = [name for name, side in (("run A", a), ("run B", b)) if side["run"].served_by_stand_in]
    context |= {
        "a": a, "b": b, "rows": _compared_rows(a, b), "page": page, "filter_query": query.urlencode(),
        "stand_in_verdicts": "The verdicts of " + " and ".join(stand_in) if stand_in else "",
        "changes": len(changes), "fixed": sum(c["effect"] == "fixed" for c in changes),
        "broken": sum(c["effect"] == "broken" for c in changes), "notes": notes,
    }
    if request.htmx and request.htmx.target == "changes":
        return render(request, "judges/calibration/compare.html#changes", context)
    return render(request, "judges/calibration/compare.html", context)
