"""The promotion pages, for leads: every rubric's stage and evidence, one rubric's promotion page, the audit log.

Writes go through judges.promotion.services (stage, evidence, thresholds, fail_closed: each one audited). A
refused promotion or renewal re-renders the page (400) listing every rule with the run's number and the
threshold.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST
from django.views.decorators.vary import vary_on_headers

from evalhub.access import lead_required
from evalhub.http import HtmxHttpRequest
from evalhub.models import Project
from evalhub.tables import table_query
from evalhub.templatetags.display import usd
from judges.calibration.selectors import shown_rules
from judges.drift.charts import drift_chart
from judges.drift.selectors import DRIFT_MIN_NEW_CASES, drift_at_work, drift_history
from judges.estimates.selectors import latest_estimates
from judges.models import CiResult, RubricEvent, Run, Tier
from judges.promotion import services as promotion
from judges.promotion.forms import (
    DemoteForm,
    ObserveForm,
    PromoteForm,
    ReleaseForm,
    RenewForm,
    ThresholdsForm,
    WithdrawForm,
)
from judges.promotion.selectors import (
    CI_CASES_SHOWN,
    CI_PERIODS,
    candidate_runs,
    ci_result_cases,
    ci_results,
    default_evidence_run,
    kept_configs,
    promotion_overview,
    promotion_rows,
    release_tier,
    rubric_events,
    stand_in_hashes,
    warn_needs,
)
from judges.traffic.forms import TrafficJudgingForm
from judges.traffic.selectors import traffic_pairs
from labeling.models import Rubric

EVENTS_PER_PAGE = 50
RECENT_EVENTS = 10
DEFAULT_PERIOD = "30"


def _get_rubric(project: Project, slug: str) -> Rubric:
    """The project's rubric `slug`: another project's is 404, as one that does not exist."""
    rubric = project.rubrics.filter(slug=slug).first()
    if rubric is None:
        raise Http404("No such rubric.")
    return rubric


# ---- CI results as SVG bars (geometry here, markup in the template: the CSP forbids inline styles) ----


@dataclass
class CiBar:
    x: float
    width: float
    segments: list[dict]  # css, y, height
    title: str
    result: CiResult


CHART_WIDTH, CHART_HEIGHT, CHART_PAD, CHART_TOP = 640, 150, 30, 10


def ci_chart(results: list[CiResult]) -> dict:
    """One stacked bar per CI result, oldest on the left, newest last: the share of cases passed,
    failed and not evaluated (each bar is 100 % of that run's cases)."""
    plot_h = CHART_HEIGHT - CHART_TOP - CHART_PAD
    usable = CHART_WIDTH - 2 * CHART_PAD
    slot = usable / max(len(results), 1)
    width = round(min(28.0, slot * 0.7), 1)
    bars = []
    for i, result in enumerate(results):
        x = round(CHART_PAD + i * slot + (slot - width) / 2, 1)
        y, segments = float(CHART_TOP), []
        for css, count in (("ci-ne", result.not_evaluated), ("ci-fail", result.failed), ("ci-pass", result.passed)):
            height = round(plot_h * count / result.total, 1) if result.total else 0
            if height:
                segments.append({"css": css, "y": round(y, 1), "height": height})
                y += height
        title = (
            f"{result.received_at:%Y-%m-%d %H:%M} · {result.stage} · {result.outcome.replace('_', ' ')}: "
            f"{result.passed} pass, {result.failed} fail, {result.not_evaluated} not evaluated"
        )
        if result.calls is not None:
            cost = "unpriced" if result.cost_usd is None else usd(result.cost_usd)
            title += f" · {result.calls} calls, {cost}"
        bars.append(CiBar(x=x, width=width, segments=segments, title=title, result=result))
    return {
        "width": CHART_WIDTH, "height": CHART_HEIGHT, "bars": bars, "axis_y": CHART_HEIGHT - CHART_PAD,
        "first": results[0] if results else None, "last": results[-1] if results else None,
        "left": CHART_PAD, "right": CHART_WIDTH - CHART_PAD,
    }


def _ci_context(request: HttpRequest, rubric: Rubric) -> dict:
    """The CI results of the period chosen (?days=), their totals and chart, and which came from the stand-in."""
    period = request.GET.get("days", DEFAULT_PERIOD)
    period = period if period in CI_PERIODS else DEFAULT_PERIOD
    results = ci_results(rubric=rubric, days=CI_PERIODS[period])
    # Budget fields are optional (an older command sends none; an unpriced model sends no cost).
    reported = [r for r in results if r.calls is not None or r.cost_usd is not None]
    totals = {
        "runs": len(results),
        "passed": sum(r.passed for r in results),
        "failed": sum(r.failed for r in results),
        "not_evaluated": sum(r.not_evaluated for r in results),
        "reported": len(reported),
        "cost_usd": sum((r.cost_usd for r in reported if r.cost_usd is not None), Decimal(0)),
        "unpriced": sum(1 for r in reported if r.cost_usd is None),
        "calls": sum(r.calls or 0 for r in reported),
        "cache_hits": sum(r.cache_hits or 0 for r in reported),
    }
    return {"ci_results": results, "ci_chart": ci_chart(results), "ci_period": period, "ci_periods": CI_PERIODS,
            "ci_totals": totals, "ci_newest_first": results[::-1],
            "ci_stand_in": stand_in_hashes(rubric=rubric, results=results)}


def _drift_context(rubric: Rubric, row) -> dict:
    """The drift checks of the current evidence since it was granted, as a chart against the floor."""
    if row.evidence is None:
        return {"drift_checks": None}
    checks = drift_history(rubric=rubric, evidence_run_id=row.evidence.run_id, since=row.evidence.at)
    return {"drift_checks": checks[::-1][:10], "drift_chart": drift_chart(checks, floor=rubric.agreement_floor),
            "drift_running": drift_at_work(rubric=rubric), "drift_min_new": DRIFT_MIN_NEW_CASES}


# ---- pages --------------------------------------------------------------------------------------------


@lead_required
def overview(request: HttpRequest, project: Project) -> HttpResponse:
    """Every rubric of the project: its stage, its evidence, "recalibration needed", its latest CI result and the
    agent's latest estimated pass rate."""
    rows = promotion_overview(project=project)
    estimates = latest_estimates(rubric_ids=[row.rubric.pk for row in rows])
    for row in rows:
        row.pass_rate = estimates.get(row.rubric.pk)
    return render(request, "judges/promotion/promotion_overview.html", {"rows": rows})


def _page(
    request: HtmxHttpRequest,
    rubric: Rubric,
    *,
    observe_form: ObserveForm | None = None,
    promote_form: PromoteForm | None = None,
    renew_form: RenewForm | None = None,
    demote_form: DemoteForm | None = None,
    thresholds_form: ThresholdsForm | None = None,
    release_form: ReleaseForm | None = None,
    withdraw_form: WithdrawForm | None = None,
    refused: dict | None = None,
    status: int = 200,
) -> HttpResponse:
    [row] = promotion_rows(rubrics=[rubric])
    runs = candidate_runs(rubric=rubric)
    next_stage = promotion.next_stage(rubric.stage)
    # Observe needs no evidence: entering it, and switching CI's config at it, name a config version.
    observing = rubric.stage in (Rubric.Stage.DRAFT, Rubric.Stage.OBSERVE)
    configs = kept_configs(rubric=rubric)
    if rubric.stage == Rubric.Stage.OBSERVE and row.ci is not None:
        configs = configs.exclude(pk=row.ci.ci_config.pk)  # a switch goes to another version
    if observing and observe_form is None:
        action = ObserveForm.ENTER if rubric.stage == Rubric.Stage.DRAFT else ObserveForm.SWITCH
        observe_form = ObserveForm(initial={"action": action}, configs=configs)
    # Entering observe is the observe form's; a promotion form posted for it (with a run) still shows its errors.
    show_promote = bool(next_stage) and (next_stage != Rubric.Stage.OBSERVE or promote_form is not None)
    promoted = rubric.stage != Rubric.Stage.DRAFT
    if (show_promote and promote_form is None) or (promoted and renew_form is None):
        # The menu lists every finished run, newest first; the forms start on the newest one that can be evidence.
        evidence = default_evidence_run(rubric=rubric, runs=runs)
        initial = {"run": evidence.pk} if evidence is not None else {}
        if show_promote and promote_form is None:
            promote_form = PromoteForm(initial={"to_stage": next_stage, **initial}, runs=runs)
        if promoted and renew_form is None:
            renew_form = RenewForm(initial=initial, runs=runs)
    if promoted and demote_form is None:
        demote_form = DemoteForm(rubric=rubric)
    release = _release_context(rubric, release_form, withdraw_form) if promoted else {}
    context = {
        "rubric": rubric,
        "row": row,
        "evidence_rules": shown_rules(row.evidence.run, row.rules) if row.evidence else [],
        "next_stage": next_stage,
        "stages": promotion.STAGES,
        "observe_form": observe_form if observing else None,
        "has_configs": configs.exists(),
        "ci_config": row.ci.ci_config if row.ci else None,
        "warn_needs": warn_needs(rubric=rubric, config=row.ci.ci_config if row.ci else None) if observing else [],
        "promote_form": promote_form if show_promote else None,
        "renew_form": renew_form if promoted else None,
        "has_candidates": runs.exists(),
        "demote_form": demote_form if promoted else None,
        "thresholds_form": thresholds_form or ThresholdsForm(initial=ThresholdsForm.initial_for(rubric)),
        "refused": refused,
        "events": rubric_events(rubric=rubric)[:RECENT_EVENTS],
        **_ci_context(request, rubric),
        **_drift_context(rubric, row),
        "traffic_pairs": traffic_pairs(rubric=rubric),
        "traffic_form": TrafficJudgingForm(project=rubric.project),
        **release,
    }
    if request.htmx and request.htmx.target == "ci-results":
        return render(request, "judges/promotion/promotion_rubric.html#ci", context)
    return render(request, "judges/promotion/promotion_rubric.html", context, status=status)


def _release_context(rubric: Rubric, release_form: ReleaseForm | None, withdraw_form: WithdrawForm | None) -> dict:
    """The release tier's section: its evidence and rules, the form that promotes or renews it on a run of a
    release-tier config, and the one that withdraws it."""
    release = release_tier(rubric=rubric)
    runs = candidate_runs(rubric=rubric, tier=Tier.RELEASE)
    if release_form is None:
        evidence = default_evidence_run(rubric=rubric, runs=runs, tier=Tier.RELEASE)
        release_form = ReleaseForm(initial={"run": evidence.pk} if evidence else {}, runs=runs, prefix="release")
    return {
        "release": release,
        "release_form": release_form, "has_release_candidates": runs.exists(),
        "withdraw_form": (withdraw_form or WithdrawForm(prefix="withdraw")) if release.evidence else None,
    }


@lead_required
@vary_on_headers("HX-Request")
def rubric_page(request: HtmxHttpRequest, project: Project, slug: str) -> HttpResponse:
    """One rubric's stage, evidence, promote / demote / thresholds forms, recent audit entries and CI results."""
    return _page(request, _get_rubric(project, slug))


@lead_required
def ci_result_page(request: HttpRequest, project: Project, slug: str, result_id: int) -> HttpResponse:
    """One CI result's cases as the command posted them: each verdict, flip and repeat, failures first."""
    rubric = _get_rubric(project, slug)
    result = CiResult.objects.filter(rubric=rubric, pk=result_id).first()
    if result is None:
        raise Http404("No such CI result for this rubric.")
    cases, total = ci_result_cases(result=result)
    return render(request, "judges/promotion/ci_result.html", {
        "rubric": rubric, "result": result, "cases": cases, "cases_total": total, "shown_most": CI_CASES_SHOWN,
        "stand_in": stand_in_hashes(rubric=rubric, results=[result]),
    })


def _refused(refusal: promotion.PromotionRefused, run: Run, action: str) -> dict:
    """Every rule, numbered as on the report page; the failing ones are the refusal's reasons."""
    run = Run.objects.select_related("config__rubric", "dataset").get(pk=run.pk)
    rules = shown_rules(run, refusal.results)
    return {"run": run, "action": action, "rules": [(i, rule) for i, rule in enumerate(rules, start=1)],
            "failing": [(i, rule) for i, rule in enumerate(rules, start=1) if not rule.met]}


@lead_required
@require_POST
def rubric_observe(request: HtmxHttpRequest, project: Project, slug: str) -> HttpResponse:
    """Enter observe, or switch CI's config at observe: a kept config version and a reason, no evidence."""
    rubric = _get_rubric(project, slug)
    form = ObserveForm(request.POST, configs=kept_configs(rubric=rubric))
    if not form.is_valid():
        return _page(request, rubric, observe_form=form, status=400)
    config, reason = form.cleaned_data["config"], form.cleaned_data["reason"]
    try:
        if form.cleaned_data["action"] == ObserveForm.ENTER:
            promotion.rubric_promote(rubric=rubric, to_stage=Rubric.Stage.OBSERVE, config=config, reason=reason,
                                     by=request.user)
            done = f"{rubric.slug} entered observe: CI runs v{config.version} and records its verdicts, never failing."
        else:
            promotion.rubric_switch_config(rubric=rubric, config=config, reason=reason, by=request.user)
            done = f"CI now runs v{config.version} of {rubric.slug} at observe."
    except promotion.PromotionError as exc:
        form.add_error(None, str(exc))
        return _page(request, rubric, observe_form=form, status=400)
    messages.success(request, done)
    return redirect("judges:promotion_rubric", project=project.slug, slug=rubric.slug)


@lead_required
@require_POST
def rubric_promote(request: HtmxHttpRequest, project: Project, slug: str) -> HttpResponse:
    rubric = _get_rubric(project, slug)
    form = PromoteForm(request.POST, runs=candidate_runs(rubric=rubric))
    if not form.is_valid():
        return _page(request, rubric, promote_form=form, status=400)
    run: Run = form.cleaned_data["run"]
    to_stage = form.cleaned_data["to_stage"]
    try:
        event = promotion.rubric_promote(
            rubric=rubric, to_stage=to_stage, run=run, reason=form.cleaned_data["reason"], by=request.user,
        )
    except promotion.PromotionRefused as refusal:
        refused = _refused(refusal, run, f"Promotion to {to_stage}")
        return _page(request, rubric, promote_form=form, refused=refused, status=400)
    except promotion.PromotionError as exc:
        form.add_error(None, str(exc))
        return _page(request, rubric, promote_form=form, status=400)
    without = "" if event.figures.get("human_evidence", True) else " without human evidence"
    messages.success(
        request, f"{rubric.slug} promoted from {event.from_stage} to {event.to_stage} on run {run.pk}{without}."
    )
    return redirect("judges:promotion_rubric", project=project.slug, slug=rubric.slug)


@lead_required
@require_POST
def rubric_renew(request: HtmxHttpRequest, project: Project, slug: str) -> HttpResponse:
    """New evidence at the current stage, by the promotion rules: clears "recalibration needed"."""
    rubric = _get_rubric(project, slug)
    form = RenewForm(request.POST, runs=candidate_runs(rubric=rubric))
    if not form.is_valid():
        return _page(request, rubric, renew_form=form, status=400)
    run: Run = form.cleaned_data["run"]
    try:
        event = promotion.rubric_renew(rubric=rubric, run=run, reason=form.cleaned_data["reason"], by=request.user)
    except promotion.PromotionRefused as refusal:
        refused = _refused(refusal, run, f"Renewal at {rubric.stage}")
        return _page(request, rubric, renew_form=form, refused=refused, status=400)
    except promotion.PromotionError as exc:
        form.add_error(None, str(exc))
        return _page(request, rubric, renew_form=form, status=400)
    without = "" if event.figures.get("human_evidence", True) else " without human evidence"
    messages.success(request, f"{rubric.slug}'s evidence at {event.to_stage} renewed on run {run.pk}{without}.")
    return redirect("judges:promotion_rubric", project=project.slug, slug=rubric.slug)


@lead_required
@require_POST
def rubric_release(request: HtmxHttpRequest, project: Project, slug: str) -> HttpResponse:
    """The release tier: promote it (or renew its evidence) on a run of a release-tier config, by the promotion
    rules at the rubric's stage; or withdraw it (action=withdraw). Each one audited."""
    rubric = _get_rubric(project, slug)
    if request.POST.get("action") == "withdraw":
        withdraw = WithdrawForm(request.POST, prefix="withdraw")
        if not withdraw.is_valid():
            return _page(request, rubric, withdraw_form=withdraw, status=400)
        try:
            promotion.rubric_demote(rubric=rubric, reason=withdraw.cleaned_data["reason"], by=request.user,
                                    tier=Tier.RELEASE)
        except promotion.PromotionError as exc:
            withdraw.add_error(None, str(exc))
            return _page(request, rubric, withdraw_form=withdraw, status=400)
        messages.success(request, f"{rubric.slug}'s release tier withdrawn: --tier release judges with its default "
                                  "judge.")
        return redirect("judges:promotion_rubric", project=project.slug, slug=rubric.slug)
    form = ReleaseForm(request.POST, runs=candidate_runs(rubric=rubric, tier=Tier.RELEASE), prefix="release")
    if not form.is_valid():
        return _page(request, rubric, release_form=form, status=400)
    run: Run = form.cleaned_data["run"]
    reason = form.cleaned_data["reason"]
    renewing = release_tier(rubric=rubric).evidence is not None
    try:
        if renewing:
            promotion.rubric_renew(rubric=rubric, run=run, reason=reason, by=request.user, tier=Tier.RELEASE)
        else:
            promotion.rubric_promote(rubric=rubric, to_stage=rubric.stage, run=run, reason=reason, by=request.user,
                                     tier=Tier.RELEASE)
    except promotion.PromotionRefused as refusal:
        refused = _refused(refusal, run, "Renewal of the release tier" if renewing else "Promotion of the release tier")
        return _page(request, rubric, release_form=form, refused=refused, status=400)
    except promotion.PromotionError as exc:
        form.add_error(None, str(exc))
        return _page(request, rubric, release_form=form, status=400)
    done = "renewed" if renewing else "promoted"
    messages.success(request, f"{rubric.slug}'s release tier {done} on run {run.pk} (v{run.config.version}).")
    return redirect("judges:promotion_rubric", project=project.slug, slug=rubric.slug)


@lead_required
@require_POST
def rubric_demote(request: HtmxHttpRequest, project: Project, slug: str) -> HttpResponse:
    rubric = _get_rubric(project, slug)
    form = DemoteForm(request.POST, rubric=rubric)
    if not form.is_valid():
        return _page(request, rubric, demote_form=form, status=400)
    try:
        event = promotion.rubric_demote(
            rubric=rubric, to_stage=form.cleaned_data["to_stage"], reason=form.cleaned_data["reason"], by=request.user
        )
    except promotion.PromotionError as exc:
        form.add_error(None, str(exc))
        return _page(request, rubric, demote_form=form, status=400)
    messages.success(request, f"{rubric.slug} demoted from {event.from_stage} to {event.to_stage}.")
    return redirect("judges:promotion_rubric", project=project.slug, slug=rubric.slug)


@lead_required
@require_POST
def rubric_thresholds(request: HtmxHttpRequest, project: Project, slug: str) -> HttpResponse:
    rubric = _get_rubric(project, slug)
    form = ThresholdsForm(request.POST)
    if not form.is_valid():
        return _page(request, rubric, thresholds_form=form, status=400)
    data = dict(form.cleaned_data)
    reason, fail_closed = data.pop("reason"), data.pop("fail_closed")
    try:
        events = promotion.rubric_thresholds_change(
            rubric=rubric, reason=reason, by=request.user, fail_closed=fail_closed, **data
        )
    except promotion.PromotionError as exc:
        form.add_error(None, str(exc))
        return _page(request, rubric, thresholds_form=form, status=400)
    changed = ", ".join(name for event in events for name in event.changes)
    messages.success(request, f"Changed {changed} of {rubric.slug}; the audit log keeps it.")
    return redirect("judges:promotion_rubric", project=project.slug, slug=rubric.slug)


# The audit log's orders (evalhub.tables).
AUDIT_SORTS = {"when": ("id",), "rubric": ("rubric__slug", "-id"), "who": ("by__username", "-id")}
AUDIT_SORT_CHOICES = [("-when", "newest first"), ("when", "oldest first"), ("rubric", "by rubric"), ("who", "by who")]


@lead_required
def audit_log(request: HttpRequest, project: Project) -> HttpResponse:
    """Every promotion, demotion and thresholds or fail_closed change of the project's rubrics, newest first;
    read-only."""
    rubrics = list(project.rubrics.order_by("slug").values_list("slug", flat=True))
    chosen = request.GET.get("rubric", "")
    kind = request.GET.get("kind", "")
    events = rubric_events(project=project)
    if chosen in rubrics:
        events = events.filter(rubric__slug=chosen)
    else:
        chosen = ""
    if kind in RubricEvent.Kind.values:
        events = events.filter(kind=kind)
    else:
        kind = ""
    tier = request.GET.get("tier", "")
    if tier in Tier.values:
        events = events.filter(tier=tier)
    else:
        tier = ""
    table = table_query(request, sorts=AUDIT_SORTS, default="-when")
    if table.search:
        events = events.filter(Q(reason__icontains=table.search) | Q(by__username__icontains=table.search))
    page = Paginator(events.order_by(*table.ordering), EVENTS_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "judges/promotion/audit_log.html", {
        "page": page, "rubrics": rubrics, "chosen": chosen, "kind": kind, "kinds": RubricEvent.Kind.choices,
        "tier": tier, "tiers": Tier.choices,
        "table": table, "sort_choices": AUDIT_SORT_CHOICES, "filter_query": query.urlencode(),
    })
