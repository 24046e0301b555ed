"""Reads of policy documents: each policy's newest version, within one project."""

from django.db.models import Count, Max, OuterRef, QuerySet, Subquery

from evalhub.models import Project
from labeling.models import PolicyDocument


def policy_newest_versions(*, project: Project) -> dict[str, int]:
    """slug → the newest version of every policy document of the project. One query."""
    rows = project.policies.order_by().values("slug").annotate(v=Max("version")).values_list("slug", "v")
    return dict(rows)


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
