"""Writes of the labeling workflow: labels, skips, undo, serving and holding cases, adjudication, requests.

Every function is keyword-only and does its writes in one transaction. Counts the queue reads
(CaseTally, Label.stale) follow from database triggers (migration 0003), so nothing here keeps them.
"""

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from evalhub.models import User
from labeling.importing.reading import CASE_KINDS
from labeling.models import (
    Adjudication,
    Case,
    CaseTally,
    Dataset,
    Label,
    LabelRequest,
    PolicyDocument,
    Rubric,
    Skip,
    Verdict,
)
from labeling.queue import next_case

# How long a case shown to one reviewer is kept from the others if they never answer (a closed tab).
CLAIM_LEASE = timedelta(minutes=10)


class LabelingRefused(Exception):
    """A write that the rules forbid; the message is meant for the person who asked."""


def label_submit(
    *, case: Case, rubric: Rubric, reviewer: User, verdict: str, note: str = "", content_hash: str
) -> Label:
    """Record the reviewer's verdict on a case, given against the content (hash) they saw.

    There is one label per (case, rubric, reviewer) whatever arrives at once: the INSERT skips on the
    unique constraint, then the row is locked and revised if it differs. So two reviewers at once each
    keep their own label, and a repeated submit of the same form changes nothing (not even
    updated_at). Their skip of the case goes in the same transaction.
    """
    if verdict not in Verdict.values:
        raise LabelingRefused(f"A verdict is pass or fail, not {verdict!r}.")
    note, now = note.strip(), timezone.now()
    with transaction.atomic():
        # INSERT ... ON CONFLICT DO NOTHING RETURNING id (PostgreSQL and SQLite alike): a concurrent insert
        # of the same key waits for the other transaction, then does nothing. RETURNING says which
        # happened, so a new label (the usual case) costs one statement.
        stamp = connection.ops.adapt_datetimefield_value(now)
        with connection.cursor() as cursor:
            cursor.execute(_INSERT_LABEL, [case.pk, rubric.pk, reviewer.pk, verdict, note, content_hash, stamp, stamp])
            inserted = cursor.fetchone()
        if inserted:
            label = Label(pk=inserted[0], case=case, rubric=rubric, reviewer=reviewer, verdict=verdict, note=note,
                          content_hash=content_hash, created_at=now, updated_at=now)
        else:  # theirs already: lock it, and revise it only if something differs
            label = Label.objects.select_for_update().get(case=case, rubric=rubric, reviewer=reviewer)
            if (label.verdict, label.note, label.content_hash) != (verdict, note, content_hash):
                label.revise(verdict=verdict, note=note, content_hash=content_hash)
        Skip.objects.filter(case=case, rubric=rubric, reviewer=reviewer).delete()
    return label


# stale and dataset_id are the triggers' to set (migrations 0003, 0004).
_INSERT_LABEL = """
INSERT INTO labeling_label (case_id, rubric_id, reviewer_id, verdict, note, content_hash, stale, created_at, updated_at)
VALUES (%s, %s, %s, %s, %s, %s, FALSE, %s, %s)
ON CONFLICT (case_id, rubric_id, reviewer_id) DO NOTHING
RETURNING id
"""


def label_undo(*, label_id: int, reviewer: User, dataset: Dataset, rubric: Rubric) -> int | None:
    """Take back one of the reviewer's labels: restore it as it was before its last revision, or delete it.

    Returns the case id to show again, or None when the label is gone already (a repeated undo
    changes nothing) or is not theirs in this dataset and rubric.
    """
    with transaction.atomic():
        label = (
            Label.objects.select_for_update(of=("self",))
            .filter(pk=label_id, reviewer=reviewer, rubric=rubric, case__dataset=dataset)
            .first()
        )
        if label is None:
            return None
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
    """Pass on a case for now: it comes back to this reviewer after the rest (skipping again sends it last)."""
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
    statement. Two queries and the transaction.
    """
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


def policy_write(*, slug: str, text: str, by: User) -> PolicyDocument:
    """Save `text` as the policy's next version (1 for a new slug) and return it.

    Versions are numbered under a lock on the slug's rows; writing exactly what the newest version
    says returns that version instead of a duplicate. A saved version never changes.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # a textarea's line ends must not change the sha
    if not text.strip():
        raise LabelingRefused("A policy needs some text.")
    with transaction.atomic():
        newest = PolicyDocument.objects.select_for_update().filter(slug=slug).order_by("-version").first()
        if newest is not None and newest.text == text:
            return newest
        return PolicyDocument.objects.create(
            slug=slug, version=(newest.version if newest else 0) + 1, text=text,
            sha256=hashlib.sha256(text.encode()).hexdigest(), created_by=by,
        )


def cases_set_kind(*, dataset: Dataset, cases, kind: str) -> int:
    """Set the calibration kind of `cases` (a queryset) of `dataset`; returns how many changed.

    The kind is not judged content (docs/cases.md): content_changed_at and content_hash stay, so no run
    becomes stale and no label stops counting. Cases of other datasets are left alone.
    """
    if kind and kind not in CASE_KINDS:
        raise LabelingRefused(f"A kind is one of {', '.join(CASE_KINDS)}, or empty.")
    return cases.filter(dataset=dataset).exclude(kind=kind).update(kind=kind)
