"""The policy documents' pages: the project's members read them (the history, any version); its leads write
the next version, seeing its diff against the last before saving. Writes go through
labeling.policies.services.policy_write; a saved version never changes."""

import difflib

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from evalhub.access import lead_required, member_required
from evalhub.models import Project
from labeling.models import LabelingRefused, PolicyDocument
from labeling.policies import services
from labeling.policies.forms import NewPolicyForm, PolicyForm
from labeling.policies.selectors import policies_for_list


def text_diff(old: str, new: str) -> list[tuple[str, str]]:
    """(kind, line) of a unified diff of two texts; kind is add, del, hunk or same."""
    lines = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=2):
        if line.startswith(("---", "+++")):
            continue
        lines.append(({"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "same"), line))
    return lines


@member_required
def policy_list(request: HttpRequest, project: Project) -> HttpResponse:
    """Every policy of the project with its newest version. Any member."""
    return render(request, "labeling/policy_list.html", {"policies": policies_for_list(project=project)})


@lead_required
@require_http_methods(["GET", "POST"])
def policy_create(request: HttpRequest, project: Project) -> HttpResponse:
    form = NewPolicyForm(request.POST or None, project=project)
    if request.method == "POST" and form.is_valid():
        policy = _write(request, project, form, form.cleaned_data["slug"])
        if policy is not None:
            return redirect("labeling:policy_detail", project=project.slug, slug=policy.slug)
    return render(request, "labeling/policy_write.html", {"form": form, "newest": None})


@member_required
def policy_detail(request: HttpRequest, project: Project, slug: str) -> HttpResponse:
    """One version (?version=N, the newest by default) and the history. Any member."""
    history = list(project.policies.filter(slug=slug).select_related("created_by").order_by("-version"))
    if not history:
        raise Http404("No such policy.")
    shown = history[0]
    if wanted := request.GET.get("version"):
        shown = next((p for p in history if str(p.version) == wanted), None)
        if shown is None:
            raise Http404("No such version of this policy.")
    before = next((p for p in history if p.version < shown.version), None)
    return render(request, "labeling/policy_detail.html", {
        "policy": shown, "history": history, "newest": history[0],
        "diff": text_diff(before.text, shown.text) if before else None, "before": before,
    })


@lead_required
@require_http_methods(["GET", "POST"])
def policy_write(request: HttpRequest, project: Project, slug: str) -> HttpResponse:
    """The next version, prefilled with the newest; "Show changes" shows the diff without saving."""
    newest = project.policies.filter(slug=slug).order_by("-version").first()
    if newest is None:
        raise Http404("No such policy.")
    form = PolicyForm(request.POST or None, initial={"text": newest.text})
    diff = None
    if request.method == "POST" and form.is_valid():
        text = form.cleaned_data["text"].replace("\r\n", "\n").replace("\r", "\n")
        if request.POST.get("action") == "diff":
            diff = text_diff(newest.text, text)
        else:
            policy = _write(request, project, form, slug)
            if policy is not None:
                return redirect("labeling:policy_detail", project=project.slug, slug=slug)
    return render(request, "labeling/policy_write.html", {"form": form, "newest": newest, "diff": diff})


def _write(request: HttpRequest, project: Project, form: PolicyForm, slug: str) -> PolicyDocument | None:
    before = project.policies.filter(slug=slug).order_by("-version").values_list("pk", flat=True).first()
    try:
        policy = services.policy_write(project=project, slug=slug, text=form.cleaned_data["text"], by=request.user)
    except LabelingRefused as exc:
        form.add_error("text", str(exc))
        return None
    if policy.pk == before:
        messages.info(request, f"Nothing changed: v{policy.version} already says exactly this.")
    else:
        messages.success(request, f"Saved {policy.slug} v{policy.version} (sha256 {policy.sha256[:12]}…). "
                                  "Judge configs on an older version are now behind: their runs are stale.")
    return policy
