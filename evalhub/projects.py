"""The door for management commands: which project a command's dataset, rubric or policy slug belongs to.

A slug is unique only within its project, so a script must not change meaning when another project reuses one:
`--project SLUG` (or EVALHUB_PROJECT) is required whenever the instance holds more than one project."""

import os

from django.core.management.base import CommandError

from evalhub.models import Project


def add_project_argument(parser) -> None:
    parser.add_argument(
        "--project", metavar="SLUG", default=None,
        help="the project the slugs belong to (or EVALHUB_PROJECT); needed when the instance holds more than one",
    )


def project_for_command(slug: str | None) -> Project:
    """The project `slug` (or EVALHUB_PROJECT) names, or the instance's only one; a CommandError naming the
    projects there are when it is missing or unknown."""
    slug = (slug or os.environ.get("EVALHUB_PROJECT", "")).strip() or None
    if slug is not None:
        found = Project.objects.filter(slug=slug).first()
        if found is None:
            raise CommandError(f"No project {slug!r}. {_choices()}")
        return found
    projects = list(Project.objects.order_by("slug")[:2])
    if len(projects) == 1:
        return projects[0]
    if not projects:
        raise CommandError("This instance holds no project yet: an admin creates one on the Projects page.")
    raise CommandError(f"This instance holds more than one project: name one with --project SLUG. {_choices()}")


def _choices() -> str:
    slugs = list(Project.objects.order_by("slug").values_list("slug", flat=True))
    return f"Projects: {', '.join(slugs)}." if slugs else "There is no project yet."
