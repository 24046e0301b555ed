import pytest

from labeling.disputes.selectors import cases_with_human_verdict
from labeling.models import Adjudication, Case, Label, labeled_content_hash
from tests.conftest import make_user


def make_case(dataset, external_id: str, output: str = "Returns are accepted within 30 days.") -> Case:
    trace: dict = {}
    return Case.objects.create(
        dataset=dataset, external_id=external_id, input="Can I return it?", output=output, trace=trace,
        split="dev", content_hash=labeled_content_hash(input="Can I return it?", output=output, trace=trace),
    )


def label(case, rubric, reviewer, verdict: str, content_hash: str | None = None) -> Label:
    return Label.objects.create(
        case=case, rubric=rubric, reviewer=reviewer, verdict=verdict,
        content_hash=content_hash or case.content_hash,
    )


@pytest.mark.django_db
def test_it_takes_the_majority_and_leaves_ties_without_a_verdict(dataset, rubric, lead):
    a, b, c = (make_user(name) for name in ("a", "b", "c"))
    majority, tie, unlabeled = (make_case(dataset, x) for x in ("majority", "tie", "unlabeled"))
    for reviewer, verdict in ((a, "fail"), (b, "fail"), (c, "pass")):
        label(majority, rubric, reviewer, verdict)
    label(tie, rubric, a, "pass")
    label(tie, rubric, b, "fail")

    verdicts = dict(cases_with_human_verdict(rubric=rubric).values_list("external_id", "human_verdict"))
    assert verdicts == {"majority": "fail", "tie": None, "unlabeled": None}

    Adjudication.objects.create(case=tie, rubric=rubric, verdict="pass", decided_by=lead)
    Adjudication.objects.create(case=majority, rubric=rubric, verdict="pass", decided_by=lead)
    verdicts = dict(cases_with_human_verdict(rubric=rubric).values_list("external_id", "human_verdict"))
    assert verdicts == {"majority": "pass", "tie": "pass", "unlabeled": None}


@pytest.mark.django_db
def test_it_ignores_labels_given_against_older_content(dataset, rubric):
    a, b = make_user("a"), make_user("b")
    case = make_case(dataset, "changed")
    label(case, rubric, a, "pass", content_hash="0" * 64)
    label(case, rubric, b, "fail")
    (row,) = cases_with_human_verdict(rubric=rubric).values("passes", "fails", "human_verdict")
    assert row == {"passes": 0, "fails": 1, "human_verdict": "fail"}


@pytest.mark.django_db
def test_it_counts_only_labels_of_the_rubric_asked_about(dataset, rubric):
    from labeling.models import Rubric

    other = Rubric.objects.create(project=rubric.project, slug="tone", name="Is the tone polite?", criteria="…")
    a = make_user("a")
    case = make_case(dataset, "one")
    label(case, other, a, "fail")
    (row,) = cases_with_human_verdict(rubric=rubric).values("human_verdict")
    assert row == {"human_verdict": None}
