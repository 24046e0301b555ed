"""A dataset's page for one rubric: counts, reviewers' agreement, per-reviewer progress (leads only)."""

import pytest
from django.urls import reverse

from labeling.disputes import services as dispute_services
from labeling.queue import services
from tests.conftest import TEST_PROJECT, make_user
from tests.labeling.queue_helpers import change_content, give_label, make_cases


def page_url(dataset, rubric) -> str:
    return reverse("labeling:dataset_rubric", args=[TEST_PROJECT, dataset.slug, rubric.slug])


def test_it_counts_the_states_of_the_cases(lead_client, lead, dataset, rubric, reviewer, second_reviewer):
    rubric.labels_per_case = 2
    rubric.save()
    agreed, tie, decided, half, changed, _unlabeled = make_cases(dataset, 6)
    for case, (a, b) in ((agreed, ("pass", "pass")), (tie, ("pass", "fail")), (decided, ("fail", "pass"))):
        give_label(case, rubric, reviewer, a)
        give_label(case, rubric, second_reviewer, b)
    dispute_services.adjudicate(case=decided, rubric=rubric, verdict="fail", by=lead)
    give_label(half, rubric, reviewer, "fail")
    give_label(changed, rubric, reviewer, "pass")
    change_content(changed, "different now")

    counts = lead_client.get(page_url(dataset, rubric)).context["counts"]
    assert counts == {
        "cases": 6, "unlabeled": 1, "complete": 3, "labeled": 4, "changed": 1, "disputed": 2, "open": 1,
        "ties": 1, "human_pass": 1, "human_fail": 2,
    }


def test_it_shows_the_reviewers_agreement(lead_client, dataset, rubric, reviewer, second_reviewer):
    for case, (a, b) in zip(make_cases(dataset, 4), [("pass", "pass"), ("fail", "fail"), ("pass", "fail"),
                                                   ("fail", "fail")], strict=True):
        give_label(case, rubric, reviewer, a)
        give_label(case, rubric, second_reviewer, b)
    response = lead_client.get(page_url(dataset, rubric))
    agreement = response.context["agreement"]
    assert agreement["percent"] == pytest.approx(0.75) and agreement["kappa_kind"] == "cohen"
    # po = .75; reviewer 1 passes 2/4, reviewer 2 1/4: pe = .5*.25 + .5*.75 = .5; κ = .5.
    assert agreement["kappa"] == pytest.approx(0.5)
    body = response.content.decode()
    assert "75 %" in body and "κ = 0.50" in body and "Cohen" in body


def test_it_shows_each_reviewers_progress(lead_client, dataset, rubric, reviewer, second_reviewer):
    outsider_with_labels = make_user("former")
    a, b, c = make_cases(dataset, 3)
    give_label(a, rubric, reviewer, "pass")
    give_label(b, rubric, reviewer, "fail")
    give_label(c, rubric, outsider_with_labels, "pass")
    services.skip(case=c, rubric=rubric, reviewer=reviewer)
    change_content(b, "new")
    rows = {row["reviewer"].username: row for row in lead_client.get(page_url(dataset, rubric)).context["reviewers"]}
    assert set(rows) == {reviewer.username, second_reviewer.username, "former"}
    rita = rows[reviewer.username]
    assert (rita["labels"], rita["passes"], rita["fails"], rita["changed"], rita["skipped"]) == (2, 1, 0, 1, 1)
    assert rows[second_reviewer.username]["labels"] == 0 and rows["former"]["assigned"] is False


def test_reviewers_get_403(reviewer_client, dataset, rubric):
    assert reviewer_client.get(page_url(dataset, rubric)).status_code == 403


def test_unknown_slugs_get_404(lead_client, dataset, rubric):
    for slugs in ([dataset.slug, "nope"], ["nope", rubric.slug]):
        assert lead_client.get(reverse("labeling:dataset_rubric", args=[TEST_PROJECT, *slugs])).status_code == 404


@pytest.mark.parametrize("n", [2, 20])
def test_it_runs_the_same_queries_however_many_cases_and_labels(
    lead_client, dataset, rubric, reviewer, second_reviewer, django_assert_num_queries, n
):
    for case in make_cases(dataset, n):
        give_label(case, rubric, reviewer, "pass")
        give_label(case, rubric, second_reviewer, "fail")
    # 2 session and user, 1 membership (the project's door), 1 dataset, 1 rubric, 2 counts, 1 agreement,
    # 4 reviewer progress (labels, skips, assigned, users), 1 other rubrics = 13.
    with django_assert_num_queries(13):
        assert lead_client.get(page_url(dataset, rubric)).status_code == 200
