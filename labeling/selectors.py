"""Reads that cross relations: human verdicts and what counts as a label."""

from django.db.models import Count, F, OuterRef, Q, QuerySet, Subquery, Value, When
from django.db.models import Case as SqlCase

from labeling.models import Adjudication, Case, Label, Rubric


def counting_labels(*, rubric: Rubric) -> QuerySet[Label]:
    """Labels of this rubric that still count: given against the case content as it is now."""
    return Label.objects.filter(rubric=rubric, content_hash=F("case__content_hash"))


def cases_with_human_verdict(*, rubric: Rubric, cases: QuerySet[Case] | None = None) -> QuerySet[Case]:
    """Cases annotated with `passes`, `fails` (counting labels), `adjudicated` and `human_verdict`.

    DESIGN: the human verdict is the lead's adjudication if there is one, else the majority of the
    counting labels; a tie (or no label) has none. One query however many cases.
    """
    cases = Case.objects.all() if cases is None else cases
    counting = Q(labels__rubric=rubric, labels__content_hash=F("content_hash"))
    return cases.annotate(
        passes=Count("labels", filter=counting & Q(labels__verdict="pass")),
        fails=Count("labels", filter=counting & Q(labels__verdict="fail")),
        adjudicated=Subquery(
            Adjudication.objects.filter(case=OuterRef("pk"), rubric=rubric).values("verdict")[:1]
        ),
    ).annotate(
        human_verdict=SqlCase(
            When(adjudicated__isnull=False, then=F("adjudicated")),
            When(passes__gt=F("fails"), then=Value("pass")),
            When(fails__gt=F("passes"), then=Value("fail")),
            default=None,
        )
    )
