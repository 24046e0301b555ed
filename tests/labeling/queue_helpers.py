"""Small builders shared by the labeling queue tests."""

from django.urls import reverse

from evalhub.models import Project
from labeling.models import Case, Dataset, Label, Rubric, case_split, labeled_content_hash

HTMX = {"HX-Request": "true"}


def make_case(dataset: Dataset, external_id: str, output: str = "Returns are accepted within 30 days.") -> Case:
    trace = {"toolCalls": [{"name": "lookup_order", "argument": {"order_id": "ORD-1"}, "result": {"status": "ok"}}]}
    return Case.objects.create(
        dataset=dataset, external_id=external_id, input="Can I return it?", output=output, trace=trace,
        golden_answer="Yes, within 30 days.", expected_behaviour="State the window.", category="policy",
        split=case_split(external_id),
        content_hash=labeled_content_hash(input="Can I return it?", output=output, trace=trace),
    )


def make_queue(
    project: Project, slug: str = "store-support", rubric_slug: str = "return-policy"
) -> tuple[Dataset, Rubric]:
    """A dataset and a rubric of `project`; by default with the very slugs of the tests' own (tests/conftest.py), so
    a test of another project shows that a slug names one project's object only."""
    dataset = Dataset.objects.create(project=project, slug=slug, name=f"{project.name} data")
    rubric = Rubric.objects.create(project=project, slug=rubric_slug, name=f"{project.name}: policy followed?",
                                   criteria="Pass when the answer follows the policy.")
    return dataset, rubric


def make_cases(dataset: Dataset, n: int, prefix: str = "c") -> list[Case]:
    return [make_case(dataset, f"{prefix}{i:03d}") for i in range(n)]


def give_label(case: Case, rubric: Rubric, reviewer, verdict: str = "pass", note: str = "") -> Label:
    return Label.objects.create(case=case, rubric=rubric, reviewer=reviewer, verdict=verdict, note=note,
                                content_hash=case.content_hash)


def change_content(case: Case, output: str) -> Case:
    """What a re-import does: new content, new hash (labels given before stop counting)."""
    case.output = output
    case.content_hash = labeled_content_hash(input=case.input, output=output, trace=case.trace)
    case.save(update_fields=["output", "content_hash"])
    return case


def queue_url(dataset: Dataset, rubric: Rubric, name: str = "queue") -> str:
    """A queue page's address, under the dataset's project (the rubric may be another's: a test of refusal)."""
    return reverse(f"labeling:{name}", args=[dataset.project.slug, dataset.slug, rubric.slug])


def label_form(case: Case, verdict: str = "pass", note: str = "", **extra) -> dict:
    return {"case": case.pk, "content_hash": case.content_hash, "verdict": verdict, "note": note, **extra}
