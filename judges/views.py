"""The judges pages, for leads: judge config versions, the price table, starting and watching runs.

Writes go through judges.services (configs, runs) except the one-row price table, which the view saves.
"""

import json
import time
from datetime import UTC, datetime, timedelta

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HTMX_STOP_POLLING, trigger_client_event
from django_htmx.middleware import HtmxDetails

from evalhub.access import lead_required
from judges import selectors, services
from judges.charts import rubric_versions_chart
from judges.engine import is_pinned_snapshot
from judges.exporting import judgments_export
from judges.forms import JudgeConfigForm, ModelPriceForm, PreviewForm, RunStartForm
from judges.models import JudgeConfig, ModelPrice, Outcome, Run
from judges.probe_selectors import self_preference, version_probe_rows
from labeling.importing import Format
from labeling.models import Dataset, Rubric


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


JUDGMENTS_PER_PAGE = 50
RUNS_PER_PAGE = 50
# A queued run nobody claimed for this long most likely has no worker to go to.
NO_WORKER_AFTER = timedelta(seconds=15)
WORKER_COMMAND = "celery -A evalhub worker --beat"
EXPORT_CONTENT_TYPES = {
    Format.JSONL: "application/x-ndjson; charset=utf-8",
    Format.CSV: "text/csv; charset=utf-8",
}


def _get_config(config_id: int) -> JudgeConfig:
    try:
        return selectors.config_for_page(config_id)
    except JudgeConfig.DoesNotExist:
        raise Http404("No such judge config.") from None


def _get_run(run_id: int) -> Run:
    try:
        return selectors.run_for_page(run_id)
    except Run.DoesNotExist:
        raise Http404("No such run.") from None


def alias_warnings(spec: dict) -> list[str]:
    """A model named by a moving alias can change the gate's verdicts without any config change."""
    warnings = []
    for where, model in (("model", spec.get("model")), ("secondary model", (spec.get("secondary") or {}).get("model"))):
        if model and not is_pinned_snapshot(model):
            warnings.append(
                f"The {where} {model!r} is an alias, not a pinned snapshot: the provider can change what it "
                "answers with, and the verdicts with it. Prefer a dated snapshot."
            )
    return warnings


# ---- judge configs --------------------------------------------------------------------------------


@lead_required
def judge_index(request: HttpRequest) -> HttpResponse:
    """Every rubric with its judge config versions and runs."""
    return render(request, "judges/judge_index.html", {"rubrics": selectors.rubrics_with_configs()})


@lead_required
@vary_on_headers("HX-Request")
def config_list(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """A rubric's config versions, and the differences between two of them (the newest two by default)."""
    rubric = get_object_or_404(Rubric, slug=slug)
    configs = list(selectors.rubric_configs(rubric=rubric))
    by_version = {c.version: c for c in configs}
    old = by_version.get(_int(request.GET.get("a")))
    new = by_version.get(_int(request.GET.get("b")))
    if old is None and new is None and len(configs) >= 2:
        new, old = configs[0], configs[1]
    diff = selectors.spec_diff(old.spec, new.spec) if old and new else None
    context = {"rubric": rubric, "configs": configs, "old": old, "new": new, "diff": diff}
    if request.htmx:
        return render(request, "judges/config_list.html#diff", context)
    context["versions_chart"] = rubric_versions_chart(rubric=rubric)  # issue 6: calibration per version
    context["version_probes"] = version_probe_rows(context["versions_chart"].columns)  # issue 9: bias probes
    return render(request, "judges/config_list.html", context)


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None


@lead_required
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def config_create(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """The editor: prefilled from the newest version (or ?from=<id>); saving makes the next version.

    The "Preview prompt" button posts the same form with action=preview: nothing is saved, and the
    prompt the engine would send for the chosen case is shown (as a partial when htmx asks).
    """
    rubric = get_object_or_404(Rubric, slug=slug)
    base = None
    if from_id := _int(request.GET.get("from")):
        base = get_object_or_404(JudgeConfig, pk=from_id, rubric=rubric, external=False)
    base = base or selectors.newest_config(rubric=rubric)
    first_dataset = Dataset.objects.order_by("slug").first()
    preview_form = PreviewForm(request.POST or None, initial={"preview_dataset": first_dataset})
    preview = None
    if request.method == "POST":
        form = JudgeConfigForm(request.POST)
        if request.POST.get("action") == "preview":
            preview = _preview_from_post(request, rubric)
            if request.htmx:
                return render(request, "judges/config_form.html#prompt-preview", {"preview": preview})
        elif form.is_valid():
            config = _save_config(request, rubric, form)
            if config is not None:
                return redirect("judges:config_detail", config_id=config.pk)
    else:
        form = JudgeConfigForm(initial=JudgeConfigForm.initial_from_spec(base.spec) if base else {})
    return render(request, "judges/config_form.html", {
        "rubric": rubric, "form": form, "base": base, "preview_form": preview_form, "preview": preview,
    })


def _save_config(request: HttpRequest, rubric: Rubric, form: JudgeConfigForm) -> JudgeConfig | None:
    newest_before = selectors.newest_config(rubric=rubric)
    try:
        config = services.judge_config_save(
            rubric=rubric, spec=form.to_spec(), by=request.user, note=form.cleaned_data["note"],
        )
    except ValueError as exc:
        form.add_engine_error(exc)
        return None
    if newest_before is not None and config.pk == newest_before.pk:
        messages.info(request, f"Nothing changed: v{config.version} already says exactly this, so no new version "
                               "was saved.")
    else:
        messages.success(request, f"Saved {rubric.slug} v{config.version} (config_hash {config.config_hash[:12]}…).")
    for warning in alias_warnings(config.spec):
        messages.warning(request, warning)
    return config


def _preview_from_post(request: HttpRequest, rubric: Rubric) -> selectors.PromptPreview:
    # The raw fields, not cleaned ones: a preview helps most while the rest of the form is unfinished.
    data = request.POST
    dataset = Dataset.objects.filter(slug=data.get("preview_dataset", "")).first()
    return selectors.prompt_preview(
        dataset=dataset, external_id=data.get("preview_case", ""),
        template=data.get("prompt_template", "").replace("\r\n", "\n"),
        criteria=rubric.criteria, policy=data.get("policy", "").replace("\r\n", "\n"),
        output_kind=data.get("output_kind", "verdict"),
    )


@lead_required
@vary_on_headers("HX-Request")
def config_detail(request: HtmxHttpRequest, config_id: int) -> HttpResponse:
    """One version: its spec, hash, warnings, runs, and the exact prompt it sends for a chosen case."""
    config = _get_config(config_id)
    spec = config.spec
    behavioral = "behavioral" in spec.get("layers", [])
    preview_form = PreviewForm(request.GET or None)
    preview = None
    if behavioral:
        dataset = None
        if preview_form.is_valid():
            dataset = preview_form.cleaned_data["preview_dataset"]
        dataset = dataset or Dataset.objects.order_by("slug").first()
        preview = selectors.prompt_preview(
            dataset=dataset, external_id=request.GET.get("preview_case", ""), template=spec["prompt_template"],
            criteria=spec["criteria"], policy=spec["policy"], output_kind=spec["output_kind"],
        )
        if request.htmx:
            return render(request, "judges/config_detail.html#prompt-preview", {"preview": preview})
        if not request.GET:
            preview_form = PreviewForm(initial={"preview_dataset": dataset})
    models = [m for m in (spec.get("model"), (spec.get("secondary") or {}).get("model")) if m]
    prices = {p.model: p for p in ModelPrice.objects.filter(model__in=models)}
    return render(request, "judges/config_detail.html", {
        "config": config, "rubric": config.rubric, "spec_json": _pretty(spec),
        "warnings": [] if config.external else alias_warnings(spec) + _self_preference(config),
        "behavioral": behavioral, "preview_form": preview_form, "preview": preview,
        "prices": [(m, prices.get(m)) for m in models],
        "runs": selectors.config_recent_runs(config=config),
        "newest": selectors.newest_config(rubric=config.rubric),
    })


def _self_preference(config: JudgeConfig) -> list[str]:
    """Issue 9: a warning when the judge's model family wrote (some of) the cases it has judged. One query."""
    datasets = config.runs.filter(parent__isnull=True).values("dataset_id")  # a subquery, not a list
    warning = self_preference(spec=config.spec, dataset_ids=datasets)
    return [warning] if warning else []


def _pretty(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


# ---- prices -----------------------------------------------------------------------------------------


@lead_required
@require_http_methods(["GET", "POST"])
def price_list(request: HttpRequest) -> HttpResponse:
    """The price table (USD per million tokens), with a form to add a model."""
    form = ModelPriceForm(request.POST or None, initial={"model": request.GET.get("model", "")})
    if request.method == "POST" and form.is_valid():
        price = _save_price(request, form)
        messages.success(request, f"Added the price of {price.model}.")
        return redirect("judges:price_list")
    return render(request, "judges/price_list.html", {
        "prices": selectors.prices_for_list(), "form": form, "missing": selectors.models_without_price(),
    })


@lead_required
@require_http_methods(["GET", "POST"])
def price_edit(request: HttpRequest, price_id: int) -> HttpResponse:
    price = get_object_or_404(ModelPrice, pk=price_id)
    form = ModelPriceForm(request.POST or None, instance=price)
    if request.method == "POST" and form.is_valid():
        _save_price(request, form)
        messages.success(request, f"Updated the price of {price.model}.")
        return redirect("judges:price_list")
    return render(request, "judges/price_edit.html", {"form": form, "price": price})


def _save_price(request: HttpRequest, form: ModelPriceForm) -> ModelPrice:
    price = form.save(commit=False)
    price.updated_by = request.user
    price.updated_at = timezone.now()
    price.save()
    return price


# ---- runs -----------------------------------------------------------------------------------------


@lead_required
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def run_create(request: HtmxHttpRequest, config_id: int) -> HttpResponse:
    """Start a run of a config; the form shows its cost estimate first (refreshed as the fields change)."""
    config = _get_config(config_id)
    if config.external:
        messages.error(request, "An imported (external) config holds another tool's verdicts: it cannot run.")
        return redirect("judges:config_detail", config_id=config.pk)
    if request.method == "POST":
        form = RunStartForm(request.POST)
    else:
        defaults = {"repeats": RunStartForm.base_fields["repeats"].initial,
                    "concurrency": RunStartForm.base_fields["concurrency"].initial}
        first = Dataset.objects.order_by("slug").values_list("slug", flat=True).first()
        data = {**defaults, "dataset": first or "", **request.GET.dict()}
        form = RunStartForm(data)
    estimate = None
    if form.is_valid():
        data = form.cleaned_data
        if request.method == "POST":
            try:
                run = services.run_start(
                    config=config, dataset=data["dataset"], repeats=data["repeats"],
                    concurrency=data["concurrency"], spend_cap_usd=data["spend_cap_usd"], by=request.user,
                )
            except services.RunError as exc:
                form.add_error(None, str(exc))
            else:
                messages.success(request, f"Run {run.pk} queued: {run.total} judgments.")
                return redirect("judges:run_detail", run_id=run.pk)
        estimate = selectors.run_estimate(config=config, dataset=data["dataset"], repeats=data["repeats"])
    context = {"config": config, "rubric": config.rubric, "form": form, "estimate": estimate,
               "warnings": alias_warnings(config.spec)}
    if request.htmx and request.method == "GET":
        return render(request, "judges/run_create.html#estimate", context)
    return render(request, "judges/run_create.html", context)


@lead_required
def run_list(request: HttpRequest) -> HttpResponse:
    page = Paginator(selectors.runs_for_list(), RUNS_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "judges/run_list.html", {"page": page})


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
    }


@lead_required
@vary_on_headers("HX-Request")
def run_detail(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """A run: its progress (a partial polled by run_progress) and its judgments, 50 a page, filterable."""
    run = _get_run(run_id)
    filters = {
        "outcome": request.GET.get("outcome", "") if request.GET.get("outcome") in Outcome.values else "",
        "layer": request.GET.get("layer", "").strip(),
        "error": request.GET.get("error", "").strip(),
        "search": request.GET.get("q", "").strip(),
    }
    rows = selectors.run_judgments(run=run, **filters)
    page = Paginator(rows, JUDGMENTS_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "run": run, "page": page, "filters": filters, "filter_query": query.urlencode(),
        "outcomes": Outcome.choices, "choices": selectors.run_filter_choices(run=run),
    }
    if request.htmx and request.htmx.target == "judgments":
        return render(request, "judges/run_detail.html#judgments", context)
    context |= _progress_context(run, None)
    context["config"] = run.config
    return render(request, "judges/run_detail.html", context)


@lead_required
def run_progress(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """The polled progress partial; a finished or cancelled run answers 286, which stops htmx's polling."""
    run = _get_run(run_id)
    try:
        since = float(request.GET["since"]) if "since" in request.GET else None
    except ValueError:
        since = None
    context = _progress_context(run, since)
    response = render(request, "judges/run_detail.html#progress", context)
    if context["finished"]:
        response.status_code = HTMX_STOP_POLLING
        # The judgments table reloads once, now that every judgment is in.
        trigger_client_event(response, "run-finished")
    return response


@lead_required
@require_POST
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _get_run(run_id)
    services.run_cancel(run=run)
    messages.success(request, f"Run {run.pk} cancelled: no further chunk will be claimed.")
    return redirect("judges:run_detail", run_id=run.pk)


@lead_required
@require_POST
def run_retry(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _get_run(run_id)
    try:
        count = services.run_retry_not_evaluated(run=run)
    except services.RunError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Run {run.pk} queued again for its {count} not-evaluated judgment(s).")
    return redirect("judges:run_detail", run_id=run.pk)


@lead_required
def run_export(request: HttpRequest, run_id: int, fmt: str) -> StreamingHttpResponse:
    """The run's judgments in the import format, streamed."""
    run = _get_run(run_id)
    try:
        fmt = Format(fmt)
    except ValueError:
        raise Http404("Unknown format.") from None
    response = StreamingHttpResponse(judgments_export(run=run, fmt=fmt), content_type=EXPORT_CONTENT_TYPES[fmt])
    name = f"run-{run.pk}-{run.config.rubric.slug}-v{run.config.version}-judgments.{fmt}"
    response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=name)
    return response
