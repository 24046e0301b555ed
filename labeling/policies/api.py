"""The policies API: an agent or a pipeline reads a policy document of its token's project with a `policies:read`
token."""

from django.http import HttpRequest, JsonResponse

from evalhub.access import method_not_allowed, token_required
from evalhub.models import Scope
from evalhub.params import whole
from labeling.models import PolicyDocument


@token_required(Scope.POLICIES_READ.value)
def policy_read(request: HttpRequest, slug: str) -> JsonResponse:
    """GET /api/policies/<slug>?version=N: one version of a policy document (the newest without
    `version`) as {slug, version, text, sha256, created_at}: the very text a judge config references.

    Of the token's project only: another project's policy is 404 with the words of an unknown one."""
    if request.method != "GET":
        return method_not_allowed("GET")
    unknown = sorted(set(request.GET) - {"version"})
    if unknown:
        return JsonResponse({"error": f"Unknown parameter(s): {', '.join(unknown)} (known: version)."}, status=400)
    policies = PolicyDocument.objects.filter(project=request.project, slug=slug)
    versions = policies.order_by("-version")
    raw = request.GET.get("version")
    if raw is not None:
        if (number := whole(raw, low=1)) is None:
            return JsonResponse({"error": "version must be a whole number, 1 or more."}, status=400)
        versions = versions.filter(version=number)
    policy = versions.first()
    if policy is None:
        if raw is not None and policies.exists():
            return JsonResponse({"error": f"The policy {slug!r} has no version {raw}."}, status=404)
        return JsonResponse({"error": f"No policy {slug!r}."}, status=404)
    response = JsonResponse({
        "slug": policy.slug, "version": policy.version, "text": policy.text, "sha256": policy.sha256,
        "created_at": policy.created_at.isoformat(),
    })
    response["Cache-Control"] = "no-store"
    return response
