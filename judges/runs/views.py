"""The run pages of a project, for its leads: starting runs, watching them, exporting their judgments.

Writes go through judges.runs.services. Every run is looked up through the project (judges.runs.selectors.project_runs):
another project's run is 404 here, as one that does not exist.
"""

import time
import uuid
from datetime import UTC, datetime, timedelta

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HTMX_STOP_POLLING, trigger_client_event

from evalhub.access import lead_required
from evalhub.http import HtmxHttpRequest
from evalhub.models import Project
from evalhub.params import real_number
from evalhub.tables import table_query
from judges.calibration.charts import narrowing_chart
from judges.calibration.estimates import ASSUMPTION
from judges.configs import selectors as config_selectors
from judges.estimates.forms import AuditSampleForm
from judges.estimates.selectors import run_pass_rate
from judges.models import JudgeConfig, Outcome, Run
from judges.runs import selectors, services
from judges.runs.banners import banner_runs, live_message, parse_run_ids
from judges.runs.exporting import judgments_export
from judges.runs.forms import RunStartForm
from labeling.importing import Format

# 50 one-line rows: the run page of a 2,000-case run stays under 2,500 px tall.
CASES_PER_PAGE = 50
RUNS_PER_PAGE = 50
# A queued run nobody claimed for this long most likely has no worker to go to.
NO_WORKER_AFTER = timedelta(seconds=15)
WORKER_COMMAND = "celery -A evalhub worker --beat"
EXPORT_CONTENT_TYPES = {
    Format.JSONL: "application/x-ndjson; charset=utf-8",
    Format.CSV: "text/csv; charset=utf-8",
}


def _get_config(project: Project, config_id: int) -> JudgeConfig:
    try:
        return config_selectors.config_for_page(config_id, project=project)
    except JudgeConfig.DoesNotExist:
        raise Http404("No such judge config.") from None


# ---- runs -----------------------------------------------------------------------------------------


@lead_required
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def run_create(request: HtmxHttpRequest, project: Project, config_id: int) -> HttpResponse:
    """Start a run of a config on one of the project's datasets; the form shows its cost estimate first (refreshed
    as the fields change)."""
    config = _get_config(project, config_id)
    if config.external:
        messages.error(request, "An imported (external) config holds another tool's verdicts: it cannot run.")
        return redirect("judges:config_detail", project=project.slug, config_id=config.pk)
    if request.method == "POST":
        form = RunStartForm(request.POST, project=project)
    else:
        defaults = {"repeats": RunStartForm.base_fields["repeats"].initial,
                    "concurrency": RunStartForm.base_fields["concurrency"].initial, "start_token": uuid.uuid4()}
        data = {**defaults, "dataset": selectors.recent_dataset_slug(project=project) or "", **request.GET.dict()}
        form = RunStartForm(data, project=project)
    estimate = None
    if form.is_valid():
        data = form.cleaned_data
        if request.method == "POST":
            try:
                run = services.run_start(
                    config=config, dataset=data["dataset"], repeats=data["repeats"],
                    concurrency=data["concurrency"], spend_cap_usd=data["spend_cap_usd"], by=request.user,
                    start_token=data["start_token"], fresh=data["fresh"],
                )
            except services.RunError as exc:
                form.add_error(None, str(exc))
            else:
                # The same words whether this request started the run or an earlier post of the same form did.
                live_message(request, f"Run {run.pk} started from this form: {run.total} judgments.", [run])
                return redirect("judges:run_detail", project=project.slug, run_id=run.pk)
        estimate = selectors.run_estimate(
            config=config, dataset=data["dataset"], repeats=data["repeats"], concurrency=data["concurrency"],
            fresh=data["fresh"],
        )
    context = {"config": config, "rubric": config.rubric, "form": form, "estimate": estimate,
               "warnings": config_selectors.config_warnings(config.spec)}
    if request.htmx and request.method == "GET":
        return render(request, "judges/runs/run_create.html#estimate", context)
    return render(request, "judges/runs/run_create.html", context)


@lead_required
def run_list(request: HttpRequest, project: Project) -> HttpResponse:
    """The project's runs, searchable and sortable, with their agreement (loaded per row), their report and a
    pick of two runs to compare."""
    table = table_query(request, sorts=selectors.RUN_SORTS, default="-created")
    runs = selectors.runs_for_list(project=project, search=table.search, ordering=table.ordering)
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "judges/runs/run_list.html", {"page": page, "table": table,
                                                          "filter_query": query.urlencode()})


def _progress_context(run: Run, since: float | None) -> dict:
    now = timezone.now()
    no_worker = False
    if run.status == Run.Status.QUEUED:
        # A re-run keeps its created_at; the page's first render stands in for when it was queued again.
        queued_at = run.created_at
        if run.started_at is not None and since:
            queued_at = max(run.created_at, datetime.fromtimestamp(since, tz=UTC))
        no_worker = (run.started_at is None or since is not None) and now - queued_at > NO_WORKER_AFTER
    return {
        "run": run, "no_worker": no_worker, "worker_command": WORKER_COMMAND,
        "finished": run.status in {Run.Status.FINISHED, Run.Status.CANCELLED},
        "since": int(since or time.time()),
        "took": run.finished_at - run.started_at if run.finished_at and run.started_at else None,
    }


@lead_required
@vary_on_headers("HX-Request")
def run_detail(request: HtmxHttpRequest, project: Project, run_id: int) -> HttpResponse:
    """A run: its progress (a partial polled by run_progress) and its judgments, one row per case with its
    repeats side by side, 50 cases a page, filterable and sortable; listed as they come in."""
    run = selectors.run_for_page_or_404(run_id, project=project)
    table = table_query(request, sorts=selectors.CASE_SORTS, default="case")
    filters = {
        "outcome": request.GET.get("outcome", "") if request.GET.get("outcome") in Outcome.values else "",
        "layer": request.GET.get("layer", "").strip(),
        "error": request.GET.get("error", "").strip(),
        "search": table.search,
    }
    case_rows = selectors.run_case_rows(run=run, ordering=table.ordering, **filters)
    page = Paginator(case_rows, CASES_PER_PAGE).get_page(request.GET.get("page"))
    judgments = selectors.run_case_judgments(run=run, case_ids=[row["case_id"] for row in page.object_list])
    repeats = range(1, run.repeats + 1)
    rows = []
    for row in page.object_list:
        cells = [judgments.get(row["case_id"], {}).get(repeat) for repeat in repeats]
        # The row's one-line summary: the first reason a repeat gave.
        reason = next((j.reason for j in cells if j is not None and j.reason), "")
        rows.append({**row, "flipped": row["verdicts"] > 1, "repeats": cells, "reason": reason})
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "run": run, "page": page, "rows": rows, "repeats": repeats, "filters": filters, "table": table,
        "filter_query": query.urlencode(), "outcomes": Outcome.choices,
        "choices": selectors.run_filter_choices(run=run),
        "running": run.status in {Run.Status.QUEUED, Run.Status.RUNNING},
    }
    if request.htmx and request.htmx.target == "judgments":
        return render(request, "judges/runs/run_detail.html#judgments", context)
    context |= _progress_context(run, None)
    context["config"] = run.config
    context["drift"] = selectors.run_drift_check(run=run)
    pass_rate = run_pass_rate(run=run, history=True)
    context |= {"pass_rate": pass_rate, "audit_form": AuditSampleForm(), "assumption": ASSUMPTION,
                "narrowing_chart": narrowing_chart(history=pass_rate["history"],
                                                   judge_pass_rate=pass_rate["judge_pass_rate"])}
    return render(request, "judges/runs/run_detail.html", context)


@lead_required
def run_progress(request: HtmxHttpRequest, project: Project, run_id: int) -> HttpResponse:
    """The polled progress partial; a finished or cancelled run answers 286, which stops htmx's polling."""
    run = selectors.run_for_page_or_404(run_id, project=project)
    # The page's own first render, as a Unix time (up to the year 2286).
    since = real_number(request.GET["since"], name="since", low=0, high=1e10) if "since" in request.GET else None
    context = _progress_context(run, since)
    response = render(request, "judges/runs/run_detail.html#progress", context)
    if context["finished"]:
        response.status_code = HTMX_STOP_POLLING
        # The judgments table reloads once, now that every judgment is in.
        trigger_client_event(response, "run-finished")
    return response


@lead_required
@require_GET
def run_banner(request: HttpRequest, project: Project) -> HttpResponse:
    """The live state of the project's runs a "queued" banner follows (?runs=12,13; judges.runs.banners). Polled
    while one is queued or running; then 286 stops the polling, and the banner says how the work ended."""
    runs = banner_runs(parse_run_ids(request.GET.get("runs", "")), project=project)
    working = any(run.status in services.UNFINISHED for run in runs)
    context = {"runs": runs, "working": working, "run_ids": ",".join(str(run.pk) for run in runs)}
    response = render(request, "judges/runs/_live_banner.html", context)
    if not working:
        response.status_code = HTMX_STOP_POLLING
    return response


@lead_required
@require_POST
def run_cancel(request: HttpRequest, project: Project, run_id: int) -> HttpResponse:
    run = selectors.run_for_page_or_404(run_id, project=project)
    services.run_cancel(run=run)
    messages.success(request, f"Run {run.pk} cancelled: the calls in flight finish, no new call starts.")
    return redirect("judges:run_detail", project=project.slug, run_id=run.pk)


@lead_required
@require_POST
def run_retry(request: HttpRequest, project: Project, run_id: int) -> HttpResponse:
    run = selectors.run_for_page_or_404(run_id, project=project)
    try:
        count = services.run_retry_not_evaluated(run=run)
    except services.RunError as exc:
        messages.error(request, str(exc))
    else:
        live_message(request, f"Run {run.pk} queued again for its {count} not-evaluated judgment(s).", [run])
    return redirect("judges:run_detail", project=project.slug, run_id=run.pk)


@lead_required
def run_export(request: HttpRequest, project: Project, run_id: int, fmt: str) -> StreamingHttpResponse:
    """The run's judgments in the import format, streamed; a CSV's formulas neutralised unless `raw_formulas=1`."""
    run = selectors.run_for_page_or_404(run_id, project=project)
    try:
        fmt = Format(fmt)
    except ValueError:
        raise Http404("Unknown format.") from None
    raw = fmt == Format.CSV and request.GET.get("raw_formulas") == "1"
    pieces = judgments_export(run=run, fmt=fmt, neutralise_formulas=not raw)
    response = StreamingHttpResponse(pieces, content_type=EXPORT_CONTENT_TYPES[fmt])
    raw_suffix = "-raw-formulas" if raw else ""
    name = f"run-{run.pk}-{run.config.rubric.slug}-v{run.config.version}-judgments{raw_suffix}.{fmt}"
    response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=name)
    return response
