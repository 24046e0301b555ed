"""Writes on a dataset and its cases from its pages (imports are labeling.importing's)."""

from django.db import transaction

from labeling.importing.cases import cases_apply_redaction
from labeling.importing.reading import CASE_KINDS
from labeling.importing.redaction import REDACT_KINDS
from labeling.models import Dataset, DatasetEvent, LabelingRefused, PolicyDocument


def cases_set_kind(*, dataset: Dataset, cases, kind: str) -> int:
    """Set the calibration kind of `cases` (a queryset) of `dataset`; returns how many changed.

    The kind is not judged content (docs/words.md): content_changed_at and content_hash stay, so no run
    becomes stale and no label stops counting. Cases of other datasets are left alone.
    """
    if kind and kind not in CASE_KINDS:
        raise LabelingRefused(f"A kind is one of {', '.join(CASE_KINDS)}, or empty.")
    return cases.filter(dataset=dataset).exclude(kind=kind).update(kind=kind)


def dataset_set_redaction(*, dataset: Dataset, kinds: list[str], by) -> bool:
    """Set what the dataset redacts from the cases that come in from now on; returns whether it changed.

    The change and the audit entry are one transaction. Cases already stored are left as they are
    (dataset_apply_redaction rewrites them, when a lead asks).
    """
    unknown = [kind for kind in kinds if kind not in REDACT_KINDS]
    if unknown:
        raise LabelingRefused(f"Redaction kinds are {', '.join(REDACT_KINDS)}; not {', '.join(unknown)}.")
    redact = " ".join(kind for kind in REDACT_KINDS if kind in kinds)
    with transaction.atomic():
        locked = Dataset.objects.select_for_update().get(pk=dataset.pk)
        if locked.redact == redact:
            return False
        was = ", ".join(locked.redact.split()) or "nothing"
        DatasetEvent.objects.create(
            dataset=locked, kind=DatasetEvent.Kind.REDACTION_SET, by=by,
            detail=f"redact {', '.join(redact.split()) or 'nothing'} (was {was})",
        )
        locked.redact = redact
        locked.save(update_fields=["redact"])
    dataset.redact = redact
    return True


def dataset_apply_redaction(*, dataset: Dataset, by) -> int:
    """Redact the cases the dataset already holds with its kinds, audited; returns how many changed.

    Their labels stop counting, like after any change of content. The rewrite and the audit entry are one
    transaction.
    """
    if not dataset.redact_kinds:
        raise LabelingRefused("This dataset redacts nothing: choose what to redact first.")
    with transaction.atomic():
        changed = cases_apply_redaction(dataset=dataset)
        DatasetEvent.objects.create(
            dataset=dataset, kind=DatasetEvent.Kind.REDACTION_APPLIED, by=by,
            detail=f"{', '.join(dataset.redact_kinds)} redacted from the stored cases: {changed} changed",
        )
    return changed


def dataset_set_policies(*, dataset: Dataset, slugs: list[str], by) -> bool:
    """Set the policy documents the dataset's cases are about (slugs of existing policies of its project, each
    read at its newest version when used); returns whether the list changed. The change and its audit entry are
    one transaction."""
    slugs = sorted(set(slugs))
    known = PolicyDocument.objects.filter(project_id=dataset.project_id, slug__in=slugs).values_list("slug", flat=True)
    unknown = sorted(set(slugs) - set(known))
    if unknown:
        raise LabelingRefused(f"No policy document {', '.join(unknown)}: write it on the policies page first.")
    with transaction.atomic():
        locked = Dataset.objects.select_for_update().get(pk=dataset.pk)
        if locked.policies == slugs:
            return False
        DatasetEvent.objects.create(
            dataset=locked, kind=DatasetEvent.Kind.POLICIES_SET, by=by,
            detail=f"policy documents {', '.join(slugs) or 'none'} (was {', '.join(locked.policies) or 'none'})",
        )
        locked.policies = slugs
        locked.save(update_fields=["policies"])
    dataset.policies = slugs
    return True
