"""Writes on a dataset's cases from its pages (imports are labeling.importing's)."""

from labeling.importing.reading import CASE_KINDS
from labeling.models import Dataset, LabelingRefused


def cases_set_kind(*, dataset: Dataset, cases, kind: str) -> int:
    """Set the calibration kind of `cases` (a queryset) of `dataset`; returns how many changed.

    The kind is not judged content (docs/words.md): content_changed_at and content_hash stay, so no run
    becomes stale and no label stops counting. Cases of other datasets are left alone.
    """
    if kind and kind not in CASE_KINDS:
        raise LabelingRefused(f"A kind is one of {', '.join(CASE_KINDS)}, or empty.")
    return cases.filter(dataset=dataset).exclude(kind=kind).update(kind=kind)
