from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.db.models import Q

from evalhub.models import Project, Role


def acting_user(username: str | None, *, project: Project):
    """The user a command records as the one who acted on `project`: `--by USERNAME`, who must be a lead of the
    project or the instance admin (as on the project's pages), or else the first of those."""
    User = get_user_model()
    if username:
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user {username!r}.")
        if not user.leads(project.pk):
            raise CommandError(
                f"{username} is not a lead of project {project.slug}: the one who acts in a command is a lead of the "
                "project concerned (or the instance admin)."
            )
        return user
    user = (
        User.objects.filter(Q(is_superuser=True) | Q(memberships__project=project, memberships__role=Role.LEAD))
        .distinct().order_by("pk").first()
    )
    if user is None:
        raise CommandError(
            f"No lead of project {project.slug} exists to record as the one who acted: add one, or pass --by USERNAME."
        )
    return user
