from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.db.models import Q

from evalhub.models import Role


def acting_user(username: str | None):
    """The user a command records as the one who acted: `--by USERNAME`, or else the first lead."""
    User = get_user_model()
    if username:
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user {username!r}.")
        return user
    user = (
        User.objects.filter(Q(is_superuser=True) | Q(role__in=[Role.LEAD, Role.ADMIN]))
        .order_by("pk").first()
    )
    if user is None:
        raise CommandError("No lead exists to record as the one who acted: create one, or pass --by USERNAME.")
    return user
