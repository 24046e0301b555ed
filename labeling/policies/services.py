"""Writes of policy documents: the next version of a policy (a saved version never changes)."""

import hashlib

from django.db import transaction

from evalhub.models import Project, User
from labeling.models import LabelingRefused, PolicyDocument


def policy_write(*, project: Project, slug: str, text: str, by: User) -> PolicyDocument:
    """Save `text` as the next version of the project's policy `slug` (1 for a new slug) and return it.

    Versions are numbered under a lock on the slug's rows; writing exactly what the newest version
    says returns that version instead of a duplicate. A saved version never changes. Another project's
    policy of the same slug is another policy: its versions are its own.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # a textarea's line ends must not change the sha
    if not text.strip():
        raise LabelingRefused("A policy needs some text.")
    with transaction.atomic():
        newest = (PolicyDocument.objects.select_for_update().filter(project=project, slug=slug)
                  .order_by("-version").first())
        if newest is not None and newest.text == text:
            return newest
        return PolicyDocument.objects.create(
            project=project, slug=slug, version=(newest.version if newest else 0) + 1, text=text,
            sha256=hashlib.sha256(text.encode()).hexdigest(), created_by=by,
        )
