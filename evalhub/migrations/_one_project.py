"""The one project a single-team install's data migrates into (docs/projects.md, "Migrating"). Shared by the
migrations of evalhub, labeling and judges that bring projects in. Not a migration module (the underscore)."""

import re

from django.conf import settings


def the_one_project(apps):
    """The instance's only project, made (named from EVALHUB_DEFAULT_PROJECT) the first time one is needed."""
    project_model = apps.get_model("evalhub", "Project")
    project = project_model.objects.order_by("pk").first()
    if project is None:
        slug = re.sub(r"[^-a-z0-9_]+", "-", settings.EVALHUB_DEFAULT_PROJECT.lower()).strip("-")[:100] or "default"
        project = project_model.objects.create(slug=slug, name=slug.replace("-", " ").capitalize())
    return project


def refuse_with_several_projects(apps) -> None:
    """Going back is possible only while the instance holds one project: two would merge, and slugs clash."""
    if apps.get_model("evalhub", "Project").objects.count() > 1:
        raise RuntimeError(
            "This instance holds more than one project: migrating back would merge them. Remove all but one first."
        )
