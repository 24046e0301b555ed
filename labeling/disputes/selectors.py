"""Human verdicts, and reads for leads: a dataset's state for one rubric, per-reviewer progress, and its
disputes.

A dispute is a (case, rubric) whose counting labels disagree (a tie has no human verdict until a lead
adjudicates it), or that a lead has adjudicated. Query counts do not grow with the number of cases.
Every read is of one project: keyed by a dataset and a rubric the pages take from it, or by `project=`.
"""

from django.db.models import Case as SqlCase
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Subquery, Value, When

from evalhub.models import Project, User
from labeling.models import (
    Adjudication,
    Case,
    CaseTally,
    Dataset,
    Label,
    Rubric,
    Skip,
    label_counts,
    label_stopped_counting,
)

OPEN, DECIDED, ALL = "open", "decided", "all"


def counting_labels(*, rubric: Rubric) -> QuerySet[Label]:
    """Labels of this rubric that still count: given against the case content as it is now."""
    return Label.objects.counting().filter(rubric=rubric)


def cases_with_human_verdict(*, rubric: Rubric, cases: QuerySet[Case] | None = None) -> QuerySet[Case]:
    """Cases annotated with `passes`, `fails` (counting labels), `adjudicated` and `human_verdict`.

    The human verdict (docs/words.md) is the lead's adjudication if there is one, else the majority of the
    counting labels; a tie (or no label) has none. One query however many cases. Without `cases`, the cases
    of the rubric's own project (a rubric applies to no other's).
    """
    cases = Case.objects.filter(dataset__project_id=rubric.project_id) if cases is None else cases
    counting = Q(labels__rubric=rubric) & label_counts("labels__")
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


def _labeled_or_decided(*, dataset: Dataset, rubric: Rubric, min_labels: int = 1) -> QuerySet[Case]:
    """The dataset's cases with at least `min_labels` labels of the rubric, or an adjudication.

    Narrowing first keeps the human-verdict aggregate off the (many) cases nobody labeled yet.
    """
    tallied = CaseTally.objects.filter(dataset=dataset, rubric=rubric, labels__gte=min_labels).values("case")
    decided = Adjudication.objects.filter(rubric=rubric, case__dataset=dataset).values("case")
    return Case.objects.filter(dataset=dataset).filter(Q(pk__in=tallied) | Q(pk__in=decided))


def rubric_counts(*, dataset: Dataset, rubric: Rubric) -> dict:
    """How far a dataset is for one rubric, in two queries.

    cases; unlabeled (no label at all); labeled (a counting label); complete (all the labels it needs);
    changed (a label that stopped counting: the case changed since it was labeled); disputed (counting
    labels disagree) and of those open (no adjudication); ties; human verdicts pass / fail.
    """
    tallies = CaseTally.objects.filter(dataset=dataset, rubric=rubric).aggregate(
        cases=Count("id"),
        unlabeled=Count("id", filter=Q(labels=0)),
        complete=Count("id", filter=Q(labels__gte=rubric.labels_per_case + F("requested"))),
    )
    cases = cases_with_human_verdict(rubric=rubric, cases=_labeled_or_decided(dataset=dataset, rubric=rubric))
    stale = Count("labels", filter=Q(labels__rubric=rubric) & label_stopped_counting("labels__"))
    verdicts = cases.annotate(stale_labels=stale).aggregate(
        labeled=Count("pk", filter=Q(passes__gt=0) | Q(fails__gt=0)),
        changed=Count("pk", filter=Q(stale_labels__gt=0)),
        disputed=Count("pk", filter=Q(passes__gt=0, fails__gt=0)),
        open=Count("pk", filter=Q(passes__gt=0, fails__gt=0, adjudicated__isnull=True)),
        ties=Count("pk", filter=Q(passes__gt=0, passes=F("fails"), adjudicated__isnull=True)),
        human_pass=Count("pk", filter=Q(human_verdict="pass")),
        human_fail=Count("pk", filter=Q(human_verdict="fail")),
    )
    return tallies | verdicts


def reviewer_progress(*, dataset: Dataset, rubric: Rubric) -> list[dict]:
    """Per reviewer (assigned, or with labels here): labels, counting, changed, pass, fail, skipped.

    Four queries however many reviewers and labels.
    """
    rows = {
        row["reviewer"]: row
        for row in Label.objects.filter(dataset=dataset, rubric=rubric)
        .values("reviewer")
        .annotate(
            labels=Count("id"),
            changed=Count("id", filter=label_stopped_counting()),
            passes=Count("id", filter=label_counts() & Q(verdict="pass")),
            fails=Count("id", filter=label_counts() & Q(verdict="fail")),
        )
    }
    skips = dict(
        Skip.objects.filter(rubric=rubric, case__dataset=dataset)
        .values("reviewer")
        .annotate(n=Count("id"))
        .values_list("reviewer", "n")
    )
    assigned = set(dataset.reviewers.values_list("pk", flat=True))
    users = User.objects.filter(pk__in=assigned | set(rows) | set(skips)).order_by("username")
    empty = {"labels": 0, "changed": 0, "passes": 0, "fails": 0}
    result = []
    for user in users:
        counts = {key: value for key, value in rows.get(user.pk, empty).items() if key != "reviewer"}
        result.append({"reviewer": user, "assigned": user.pk in assigned, "skipped": skips.get(user.pk, 0)} | counts)
    return result


def dispute_cases(*, dataset: Dataset, rubric: Rubric, status: str = OPEN) -> QuerySet[Case]:
    """Disputed cases, ties first, with `passes`, `fails`, `human_verdict`, `adjudicated`, `requested`,
    `labels_needed_more`; page them, then `with_dispute_details` for their labels and adjudication.

    status: open (labels disagree, no adjudication), decided (adjudicated), all.
    """
    cases = cases_with_human_verdict(rubric=rubric, cases=_labeled_or_decided(dataset=dataset, rubric=rubric,
                                                                             min_labels=2))
    disagree = Q(passes__gt=0, fails__gt=0)
    if status == OPEN:
        cases = cases.filter(disagree, adjudicated__isnull=True)
    elif status == DECIDED:
        cases = cases.filter(adjudicated__isnull=False)
    else:
        cases = cases.filter(disagree | Q(adjudicated__isnull=False))
    tally = CaseTally.objects.filter(case=OuterRef("pk"), rubric=rubric)
    return cases.annotate(
        requested=Subquery(tally.values("requested")[:1]),
        label_count=Subquery(tally.values("labels")[:1]),
    ).order_by(F("human_verdict").asc(nulls_first=True), "pk")  # ties (no verdict) first


def dispute_counts(*, dataset: Dataset, rubric: Rubric) -> dict:
    """{"open", "decided"} for the disputes page's tabs, in one query."""
    cases = cases_with_human_verdict(rubric=rubric, cases=_labeled_or_decided(dataset=dataset, rubric=rubric,
                                                                             min_labels=2))
    return cases.aggregate(
        open=Count("pk", filter=Q(passes__gt=0, fails__gt=0, adjudicated__isnull=True)),
        decided=Count("pk", filter=Q(adjudicated__isnull=False)),
    )


def with_dispute_details(cases: list[Case], *, rubric: Rubric) -> list[Case]:
    """Attach every label (reviewer, verdict, note, counting or not) and the adjudication: two queries."""
    labels = Label.objects.filter(rubric=rubric, case__in=cases).select_related("reviewer").order_by(
        "reviewer__username"
    )
    by_case: dict[int, list[Label]] = {}
    for label in labels:
        by_case.setdefault(label.case_id, []).append(label)
    decisions = {
        a.case_id: a for a in Adjudication.objects.filter(rubric=rubric, case__in=cases).select_related("decided_by")
    }
    for case in cases:
        case.rubric_labels = by_case.get(case.pk, [])
        case.adjudication = decisions.get(case.pk)
    return cases


def disputes_by_queue(*, project: Project) -> list[dict]:
    """Open disputes per (dataset, rubric) of the project, for the disputes index and the lead's overview:
    three queries (one with no dispute).

    [{"dataset", "rubric", "open"}] for every pair of the project with an open dispute.
    """
    decided = Adjudication.objects.filter(case=OuterRef("case"), rubric=OuterRef("rubric"))
    per_case = (
        Label.objects.counting()
        .filter(dataset__project=project, rubric__project=project)
        .values("dataset", "rubric", "case")
        .annotate(
            passes=Count("id", filter=Q(verdict="pass")),
            fails=Count("id", filter=Q(verdict="fail")),
            decided=Exists(decided),
        )
        .filter(passes__gt=0, fails__gt=0, decided=False)
    )
    counts: dict[tuple[int, int], int] = {}
    for row in per_case:
        key = (row["dataset"], row["rubric"])
        counts[key] = counts.get(key, 0) + 1
    datasets = project.datasets.in_bulk({d for d, _ in counts})
    rubrics = project.rubrics.in_bulk({r for _, r in counts})
    return sorted(
        ({"dataset": datasets[d], "rubric": rubrics[r], "open": n} for (d, r), n in counts.items()),
        key=lambda row: (row["dataset"].slug, row["rubric"].slug),
    )
