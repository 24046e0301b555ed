"""A lead's writes on disputes: the adjudication (the human verdict), and requests for another label.

Every function is keyword-only and does its writes in one transaction.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from evalhub.models import User
from labeling.models import Adjudication, Case, CaseTally, LabelingRefused, LabelRequest, Rubric, Verdict


def adjudicate(*, case: Case, rubric: Rubric, verdict: str, note: str = "", by: User) -> Adjudication:
    """A lead decides the human verdict of a (case, rubric), whatever its labels say; who and when are kept.

    Deciding again replaces the decision (and its who and when).
    """
    if not by.is_lead:
        raise LabelingRefused("Only leads adjudicate.")
    if verdict not in Verdict.values:
        raise LabelingRefused(f"A verdict is pass or fail, not {verdict!r}.")
    with transaction.atomic():
        adjudication, _ = Adjudication.objects.update_or_create(
            case=case, rubric=rubric,
            defaults={"verdict": verdict, "note": note.strip(), "decided_by": by, "decided_at": timezone.now()},
        )
    return adjudication


def request_another_label(*, case: Case, rubric: Rubric, by: User, reason: str = "") -> LabelRequest:
    """A lead asks for one more label on a case than the rubric's labels_per_case, from a new reviewer.

    Refused while an earlier request still waits for its label, so a repeated click asks only once.
    """
    if not by.is_lead:
        raise LabelingRefused("Only leads request labels.")
    with transaction.atomic():
        tally = CaseTally.objects.select_for_update().get(case=case, rubric=rubric)
        missing = rubric.labels_per_case + tally.requested - tally.labels
        if tally.requested and missing > 0:
            raise LabelingRefused("Another label is already requested for this case and not given yet.")
        # The queue wants labels_per_case + (request rows) labels. Usually one row asks for one more; when
        # the case already has more labels than that (labels_per_case was lowered), rows are added until
        # it wants exactly one more label than it has.
        rows = [
            LabelRequest(case=case, rubric=rubric, requested_by=by, reason=reason.strip()[:300])
            for _ in range(max(1, 1 - missing))
        ]
        created = LabelRequest.objects.bulk_create(rows)
    return created[-1]


@dataclass(frozen=True)
class LabelsRequested:
    requested: int  # cases that now want one more label
    already: int  # cases left as they were: asked for already


def request_more_labels(*, case_ids: Iterable[int], rubric: Rubric, by: User, reason: str) -> LabelsRequested:
    """A lead asks for another label on many cases at once (a run's contested cases, say), each as
    `request_another_label` would: one more than the rubric's labels_per_case, from a new reviewer.

    Idempotent, so a repeated click changes nothing: a case is left alone while an earlier request
    still waits for its label, or when it was asked for with this same reason before (even if that
    label has come since). Three queries whatever the number of cases, in one transaction.
    """
    if not by.is_lead:
        raise LabelingRefused("Only leads request labels.")
    reason = reason.strip()[:300]
    ids = sorted(set(case_ids))
    with transaction.atomic():
        # Locked in case order, so two leads sending overlapping sets cannot deadlock.
        tallies = list(CaseTally.objects.select_for_update().filter(rubric=rubric, case_id__in=ids).order_by("case_id"))
        asked = set(
            LabelRequest.objects.filter(rubric=rubric, case_id__in=ids, reason=reason).values_list("case_id", flat=True)
        )
        rows, cases = [], 0
        for tally in tallies:
            missing = rubric.labels_per_case + tally.requested - tally.labels
            if (tally.requested and missing > 0) or tally.case_id in asked:
                continue
            cases += 1
            rows += [
                LabelRequest(case_id=tally.case_id, rubric=rubric, requested_by=by, reason=reason)
                for _ in range(max(1, 1 - missing))  # as in request_another_label
            ]
        LabelRequest.objects.bulk_create(rows)
    return LabelsRequested(requested=cases, already=len(tallies) - cases)
