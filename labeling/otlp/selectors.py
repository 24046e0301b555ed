"""Reads of what the OTLP receiver refused (docs/otlp.md, "Refused traces")."""

from datetime import timedelta

from django.db.models import QuerySet
from django.utils import timezone

from labeling.models import Dataset, OtlpRefusal, OtlpTrace
from labeling.otlp.services import REFUSALS_DAYS


def otlp_refusals(*, dataset: Dataset) -> QuerySet[OtlpRefusal]:
    """The dataset's refusals of the last REFUSALS_DAYS days, a row a day and reason, the latest first."""
    since = timezone.now().date() - timedelta(days=REFUSALS_DAYS)
    return dataset.otlp_refusals.filter(day__gte=since).order_by("-last_at", "why")


def otlp_waiting(*, dataset: Dataset) -> int:
    """How many of the dataset's traces wait for their root span now."""
    return OtlpTrace.objects.filter(dataset=dataset, gave_up_at__isnull=True).count()
