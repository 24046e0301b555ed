"""The lead's overview: every rubric's state in one table, and what needs attention first.

It reads what the promotion pages and the labeling overview read (`promotion_rows`,
`disputes_by_queue`) plus one count of labeling progress, so the numbers agree with those pages; the
query count does not grow with rubrics, datasets or cases.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count, F, Q
from django.urls import reverse

from evalhub.models import Project
from judges.calibration.selectors import pct, rubric_thresholds
from judges.models import CiResult
from judges.promotion.selectors import PromotionRow, promotion_rows
from labeling.disputes.selectors import disputes_by_queue
from labeling.models import CaseTally, Rubric


@dataclass
class Attention:
    """One thing a lead should look at, most urgent first (`rank`), with where to go."""

    rank: int
    rubric: Rubric
    text: str
    url: str


@dataclass
class OverviewRow:
    promotion: PromotionRow
    agreement: float | None = None  # the evidence run's agreement on the current labels (None: none or undefined)
    agreement_floor: float = 0.80
    agreement_ceiling: float = 1.00
    agreement_ok: bool = True
    open_disputes: list[dict] = field(default_factory=list)  # [{"dataset", "rubric", "open"}]
    cases: int = 0
    complete: int = 0  # cases with all the labels they need

    @property
    def rubric(self) -> Rubric:
        return self.promotion.rubric

    @property
    def disputes(self) -> int:
        return sum(row["open"] for row in self.open_disputes)

    @property
    def progress(self) -> float | None:
        return self.complete / self.cases if self.cases else None


def _labeling_progress(project: Project) -> dict[int, dict]:
    """rubric_id → {"cases", "complete"} over the project's datasets, in one query (the queue's own tallies)."""
    rows = (
        CaseTally.objects.filter(rubric__project=project).values("rubric")
        .annotate(
            cases=Count("id"),
            complete=Count("id", filter=Q(labels__gte=F("rubric__labels_per_case") + F("requested"))),
        )
        .order_by()
    )
    return {row["rubric"]: row for row in rows}


def _attention(row: OverviewRow) -> list[Attention]:
    rubric, promotion = row.rubric, row.promotion
    promotion_url = reverse("judges:promotion_rubric", args=[rubric.project.slug, rubric.slug])
    out = []
    if promotion.recalibration:
        out.append(Attention(0, rubric, f"recalibration needed: {'; '.join(promotion.recalibration)}",
                             promotion_url))
    ci = promotion.last_ci
    if ci is not None and ci.outcome != CiResult.Outcome.PASS and ci.stage != Rubric.Stage.OBSERVE:
        out.append(Attention(1, rubric, f"latest CI check {ci.get_outcome_display().lower()}: {ci.failed} failed, "
                             f"{ci.not_evaluated} not evaluated of {ci.total}",
                             promotion_url + "#ci-results"))
    for queue in row.open_disputes:
        out.append(Attention(2, rubric, f"{queue['open']} open dispute{'s' if queue['open'] != 1 else ''} on "
                             f"{queue['dataset'].name}",
                             reverse("labeling:disputes", args=[rubric.project.slug, queue["dataset"].slug,
                                                                 rubric.slug])))
    if promotion.relaxed and rubric.stage != Rubric.Stage.DRAFT:
        out.append(Attention(3, rubric, f"relaxed thresholds: {'; '.join(promotion.relaxed)}",
                             promotion_url))
    if row.cases and row.complete < row.cases:
        left = row.cases - row.complete
        out.append(Attention(4, rubric, f"{left} case{'s' if left != 1 else ''} still need labels",
                             reverse("labeling:dataset_list", args=[rubric.project.slug])))
    return out


def lead_overview(*, project: Project) -> tuple[list[OverviewRow], list[Attention]]:
    """Each of the project's rubrics' row and everything that needs attention, most urgent first.

    Queries: the rubrics, promotion_rows' eight (evidence, staleness, verdicts, judgments, latest CI…),
    disputes_by_queue's three, labeling progress's one; none per rubric.
    """
    rubrics = list(project.rubrics.select_related("project").order_by("slug"))
    disputes: dict[int, list[dict]] = {}
    for queue in disputes_by_queue(project=project):
        disputes.setdefault(queue["rubric"].pk, []).append(queue)
    progress = _labeling_progress(project)
    rows = []
    for promotion in promotion_rows(rubrics=rubrics):
        rubric = promotion.rubric
        thresholds = rubric_thresholds(rubric)
        row = OverviewRow(
            promotion=promotion, agreement_floor=thresholds.agreement_floor,
            agreement_ceiling=thresholds.agreement_ceiling, open_disputes=disputes.get(rubric.pk, []),
            cases=progress.get(rubric.pk, {}).get("cases", 0), complete=progress.get(rubric.pk, {}).get("complete", 0),
        )
        row.agreement = promotion.agreement_now
        for rule in promotion.rules:
            if rule.key in ("agreement_floor", "agreement_ceiling") and rule.applies and not rule.met:
                row.agreement_ok = False
        rows.append(row)
    attention = sorted((item for row in rows for item in _attention(row)), key=lambda a: (a.rank, a.rubric.slug))
    return rows, attention


__all__ = ["Attention", "OverviewRow", "lead_overview", "pct"]
