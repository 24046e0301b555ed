"""Reads for a reviewer's labeling queue: which case comes next, their progress, their history.

The next case is one SQL query whatever the dataset's size. It reads two things the database keeps
(the triggers of migration 0003_queue_triggers, redefined in 0004 and 0006): Label.stale ("changed since
you labeled": the label stopped counting, LABEL_STOPPED_COUNTING_SQL in labeling/models.py) and
CaseTally, one row per (case, rubric) with its number of labels and of lead requests, indexed in queue
order. The triggers make a tally row only for a case and a rubric of the same project (migration
0018_projects), and every read here is keyed by a (dataset, rubric) the pages take from one project, so the
queue never pairs a rubric with another project's cases.
"""

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import Count, Exists, F, Min, OuterRef, Q, QuerySet, Sum
from django.utils import timezone

from evalhub.models import Project, User
from labeling.models import LABEL_STOPPED_COUNTING_SQL, Case, CaseTally, Dataset, Label, Rubric

CHANGED, NEEDED, SKIPPED = "changed", "needed", "skipped"
_REASONS = {0: CHANGED, 1: NEEDED, 2: SKIPPED}

# Each branch is cheap on its own index and returns at most one row; the outer ORDER BY picks among
# them: tier 0 the reviewer's labels that stopped counting, tier 1 cases that need labels — first those
# `judges` gave a priority (CaseTally.priority, highest first, then its priority_order: k0 = -priority),
# then the rest (fewest first, in two branches: under labels_per_case, and above it because a lead
# asked) — tier 2 their skipped cases. Branches are wrapped in sub-selects because SQLite allows LIMIT only there.
# A case shown to another reviewer who has not answered yet is held for them (the claim, until it
# runs out; their label clears it, migration 0006): reviewers working at once spread over the cases
# instead of all labeling the first one. So a case is on one screen at a time, which is never more
# than it still needs. {lock} is where services.case_serve locks the tally rows it chooses from.
_NEXT_CASE_SQL = """
SELECT c.*, q.tier AS queue_tier,
       own.id AS own_id, own.verdict AS own_verdict, own.note AS own_note, own.stale AS own_stale FROM (
  SELECT * FROM (
    SELECT l.case_id AS case_id, 0 AS tier, 0 AS k0, 0 AS k1, l.case_id AS k2
    FROM labeling_label l
    WHERE l.reviewer_id = %(me)s AND l.rubric_id = %(rubric)s AND l.dataset_id = %(dataset)s AND {changed}
      AND {answered_l}
      AND NOT EXISTS (SELECT 1 FROM labeling_skip s
                      WHERE s.case_id = l.case_id AND s.rubric_id = l.rubric_id AND s.reviewer_id = l.reviewer_id)
    ORDER BY l.case_id LIMIT 1
  ) changed
  UNION ALL
  SELECT * FROM (
    SELECT t.case_id, 1, -t.priority, t.priority_order, t.case_id FROM labeling_casetally t
    WHERE t.dataset_id = %(dataset)s AND t.rubric_id = %(rubric)s AND t.priority > 0
      AND t.labels < %(per_case)s + t.requested
      AND {open}
    ORDER BY t.priority DESC, t.priority_order, t.case_id LIMIT 1 {lock}
  ) prioritized
  UNION ALL
  SELECT * FROM (
    SELECT t.case_id, 1, 0, {keys} FROM labeling_casetally t
    WHERE t.dataset_id = %(dataset)s AND t.rubric_id = %(rubric)s AND t.labels < %(per_case)s
      AND {open}
    ORDER BY {order} LIMIT 1 {lock}
  ) needed
  UNION ALL
  SELECT * FROM (
    SELECT t.case_id, 1, 0, {keys} FROM labeling_casetally t
    WHERE t.dataset_id = %(dataset)s AND t.rubric_id = %(rubric)s AND t.requested > 0
      AND t.labels >= %(per_case)s AND t.labels < %(per_case)s + t.requested
      AND {open}
    ORDER BY {order} LIMIT 1 {lock}
  ) requested
  UNION ALL
  SELECT * FROM (
    SELECT s.case_id, 2, 0, 0, 0 FROM labeling_skip s
    JOIN labeling_casetally t ON t.case_id = s.case_id AND t.rubric_id = s.rubric_id
    LEFT JOIN labeling_label l ON l.case_id = s.case_id AND l.rubric_id = s.rubric_id AND l.reviewer_id = s.reviewer_id
    WHERE s.reviewer_id = %(me)s AND s.rubric_id = %(rubric)s AND t.dataset_id = %(dataset)s AND {answered}
      AND ({changed} OR (l.id IS NULL AND t.labels < %(per_case)s + t.requested AND {free}))
    ORDER BY s.created_at, s.case_id LIMIT 1 {lock}
  ) skipped
) q JOIN labeling_case c ON c.id = q.case_id
LEFT JOIN labeling_label own ON own.case_id = q.case_id AND own.rubric_id = %(rubric)s AND own.reviewer_id = %(me)s
ORDER BY q.tier, q.k0, q.k1, q.k2
LIMIT 1
"""
_FREE = "(t.claimed_until IS NULL OR t.claimed_until <= %(now)s OR t.claimed_by_id = %(me)s)"
# A case with no answer yet (output null: a golden-set case) has nothing to label: never served.
_ANSWERED = "EXISTS (SELECT 1 FROM labeling_case a WHERE a.id = {case} AND a.output IS NOT NULL)"
_OPEN = f"""{_ANSWERED.format(case="t.case_id")}
      AND NOT EXISTS (SELECT 1 FROM labeling_label m
                  WHERE m.case_id = t.case_id AND m.rubric_id = t.rubric_id AND m.reviewer_id = %(me)s)
      AND NOT EXISTS (SELECT 1 FROM labeling_skip s
                      WHERE s.case_id = t.case_id AND s.rubric_id = t.rubric_id AND s.reviewer_id = %(me)s)
      AND {_FREE}"""
# PostgreSQL: the tally rows a branch picks are locked until the choosing transaction ends, and rows
# another reviewer is choosing right now are passed over (SKIP LOCKED): they take the next case instead
# of waiting for this one. A locked row is re-read at its newest version and the branch's conditions
# checked again, so a hold or label committed since the query began is seen. (A row a branch picks but
# the outer ORDER BY passes over stays locked only until that transaction ends: milliseconds.) SQLite
# has no row locks: its one writer at a time (an IMMEDIATE transaction) gives the same guarantee.
_SKIP_LOCKED = "FOR UPDATE OF t SKIP LOCKED"


# The needed branches' sort keys (k1, k2) and order, by Dataset.queue_order: the fewest labels first, or
# the newest ingested first (case ids grow as cases arrive; index casetally_newest).
# Under SHARE, a fixed pseudo-random share of cases (by case id: the multiplier is prime to 100, so any
# 100 consecutive ids hold exactly `share` of them) sorts before every other (-1 < any label count).
_IN_SHARE = "(t.case_id * 7919) %% 100 < %(share)s"  # %% : a literal % beside the parameters
_SHARE_KEYS = (f"CASE WHEN {_IN_SHARE} THEN -1 ELSE t.labels END, "
               f"CASE WHEN {_IN_SHARE} THEN -t.case_id ELSE t.case_id END")
_NEEDED_ORDER = {
    Dataset.QueueOrder.FEWEST_LABELS: ("t.labels, t.case_id", "t.labels, t.case_id"),
    Dataset.QueueOrder.NEWEST: ("0, -t.case_id", "t.case_id DESC"),
    Dataset.QueueOrder.SHARE: (_SHARE_KEYS, "4, 5"),  # by those two keys: the select list's 4th and 5th
}


def _next_case_sql(*, lock: bool, queue_order: str = Dataset.QueueOrder.FEWEST_LABELS) -> str:
    lock_clause = _SKIP_LOCKED if lock and connection.features.has_select_for_update_skip_locked else ""
    keys, order = _NEEDED_ORDER.get(queue_order, _NEEDED_ORDER[Dataset.QueueOrder.FEWEST_LABELS])
    return _NEXT_CASE_SQL.format(open=_OPEN, free=_FREE, lock=lock_clause, keys=keys, order=order,
                                 changed=LABEL_STOPPED_COUNTING_SQL.format(label="l"),
                                 answered=_ANSWERED.format(case="t.case_id"),
                                 answered_l=_ANSWERED.format(case="l.case_id"))


def next_case(
    *, dataset: Dataset, rubric: Rubric, reviewer: User, now: datetime | None = None, lock: bool = False
) -> Case | None:
    """The case to label next, with `.queue_reason` (changed, needed, skipped) and `.own_label`, or None.

    Order: first their labels that stopped counting ("changed since you labeled"), then cases
    that still need labels — fewer than labels_per_case, or a lead's request for another — those with a
    priority first (CaseTally.priority: drawn audit-sample cases in their seeded order), then the fewest
    labels first (or, where the dataset says so, the newest ingested first), never one they labeled; skipped
    cases only after the rest. Ties go by case id. A case
    on another reviewer's screen (held, see services.case_claim) waits until they answer or the hold ends.

    A read: it holds nothing. The queue pages serve cases through services.case_serve, which calls it
    with lock=True inside the transaction that also holds the case chosen.
    """
    params = {
        "me": reviewer.pk, "rubric": rubric.pk, "dataset": dataset.pk, "per_case": rubric.labels_per_case,
        "now": connection.ops.adapt_datetimefield_value(now or timezone.now()),
        "share": dataset.queue_share,
    }
    found = list(Case.objects.raw(_next_case_sql(lock=lock, queue_order=dataset.queue_order), params))
    if not found:
        return None
    case = found[0]
    case.queue_reason = _REASONS[case.queue_tier]
    # Their own label on it (a changed or skipped case may have one), read in the same query.
    case.own_label = None
    if case.own_id is not None:
        case.own_label = Label(pk=case.own_id, case=case, rubric=rubric, reviewer=reviewer, verdict=case.own_verdict,
                               note=case.own_note, stale=bool(case.own_stale))
    return case


def queue_case(*, dataset: Dataset, rubric: Rubric, reviewer: User, case_id: int) -> Case | None:
    """One case of the dataset asked for by id (after an undo, or to revise a label from history), with
    `.own_label`: the reviewer's own label on it, shown to them (and only them) to confirm or change."""
    case = Case.objects.filter(dataset=dataset, pk=case_id).first()
    if case is not None:
        case.queue_reason = None
        case.own_label = Label.objects.filter(case=case, rubric=rubric, reviewer=reviewer).first()
    return case


def undo_label(*, label_id: int, dataset: Dataset, rubric: Rubric, reviewer: User) -> Label | None:
    """The label that `u` would take back (this sitting's newest step, queue.sitting), as the page names it."""
    return (
        Label.objects.filter(pk=label_id, reviewer=reviewer, rubric=rubric, dataset=dataset)
        .select_related("case")
        .only("id", "verdict", "updated_at", "case__id", "case__external_id")
        .first()
    )


@dataclass(frozen=True)
class Progress:
    mine: int  # the reviewer's labels in this dataset for this rubric
    mine_changed: int  # of which stopped counting
    left: int  # left for them: cases that still need their label, and their labels that stopped counting
    cases: int  # cases in the dataset
    done: int  # cases with all the labels they need
    labels: int  # labels given by everyone

    @property
    def percent_done(self) -> int:
        return round(100 * self.done / self.cases) if self.cases else 0


def progress_of(*, dataset: Dataset, rubric: Rubric, reviewer: User) -> Progress:
    """The reviewer's and the dataset's progress for this rubric: four aggregate queries.

    The reviewer's two counts are separate so that each reads one index only (label_queue_recent,
    and the small partial label_queue_stale) instead of visiting every label of theirs.
    """
    mine = Label.objects.filter(reviewer=reviewer, rubric=rubric, dataset=dataset)
    mine_changed = mine.stopped_counting().count()
    everyone = dataset_tallies(dataset=dataset, rubric=rubric)
    needing = _needing_label_from(reviewer).filter(dataset=dataset, rubric=rubric).count()
    return Progress(
        mine=mine.count(), mine_changed=mine_changed, left=needing + mine_changed, cases=everyone["cases"],
        done=everyone["done"], labels=everyone["labels"],
    )


def _needing_label_from(reviewer: User) -> QuerySet[CaseTally]:
    """Tallies of cases that still need a label (under labels_per_case plus a lead's requests) that this
    reviewer has not given: with their labels that stopped counting, what is left for them. A case with no
    answer yet is never served."""
    mine = Label.objects.filter(case=OuterRef("case"), rubric=OuterRef("rubric"), reviewer=reviewer)
    return CaseTally.objects.filter(
        labels__lt=F("rubric__labels_per_case") + F("requested"), case__output__isnull=False,
    ).exclude(Exists(mine))


def held_elsewhere(*, dataset: Dataset, rubric: Rubric, reviewer: User, now: datetime | None = None) -> dict:
    """{"count", "frees_at"}: cases left for this reviewer that are open in another reviewer's tab (held:
    services.case_claim), and when the first of those holds runs out if they leave it. One query."""
    return _needing_label_from(reviewer).filter(
        dataset=dataset, rubric=rubric, claimed_until__gt=now or timezone.now(),
    ).exclude(claimed_by=reviewer).aggregate(count=Count("id"), frees_at=Min("claimed_until"))


def dataset_tallies(*, dataset: Dataset, rubric: Rubric) -> dict:
    """{"cases", "done", "labels"} of a (dataset, rubric) from CaseTally, in one query."""
    # Cases with no answer yet are never served, so they are no part of the work.
    row = CaseTally.objects.filter(dataset=dataset, rubric=rubric, case__output__isnull=False).aggregate(
        cases=Count("id"),
        done=Count("id", filter=Q(labels__gte=rubric.labels_per_case + F("requested"))),
        labels=Sum("labels"),
    )
    return {"cases": row["cases"], "done": row["done"], "labels": row["labels"] or 0}


def queues_for(*, project: Project, user: User, role: str | None) -> list[dict]:
    """The (dataset, rubric) queues of `project` a user with `role` in it may open, with their own label count in
    each and how many cases are left for them: five queries.

    Left: the cases that still need a label (under labels_per_case plus a lead's requests) and that they
    have not labeled, plus their labels that stopped counting. Reviewers get their assigned datasets of the
    project, leads every one; always with the project's own rubrics, never another's. Draft and live rubrics
    alike: labels are what a rubric is calibrated on before it is promoted.
    """
    datasets = list(project.datasets.visible_to(user, role=role))
    rubrics = list(project.rubrics.order_by("slug"))
    counts = {
        (row["dataset"], row["rubric"]): row["n"]
        for row in Label.objects.filter(reviewer=user, dataset__in=datasets)
        .values("dataset", "rubric")
        .annotate(n=Count("id"))
    }
    needing = (
        _needing_label_from(user).filter(dataset__in=datasets)
        .values("dataset", "rubric")
        .annotate(n=Count("id"))
    )
    left = Counter({(row["dataset"], row["rubric"]): row["n"] for row in needing})
    left.update({
        (row["dataset"], row["rubric"]): row["n"]
        for row in Label.objects.stopped_counting().filter(reviewer=user, dataset__in=datasets)
        .values("dataset", "rubric").annotate(n=Count("id"))
    })
    return [
        {"dataset": dataset, "rubric": rubric, "mine": counts.get((dataset.pk, rubric.pk), 0),
         "left": left[(dataset.pk, rubric.pk)]}
        for dataset in sorted(datasets, key=lambda d: d.slug)
        for rubric in rubrics
    ]


# A reviewer's history's sort keys (evalhub.tables).
HISTORY_SORTS = {"when": ("updated_at", "id"), "case": ("case__external_id", "id"), "verdict": ("verdict", "-id")}


def labels_history(
    *, project: Project, user: User, role: str | None, dataset: Dataset | None = None, rubric: Rubric | None = None,
    search: str = "", ordering: tuple = ("-updated_at", "-id"),
) -> QuerySet[Label]:
    """The user's labels in `project`, newest first, with `changed` (stopped counting), for the project's datasets
    they may see with `role`; `search` matches the case's id or the label's note."""
    labels = Label.objects.filter(reviewer=user, dataset__in=project.datasets.visible_to(user, role=role))
    if dataset is not None:
        labels = labels.filter(dataset=dataset)
    if rubric is not None:
        labels = labels.filter(rubric=rubric)
    if search:
        labels = labels.filter(Q(case__external_id__icontains=search) | Q(note__icontains=search))
    return labels.select_related("case__dataset", "rubric").order_by(*ordering)
