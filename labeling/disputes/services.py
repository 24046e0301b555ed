"""A lead's writes on disputes: the adjudication (the human verdict), and requests for another label.

Every function is keyword-only and does its writes in one transaction. Only a lead of the rubric's project
(or the instance admin) may make them: a lead of another project is refused like a reviewer. A rubric
applies to its own project's cases only (docs/projects.md).
"""

from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from evalhub.models import User
from labeling.importing.redaction import Redactor
from labeling.models import Adjudication, Case, CaseTally, LabelingRefused, LabelRequest, Rubric, Verdict
from labeling.queue.services import refuse_other_project


def _refuse_unless_lead(*, by: User, rubric: Rubric, doing: str) -> None:
    """LabelingRefused unless `by` leads the rubric's project, never from a role they hold in another project."""
    if not by.leads(rubric.project_id):
        raise LabelingRefused(f"Only the project's leads {doing}.")


def adjudicate(*, case: Case, rubric: Rubric, verdict: str, note: str = "", by: User) -> Adjudication:
    """A lead decides the human verdict of a (case, rubric), whatever its labels say; who and when are kept.

    Deciding again replaces the decision (and its who and when). Refused for a case of another project
    than the rubric's (its dataset is read unless the caller has it on the case already).
    """
    _refuse_unless_lead(by=by, rubric=rubric, doing="adjudicate")
    refuse_other_project(project_id=case.dataset.project_id, rubric=rubric)
    if verdict not in Verdict.values:
        raise LabelingRefused(f"A verdict is pass or fail, not {verdict!r}.")
    note = note.strip()
    redactor = Redactor(case.dataset.redact_kinds)
    if redactor and note:  # a lead's note may quote the case, as a reviewer's may: stored redacted as the case is
        note = redactor.about_case(note, (case.input, case.output or ""))
    with transaction.atomic():
        adjudication, _ = Adjudication.objects.update_or_create(
            case=case, rubric=rubric,
            defaults={"verdict": verdict, "note": note, "decided_by": by, "decided_at": timezone.now()},
        )
    return adjudication


def request_another_label(*, case: Case, rubric: Rubric, by: User, reason: str = "") -> LabelRequest:
    """A lead asks for one more label on a case than the rubric's labels_per_case, from a new reviewer.

    Refused while an earlier request still waits for its label, so a repeated click asks only once, and for
    a case of another project than the rubric's.
    """
    _refuse_unless_lead(by=by, rubric=rubric, doing="request labels")
    refuse_other_project(project_id=case.dataset.project_id, rubric=rubric)
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
    label has come since). A case of another project than the rubric's has no tally with it and is passed
    over (counted in neither figure). Four queries whatever the number of cases (the lead's role, then three
    in one transaction).
    """
    _refuse_unless_lead(by=by, rubric=rubric, doing="request labels")
    reason = reason.strip()[:300]
    ids = sorted(set(case_ids))
    with transaction.atomic():
        # Locked in case order, so two leads sending overlapping sets cannot deadlock.
        tallies = list(
            CaseTally.objects.select_for_update(of=("self",))  # the tallies only, not their datasets' rows
            .filter(rubric=rubric, case_id__in=ids, dataset__project_id=rubric.project_id)
            .order_by("case_id")
        )
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
