"""Reads of policy documents: each policy's newest version."""

from django.db.models import Count, Max, OuterRef, QuerySet, Subquery

from labeling.models import PolicyDocument


def policy_newest_versions() -> dict[str, int]:
    """slug → the newest version of every policy document. One query."""
    rows = PolicyDocument.objects.order_by().values("slug").annotate(v=Max("version")).values_list("slug", "v")
    return dict(rows)


def policies_for_list() -> QuerySet[PolicyDocument]:
    """Each policy's newest version (with its author) and how many versions it has. One query."""
    newest = PolicyDocument.objects.filter(slug=OuterRef("slug")).order_by("-version").values("pk")[:1]
    versions = (PolicyDocument.objects.filter(slug=OuterRef("slug")).order_by().values("slug")
                .annotate(n=Count("pk")).values("n"))
    return (
        PolicyDocument.objects.filter(pk=Subquery(newest)).select_related("created_by")
        .annotate(version_count=Subquery(versions)).order_by("slug")
    )
