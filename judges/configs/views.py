"""The judge config pages, for leads: config versions, the prompt preview, the price table.

Writes go through judges.configs.services, except the one-row price table, which the view saves.
"""

import json

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods
from django.views.decorators.vary import vary_on_headers

from evalhub.access import admin_required, lead_required
from evalhub.http import HtmxHttpRequest
from evalhub.models import Membership, Project, Role
from evalhub.params import object_id, whole
from judges.calibration.charts import rubric_versions_chart
from judges.configs import selectors, services
from judges.configs.forms import OTHER_JUDGES, JudgeConfigForm, ModelPriceForm, PreviewForm, preview_examples
from judges.models import JudgeConfig, ModelPrice, Tier
from judges.probes.selectors import self_preference, version_probe_rows
from judges.promotion.selectors import evidence_for
from labeling.models import PolicyDocument, Rubric


@lead_required
def judge_index(request: HttpRequest, project: Project) -> HttpResponse:
    """Every rubric of the project with its judge config versions and runs."""
    return render(request, "judges/configs/judge_index.html",
                  {"rubrics": selectors.rubrics_with_configs(project=project)})


@lead_required
@vary_on_headers("HX-Request")
def config_list(request: HtmxHttpRequest, project: Project, slug: str) -> HttpResponse:
    """A rubric's config versions, and the differences between two of them (the newest two by default)."""
    rubric = get_object_or_404(project.rubrics, slug=slug)
    configs = selectors.mark_policy_behind(list(selectors.rubric_configs(rubric=rubric)), project=project)
    by_version = {c.version: c for c in configs}
    old = by_version.get(object_id(request.GET.get("a")))
    new = by_version.get(object_id(request.GET.get("b")))
    if old is None and new is None and len(configs) >= 2:
        new, old = configs[0], configs[1]
    diff = selectors.spec_diff(old.spec, new.spec) if old and new else None
    context = {"rubric": rubric, "configs": configs, "old": old, "new": new, "diff": diff}
    if request.htmx:
        return render(request, "judges/configs/config_list.html#diff", context)
    context["versions_chart"] = rubric_versions_chart(rubric=rubric)  # calibration per version
    context["version_probes"] = version_probe_rows(context["versions_chart"].columns)  # bias probes
    return render(request, "judges/configs/config_list.html", context)


def _get_config(project: Project, config_id: int) -> JudgeConfig:
    try:
        return selectors.config_for_page(config_id, project=project)
    except JudgeConfig.DoesNotExist:
        raise Http404("No such judge config.") from None


@lead_required
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def config_create(request: HtmxHttpRequest, project: Project, slug: str) -> HttpResponse:
    """The editor: prefilled from the newest version (or ?from=<id>); saving makes the next version.

    Beside it, the prompt the engine would send for a case the lead picks, from the fields as they stand:
    the picker and the "Preview prompt" button post the same form with action=preview, nothing is saved,
    and htmx gets the picker and the preview back as a partial.
    """
    rubric = get_object_or_404(project.rubrics, slug=slug)
    base = None
    if from_id := object_id(request.GET.get("from")):
        base = get_object_or_404(JudgeConfig, pk=from_id, rubric=rubric, external=False)
    # ?tier=release starts the tier's newest version, or, before it has one, from the default tier's newest.
    tier = request.GET.get("tier") if request.GET.get("tier") in Tier.values else None
    if base is None and tier is not None:
        base = selectors.newest_config(rubric=rubric, tier=tier)
    base = base or selectors.newest_config(rubric=rubric)
    tier = base.tier if base is not None and tier is None else (tier or Tier.DEFAULT)
    if request.method == "POST":
        form = JudgeConfigForm(request.POST, project=project)
        preview_form = PreviewForm(request.POST, project=project)
        if request.POST.get("action") == "preview":
            if request.htmx:
                return _preview_response(request, _editor_preview(rubric, form, preview_form))
        elif form.is_valid():
            config = _save_config(request, rubric, form)
            if config is not None:
                return redirect("judges:config_detail", project=project.slug, config_id=config.pk)
    else:
        initial = JudgeConfigForm.initial_from_spec(base.spec) if base else {}
        form = JudgeConfigForm(initial={**initial, **_explored_thresholds(request), "tier": tier}, project=project)
        preview_form = _preview_start(project, rubric)
    return render(request, "judges/configs/config_form.html", {
        "rubric": rubric, "form": form, "base": base, "preview_form": preview_form,
        "preview_url": request.path, "preview_method": "post", **_editor_preview(rubric, form, preview_form),
    })


def _preview_start(project: Project, rubric: Rubric) -> PreviewForm:
    """The picker before the lead chooses: the rubric's dataset (see preview_default_dataset), its first case."""
    return PreviewForm(initial={"preview_dataset": selectors.preview_default_dataset(rubric=rubric)}, project=project)


def _preview_response(request: HttpRequest, panel: dict) -> HttpResponse:
    """The picker and the preview, for htmx; its controls ask the same URL the same way again."""
    context = {**panel, "preview_url": request.path, "preview_method": request.method.lower()}
    return render(request, "judges/configs/_preview_card.html#preview-panel", context)


def _explored_thresholds(request: HttpRequest) -> dict:
    """?pass_at=&fail_below= from the threshold explorer's "save as a new version": the semantic fields'
    initial values. A value that is no similarity is left out (the form keeps the base version's)."""
    initial = {}
    for name in ("pass_at", "fail_below"):
        try:
            value = float(request.GET[name])
        except (KeyError, ValueError):
            continue
        if 0 <= value <= 1:
            initial[f"semantic_{name}"] = value
    return initial


def _save_config(request: HttpRequest, rubric: Rubric, form: JudgeConfigForm) -> JudgeConfig | None:
    tier = form.cleaned_data["tier"]
    newest_before = selectors.newest_config(rubric=rubric, tier=tier)
    try:
        config = services.judge_config_save(
            rubric=rubric, spec=form.to_spec(), by=request.user, note=form.cleaned_data["note"], tier=tier,
        )
    except ValueError as exc:
        form.add_engine_error(exc)
        return None
    if newest_before is not None and config.pk == newest_before.pk:
        messages.info(request, f"Nothing changed: v{config.version} already says exactly this, so no new version "
                               "was saved.")
    else:
        in_tier = "" if config.tier == Tier.DEFAULT else f" in the {config.tier} tier"
        saved = f"Saved {rubric.slug} v{config.version}{in_tier} (config_hash {config.config_hash[:12]}…)."
        messages.success(request, saved + _what_a_candidate_changes(rubric, config))
    # The config page the save redirects to shows the warnings: once, not again as messages.
    return config


def _what_a_candidate_changes(rubric: Rubric, config: JudgeConfig) -> str:
    """What saving a newer version of a promoted rubric does and does not change (docs/promotion.md)."""
    evidence = evidence_for(rubric=rubric) if config.tier == Tier.DEFAULT else None
    if evidence is None or evidence.run is None:
        return ""
    used = evidence.run.config.version
    new = config.version
    return (
        f" v{new} is a candidate: CI keeps judging with v{used} until a run of v{new} is promoted or renews the"
        f" evidence, and the evidence of run {evidence.run_id} still holds. What changes: a promotion or renewal"
        f" now needs a run of v{new}."
    )


def _editor_preview(rubric: Rubric, form: JudgeConfigForm, preview_form: PreviewForm) -> dict:
    """The picker and the preview of the editor's fields as they stand (posted, else prefilled): raw values,
    not cleaned ones, since a preview helps most while the rest of the form is unfinished."""
    def text(name: str) -> str:
        return str(form[name].value() or "").replace("\r\n", "\n")

    layers = form["layers"].value() or []
    semantic = None
    if "semantic" in layers:
        semantic = {"pass_at": form["semantic_pass_at"].value(), "fail_below": form["semantic_fail_below"].value()}
    dataset, search, case_id = preview_form.picked()
    examples, examples_error = preview_examples(form["examples"].value())
    picker, preview = selectors.preview_panel(
        dataset=dataset, case_id=case_id, search=search, template=text("prompt_template"),
        criteria=rubric.criteria, policy=_preview_policy(rubric, text("policy_ref"), text("policy")),
        output_kind=text("output_kind") or "verdict", semantic=semantic, behavioral="behavioral" in layers,
        judges=selectors.judges_sent({
            "model": text("model"),
            **{role: {"model": text(f"{role}_model")} for role, _, _ in OTHER_JUDGES},
            "second_opinion": {"model": text("second_opinion_model"), "when": [
                {"mode": mode, "share": form["when_share"].value()} for mode in form["when_modes"].value() or []
            ] or None},
        }),
        guidance=text("guidance"), examples=examples,
    )
    preview.examples_error = examples_error
    return {"picker": picker, "preview": preview}


def _preview_policy(rubric: Rubric, policy_ref: str, policy: str) -> str:
    """The policy text a save would use: the referenced version of the project's document, else the text field's."""
    slug, _, version = policy_ref.rpartition("@")
    if slug and (number := whole(version, low=1)) is not None:
        document = PolicyDocument.objects.filter(project_id=rubric.project_id, slug=slug, version=number).first()
        if document is not None:
            return document.text
    return policy


@lead_required
@vary_on_headers("HX-Request")
def config_detail(request: HtmxHttpRequest, project: Project, config_id: int) -> HttpResponse:
    """One version: its spec, hash, warnings, runs, and the exact prompt it sends for a chosen case."""
    config = selectors.mark_policy_behind([_get_config(project, config_id)], project=project)[0]
    spec = config.spec
    behavioral = "behavioral" in spec.get("layers", [])
    panel = {}
    if behavioral or spec.get("semantic"):
        preview_form = (PreviewForm(request.GET, project=project) if request.GET
                        else _preview_start(project, config.rubric))
        dataset, search, case_id = preview_form.picked()
        picker, preview = selectors.preview_panel(
            dataset=dataset, case_id=case_id, search=search, template=spec["prompt_template"],
            criteria=spec["criteria"], policy=spec["policy"], output_kind=spec["output_kind"],
            semantic=spec.get("semantic"), behavioral=behavioral, judges=selectors.judges_sent(spec),
            # "Exactly as sent": a kept or proposed improvement's guidance and examples are in the prompt too.
            guidance=spec.get("guidance") or "", examples=spec.get("examples") or (),
        )
        panel = {"picker": picker, "preview": preview}
        if request.htmx:
            return _preview_response(request, panel)
        panel |= {"preview_form": preview_form, "preview_url": request.path, "preview_method": "get"}
    named = [model for _, model in selectors.judge_models(spec)] + [(spec.get("semantic") or {}).get("model")]
    models = list(dict.fromkeys(m for m in named if m))
    prices = {p.model: p for p in ModelPrice.objects.filter(model__in=models)}
    return render(request, "judges/configs/config_detail.html", {
        "config": config, "rubric": config.rubric, "spec_json": _pretty(spec),
        "json_schema_text": _pretty(spec["json_schema"]) if spec.get("json_schema") else "",
        "warnings": [] if config.external else selectors.config_warnings(spec) + _self_preference(config),
        "behavioral": behavioral, "previewed": bool(panel), **panel,
        "other_judges": [(role, title, spec[role]) for role, title, _ in OTHER_JUDGES if spec.get(role)],
        "prices": [(m, prices.get(m)) for m in models],
        "runs": selectors.config_recent_runs(config=config),
        "newest": selectors.newest_config(rubric=config.rubric, tier=config.tier),
    })


def _self_preference(config: JudgeConfig) -> list[str]:
    """Self-preference: a warning when the judge's model family wrote (some of) the cases it has judged. One query."""
    datasets = config.runs.filter(parent__isnull=True).values("dataset_id")  # a subquery, not a list
    warning = self_preference(spec=config.spec, dataset_ids=datasets)
    return [warning] if warning else []


def _pretty(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def _may_read_prices(user) -> bool:
    """The price table is the instance's: the admin edits it, and a lead of any project reads it (their
    configs' costs come from it)."""
    return user.is_superuser or Membership.objects.filter(user=user, role=Role.LEAD).exists()


@require_http_methods(["GET", "POST"])
def price_list(request: HttpRequest) -> HttpResponse:
    """The price table (USD per million tokens); the instance admin adds a model here. Instance-wide: no project
    is shown, and the models named without a price are those of the projects the reader leads."""
    if not _may_read_prices(request.user):
        raise PermissionDenied("Only the instance admin and the projects' leads see the price table.")
    admin = request.user.is_superuser
    if request.method == "POST" and not admin:
        raise PermissionDenied("Only the instance admin may change model prices.")
    form = ModelPriceForm(request.POST or None, initial={"model": request.GET.get("model", "")}) if admin else None
    if form is not None and request.method == "POST" and form.is_valid():
        price = _save_price(request, form)
        messages.success(request, f"Added the price of {price.model}.")
        return redirect("judges:price_list")
    led = None if admin else Project.objects.filter(memberships__user=request.user, memberships__role=Role.LEAD)
    return render(request, "judges/configs/price_list.html", {
        "prices": selectors.prices_for_list(), "form": form, "may_edit": admin,
        "missing": selectors.models_without_price(projects=led),
    })


@admin_required
@require_http_methods(["GET", "POST"])
def price_edit(request: HttpRequest, price_id: int) -> HttpResponse:
    price = get_object_or_404(ModelPrice, pk=price_id)
    form = ModelPriceForm(request.POST or None, instance=price)
    if request.method == "POST" and form.is_valid():
        _save_price(request, form)
        messages.success(request, f"Updated the price of {price.model}.")
        return redirect("judges:price_list")
    return render(request, "judges/configs/price_edit.html", {"form": form, "price": price})


def _save_price(request: HttpRequest, form: ModelPriceForm) -> ModelPrice:
    price = form.save(commit=False)
    price.updated_by = request.user
    price.updated_at = timezone.now()
    price.save()
    return price
