"""Reads for synthetic cases: the editors a lead may choose, the failed dev cases shown to one, the jobs."""

from django.db.models import QuerySet

from evalhub.models import Project
from judges.models import JudgeConfig, SynthesisJob
from judges.synthetic.writing import MAX_FAILED_CASES, FailedCase
from labeling.disputes.selectors import cases_with_human_verdict
from labeling.models import Adjudication, Case, Dataset, Label, Rubric

EDITOR_CHOICES = 50


def editor_configs(*, project: Project) -> list[JudgeConfig]:
    """The project's judge configs with a model, newest first: the editor is one's primary (docs/cases.md). One
    query."""
    configs = (JudgeConfig.objects.filter(rubric__project=project).kept().select_related("rubric")
               .order_by("-created_at", "-pk"))
    return [config for config in configs[:EDITOR_CHOICES] if "behavioral" in (config.spec.get("layers") or [])]


def failed_dev_cases(*, dataset: Dataset, limit: int = MAX_FAILED_CASES) -> list[FailedCase]:
    """The dataset's answered **dev** cases whose human verdict is fail for some rubric, newest first.

    Holdout cases never reach an editor: the holdout figures stay an honest test. One query per rubric
    with labels or adjudications on the dataset."""
    dev = Case.objects.filter(dataset=dataset, split=Case.Split.DEV).answered()
    rubric_ids = set(Label.objects.filter(dataset=dataset).values_list("rubric_id", flat=True).distinct())
    rubric_ids |= set(Adjudication.objects.filter(case__dataset=dataset).values_list("rubric_id", flat=True))
    found: dict[int, FailedCase] = {}
    # Only the dataset's own project's rubrics: what the editor is shown stays in the project.
    for rubric in Rubric.objects.filter(pk__in=rubric_ids, project_id=dataset.project_id).order_by("pk"):
        failed = cases_with_human_verdict(rubric=rubric, cases=dev).filter(human_verdict="fail")
        for pk, text, output in failed.order_by("-pk").values_list("pk", "input", "output")[:limit]:
            found[pk] = FailedCase(input=text, output=output)
    return [found[pk] for pk in sorted(found, reverse=True)[:limit]]


def dataset_synthesis_jobs(*, dataset: Dataset, limit: int = 5) -> QuerySet[SynthesisJob]:
    return SynthesisJob.objects.filter(dataset=dataset).select_related("created_by")[:limit]
