"""A project's monitors (leads): the list with a form for a new one, a monitor's page (its chart, windows,
settings, baseline and messages), and the project's channels. Writes go through judges.monitoring.services and
judges.monitoring.delivery."""

from __future__ import annotations

from decimal import Decimal

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from evalhub.access import lead_required
from evalhub.http import HtmxHttpRequest
from evalhub.models import Project
from judges.models import Channel
from judges.monitoring import selectors
from judges.monitoring.charts import rate_chart
from judges.monitoring.delivery import ChannelError, channel_create
from judges.monitoring.forms import BaselineForm, ChannelForm, MonitorForm, MonitorSettingsForm
from judges.monitoring.services import MonitorError, baseline_pin, monitor_create, monitor_update

SHOWN_WINDOWS = 90


def _errors(form) -> str:
    return "; ".join(f"{form.fields[name].label or name if name in form.fields else name}: {' '.join(errors)}"
                     for name, errors in form.errors.items())


@lead_required
def monitor_list(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    """The project's monitors with their newest window's figure; a POST makes a new one."""
    form = MonitorForm(request.POST or None, project=project)
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            try:
                monitor = monitor_create(
                    project=project, slug=data["slug"], rubric=data["rubric"], dataset=data["dataset"],
                    sample=float(data["sample_percent"] / Decimal(100)), window=data["window"],
                    spend_cap_usd=data["spend_cap_usd"], concurrency=data["concurrency"],
                    labels_per_window=data["labels_per_window"], expected_cases=data["expected_cases"],
                    digest=data["digest"], by=request.user)
            except MonitorError as error:
                messages.error(request, f"No monitor made: {error}")
            else:
                messages.success(request, f"Monitor {monitor.slug} watches the cases arriving from now on.")
                return redirect("judges:monitor_detail", project=project.slug, slug=monitor.slug)
        else:
            messages.error(request, f"No monitor made: {_errors(form)}")
    return render(request, "judges/monitoring/monitor_list.html", {
        "monitors": selectors.monitors_with_latest(project=project), "form": form,
        "channels": project.channels.order_by("name"),
    })


@lead_required
def monitor_detail(request: HtmxHttpRequest, project: Project, slug: str) -> HttpResponse:
    monitor = get_object_or_404(project.monitors.select_related("rubric", "dataset"), slug=slug)
    rows = selectors.monitor_windows(monitor=monitor, last=SHOWN_WINDOWS)
    settings_form = MonitorSettingsForm(initial={
        "sample_percent": Decimal(str(round(monitor.sample * 100, 4))), "spend_cap_usd": monitor.spend_cap_usd,
        "concurrency": monitor.concurrency, "labels_per_window": monitor.labels_per_window, "digest": monitor.digest,
        "enabled": monitor.enabled})
    return render(request, "judges/monitoring/monitor_detail.html", {
        "monitor": monitor, "rows": rows[::-1], "chart": rate_chart(rows), "settings_form": settings_form,
        "baseline_form": BaselineForm(initial={"starts": monitor.baseline}, monitor=monitor),
        "sent": selectors.messages(monitor=monitor),
        "cost_total": sum((row.cost_usd for row in rows), Decimal(0)),
    })


@lead_required
@require_POST
def monitor_settings(request: HtmxHttpRequest, project: Project, slug: str) -> HttpResponse:
    monitor = get_object_or_404(project.monitors.select_related("rubric", "dataset", "project"), slug=slug)
    form = MonitorSettingsForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Settings not changed: {_errors(form)}")
    else:
        data = form.cleaned_data
        try:
            monitor_update(monitor=monitor, sample=float(data["sample_percent"] / Decimal(100)),
                           spend_cap_usd=data["spend_cap_usd"], concurrency=data["concurrency"],
                           labels_per_window=data["labels_per_window"], digest=data["digest"],
                           enabled=data["enabled"], by=request.user)
        except MonitorError as error:
            messages.error(request, f"Settings not changed: {error}")
        else:
            messages.success(request, "Settings saved; they apply to cases arriving from now on.")
    return redirect("judges:monitor_detail", project=project.slug, slug=monitor.slug)


@lead_required
@require_POST
def monitor_baseline(request: HtmxHttpRequest, project: Project, slug: str) -> HttpResponse:
    monitor = get_object_or_404(project.monitors, slug=slug)
    form = BaselineForm(request.POST, monitor=monitor)
    if not form.is_valid():
        messages.error(request, f"Baseline not pinned: {_errors(form)}")
    else:
        try:
            baseline_pin(monitor=monitor, starts=form.cleaned_data["starts"], by=request.user)
        except MonitorError as error:
            messages.error(request, f"Baseline not pinned: {error}")
        else:
            messages.success(request, "Baseline pinned." if monitor.baseline else "Baseline unpinned.")
    return redirect("judges:monitor_detail", project=project.slug, slug=monitor.slug)


@lead_required
def channel_list(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    """The project's channels; a POST adds one (names of variables only: nothing secret is typed or shown)."""
    form = ChannelForm(request.POST or None)
    if request.method == "POST":
        if form.is_valid():
            try:
                channel = channel_create(project=project, by=request.user, **form.cleaned_data)
            except ChannelError as error:
                messages.error(request, f"No channel added: {error}")
            else:
                messages.success(request, f"Channel {channel.name} added.")
                return redirect("judges:channel_list", project=project.slug)
        else:
            messages.error(request, f"No channel added: {_errors(form)}")
    return render(request, "judges/monitoring/channel_list.html", {
        "channels": project.channels.order_by("name"), "form": form})


@lead_required
@require_POST
def channel_delete(request: HtmxHttpRequest, project: Project, channel_id: int) -> HttpResponse:
    channel = get_object_or_404(Channel, pk=channel_id, project=project)
    channel.delete()
    messages.success(request, f"Channel {channel.name} removed; its deliveries' log goes with it.")
    return redirect("judges:channel_list", project=project.slug)
