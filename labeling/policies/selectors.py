"""Reads of policy documents: each policy's newest version, within one project."""

from django.db.models import Count, Max, OuterRef, QuerySet, Subquery

from evalhub.models import Project
from labeling.models import PolicyDocument


def policy_newest_versions(*, project_ids: set[int]) -> dict[int, dict[str, int]]:
    """project id → (slug → the newest version of each of its policy documents): a policy slug names a document
    within its own project only (docs/projects.md). One query."""
    rows = (
        PolicyDocument.objects.filter(project_id__in=project_ids).order_by().values("project_id", "slug")
        .annotate(v=Max("version")).values_list("project_id", "slug", "v")
    )
    out: dict[int, dict[str, int]] = {}
    for project_id, slug, version in rows:
        out.setdefault(project_id, {})[slug] = version
    return out


def policies_for_list(*, project: Project) -> QuerySet[PolicyDocument]:
    """Each of the project's policies at its newest version (with its author) and how many versions it has.
    One query."""
    same = {"project": OuterRef("project"), "slug": OuterRef("slug")}
    newest = PolicyDocument.objects.filter(**same).order_by("-version").values("pk")[:1]
    versions = (PolicyDocument.objects.filter(**same).order_by().values("project", "slug")
                .annotate(n=Count("pk")).values("n"))
    return (
        project.policies.filter(pk=Subquery(newest)).select_related("created_by")
        .annotate(version_count=Subquery(versions)).order_by("slug")
    )
