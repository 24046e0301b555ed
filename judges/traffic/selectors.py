from django.db.models import OuterRef, Subquery

from judges.models import Run, TrafficJudging
from labeling.models import Rubric


def traffic_pairs(*, rubric: Rubric) -> list[TrafficJudging]:
    """The rubric's traffic judging pairs (with its own project's datasets), each with its newest traffic run's id
    (`last_run`). One query."""
    newest = (Run.objects.filter(source=Run.Source.TRAFFIC, config__rubric_id=OuterRef("rubric_id"),
                                 dataset_id=OuterRef("dataset_id")).order_by("-pk").values("pk")[:1])
    return list(TrafficJudging.objects.filter(rubric=rubric, dataset__project_id=rubric.project_id)
                .select_related("dataset", "changed_by").annotate(last_run=Subquery(newest))
                .order_by("dataset__slug"))
