"""Writes of the reviewer's queue: labels, skips, undo, serving and holding cases.

Every function is keyword-only and does its writes in one transaction. Counts the queue reads
(CaseTally, Label.stale) follow from database triggers (migration 0003), so nothing here keeps them.
A rubric applies to its own project's cases only (docs/projects.md): the triggers make no tally row for a
case and a rubric of different projects (migration 0018), every write here refuses such a pair, and a hold
(case_claim) asked for across projects finds no tally row to take.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from evalhub.models import User
from labeling.importing.redaction import Redactor
from labeling.models import Adjudication, Case, Dataset, Label, LabelingRefused, Rubric, Skip, Verdict
from labeling.queue.selectors import next_case

# How long a case shown to one reviewer is kept from the others if they never answer (a closed tab).
CLAIM_LEASE = timedelta(minutes=10)


def refuse_other_project(*, project_id: int, rubric: Rubric) -> None:
    """LabelingRefused when a rubric is used on a dataset or case of another project (`project_id`, the dataset's).

    No query of its own: the pages take both from one project, so this only stops a caller that mixed them up.
    """
    if project_id != rubric.project_id:
        # Named by neither slug: the message may reach a member of only one of the two projects.
        raise LabelingRefused("This rubric belongs to another project than these cases: a rubric applies to its "
                              "own project's datasets only.")


@dataclass(frozen=True)
class Submitted:
    """What a submit did: `created` a label, `changed` one (a revision), or neither (the same again)."""

    label: Label
    created: bool
    changed: bool


class LabelChangedElsewhere(LabelingRefused):
    """Their own label changed after the page was shown (another tab): the verdict is not laid over it unasked."""


def label_submit(
    *, case: Case, rubric: Rubric, reviewer: User, verdict: str, note: str = "", content_hash: str,
    seen_verdict: str = "",
) -> Submitted:
    """Record the reviewer's verdict on a case, given against the content (hash) they saw.

    There is one label per (case, rubric, reviewer) whatever arrives at once: the INSERT skips on the
    unique constraint, then the row is locked and revised if it differs. So two reviewers at once each
    keep their own label, and a repeated submit of the same form changes nothing (not even
    updated_at). Their skip of the case goes in the same transaction. Refused for a case of another
    project than the rubric's (its dataset is read unless the caller has it on the case already).
    `seen_verdict`: their label's verdict as the page showed it ("none" for no label, "" not checked); when
    their label now says otherwise and this verdict or note would change it, LabelChangedElsewhere is raised
    and nothing is written (two tabs on one case: the second is told and asked).
    """
    refuse_other_project(project_id=case.dataset.project_id, rubric=rubric)
    if verdict not in Verdict.values:
        raise LabelingRefused(f"A verdict is pass or fail, not {verdict!r}.")
    note, now = note.strip(), timezone.now()
    redactor = Redactor(case.dataset.redact_kinds)
    if redactor and note:  # a note may quote the case: stored redacted as the case is (docs/security.md)
        note = redactor.about_case(note, (case.input, case.output or ""))
    with transaction.atomic():
        # INSERT ... ON CONFLICT DO NOTHING RETURNING id (PostgreSQL and SQLite alike): a concurrent insert
        # of the same key waits for the other transaction, then does nothing. RETURNING says which
        # happened, so a new label (the usual case) costs one statement.
        stamp = connection.ops.adapt_datetimefield_value(now)
        with connection.cursor() as cursor:
            cursor.execute(_INSERT_LABEL, [case.pk, rubric.pk, reviewer.pk, verdict, note, content_hash, stamp, stamp])
            inserted = cursor.fetchone()
        changed = bool(inserted)
        if inserted:
            label = Label(pk=inserted[0], case=case, rubric=rubric, reviewer=reviewer, verdict=verdict, note=note,
                          content_hash=content_hash, created_at=now, updated_at=now)
        else:  # theirs already: lock it, and revise it only if something differs
            label = Label.objects.select_for_update().get(case=case, rubric=rubric, reviewer=reviewer)
            differs = (label.verdict, label.note, label.content_hash) != (verdict, note, content_hash)
            if seen_verdict and differs and label.verdict != seen_verdict:
                raise LabelChangedElsewhere(
                    f"This case changed since you opened it: your label on it is now {label.verdict} "
                    f"(given at {timezone.localtime(label.updated_at):%H:%M:%S}, in another tab or window). "
                    "Choose again to keep it or change it."
                )
            if differs:
                label.revise(verdict=verdict, note=note, content_hash=content_hash)
                changed = True
        Skip.objects.filter(case=case, rubric=rubric, reviewer=reviewer).delete()
        if changed:
            for hook in LABEL_RECORDED:
                hook(label)
    return Submitted(label=label, created=bool(inserted), changed=changed)


# What runs when a reviewer's verdict is recorded or revised, inside its transaction: judges registers the
# export of human verdicts (judges/apps.py, judges/export), since labeling never imports judges.
LABEL_RECORDED: list[Callable[[Label], None]] = []


# stale and dataset_id are the triggers' to set (migrations 0003, 0004).
_INSERT_LABEL = """
INSERT INTO labeling_label (case_id, rubric_id, reviewer_id, verdict, note, content_hash, stale, created_at, updated_at)
VALUES (%s, %s, %s, %s, %s, %s, FALSE, %s, %s)
ON CONFLICT (case_id, rubric_id, reviewer_id) DO NOTHING
RETURNING id
"""


# Checks from above labeling that may refuse an undo: judges registers one (judges/apps.py) saying when a
# promotion's evidence counted the label, since labeling never imports judges. Each returns why, or "".
UNDO_REFUSALS: list[Callable[[Label], str]] = []


def label_undo(
    *, label_id: int, reviewer: User, dataset: Dataset, rubric: Rubric, given_at: datetime, created: bool
) -> int | None:
    """Take back one step of this sitting (queue.sitting): delete the label it created, or restore the
    label as it was before the revision it made.

    Only while the label is as that step left it (updated_at == given_at), so an undo never reaches a
    change made since, elsewhere, nor an older label. Refused (LabelingRefused, saying why) when a lead's
    adjudication or a promotion's evidence (UNDO_REFUSALS) has counted the label since: what they decided
    on stays as they saw it. Returns the case id to show again, or None when the label is gone already
    (a repeated undo changes nothing) or is not theirs in this dataset and rubric.
    """
    refuse_other_project(project_id=dataset.project_id, rubric=rubric)
    with transaction.atomic():
        label = (
            Label.objects.select_for_update(of=("self",))
            .filter(pk=label_id, reviewer=reviewer, rubric=rubric, case__dataset=dataset)
            .select_related("case")
            .first()
        )
        if label is None:
            return None
        external_id = label.case.external_id
        if label.updated_at != given_at or (created and label.previous is not None):
            raise LabelingRefused(f"Not taken back: your label on {external_id} changed since (in another tab or "
                                  "from your labels). Change it there if you need to.")
        if not created and label.previous is None:
            raise LabelingRefused(f"Not taken back: undo keeps one earlier version of a label, and your label on "
                                  f"{external_id} is back to it already.")
        decided = Adjudication.objects.filter(case=label.case_id, rubric=rubric, decided_at__gte=given_at).first()
        if decided is not None:
            raise LabelingRefused(
                f"Not taken back: a lead decided {external_id} ({decided.verdict}) after your label, so it stays "
                "as they saw it. You can still change it from your labels.")
        for refusal in UNDO_REFUSALS:
            if why := refusal(label):
                raise LabelingRefused(f"Not taken back: {why} You can still change it from your labels.")
        previous = label.previous
        if previous:
            label.verdict = previous["verdict"]
            label.note = previous["note"]
            label.content_hash = previous["content_hash"]
            label.updated_at = parse_datetime(previous["updated_at"]) or label.updated_at
            label.previous = None
            label.save(update_fields=["verdict", "note", "content_hash", "updated_at", "previous"])
        else:
            label.delete()
    return label.case_id


def skip(*, case: Case, rubric: Rubric, reviewer: User) -> None:
    """Pass on a case for now: it comes back to this reviewer after the rest (skipping again sends it last).
    Refused for a case of another project than the rubric's, as label_submit."""
    refuse_other_project(project_id=case.dataset.project_id, rubric=rubric)
    with transaction.atomic():
        Skip.objects.bulk_create(
            [Skip(case=case, rubric=rubric, reviewer=reviewer, created_at=timezone.now())],
            update_conflicts=True, unique_fields=["case", "rubric", "reviewer"], update_fields=["created_at"],
        )


def case_serve(*, dataset: Dataset, rubric: Rubric, reviewer: User, now: datetime | None = None) -> Case | None:
    """The reviewer's next case in queue order (queue.next_case), held for them: one atomic step.

    Choosing and holding happen in one transaction, so reviewers asking at the same instant get
    different cases: on PostgreSQL the choice locks the tally row it picks and the others pass over it
    (FOR UPDATE SKIP LOCKED) until the hold is written; on SQLite the transaction is the database's one
    writer (transaction_mode IMMEDIATE, settings). The case they held before is let go in the same
    statement. Two queries and the transaction. Refused for a dataset of another project than the rubric's.
    """
    refuse_other_project(project_id=dataset.project_id, rubric=rubric)
    now = now or timezone.now()
    with transaction.atomic():
        case = next_case(dataset=dataset, rubric=rubric, reviewer=reviewer, now=now, lock=True)
        # A case that needs labels was chosen free (or theirs) and locked, so this hold is theirs; a
        # label of theirs that stopped counting is shown even while someone else holds its case.
        case_claim(case_id=case.pk if case else None, rubric=rubric, reviewer=reviewer, now=now)
    return case


def case_claim(*, case_id: int | None, rubric: Rubric, reviewer: User, now: datetime | None = None) -> bool:
    """Hold the case just shown to this reviewer, and let go of the one they held before; True if they hold it.

    Others are not served a held case until the holder labels it or the hold runs out (CLAIM_LEASE), so
    reviewers working at once spread over the cases (Label Studio locks tasks the same way). One
    conditional UPDATE: a reviewer holds at most one case per rubric, and a hold is never taken from a
    reviewer who still holds it. case_id None only lets go.
    """
    now = now or timezone.now()
    params = {
        "case": case_id, "me": reviewer.pk, "rubric": rubric.pk,
        "now": connection.ops.adapt_datetimefield_value(now),
        "until": connection.ops.adapt_datetimefield_value(now + CLAIM_LEASE),
    }
    with connection.cursor() as cursor:
        cursor.execute(_CLAIM, params)
        return any(row[0] == case_id for row in cursor.fetchall())


# "case_id = NULL" is never true: with no case, every hold of theirs is let go and nothing is taken.
_CLAIM = """
UPDATE labeling_casetally
SET claimed_by_id = CASE WHEN case_id = %(case)s THEN %(me)s END,
    claimed_until = CASE WHEN case_id = %(case)s THEN %(until)s END
WHERE rubric_id = %(rubric)s
  AND (claimed_by_id = %(me)s
       OR (case_id = %(case)s AND (claimed_by_id IS NULL OR claimed_until <= %(now)s)))
RETURNING case_id
"""
