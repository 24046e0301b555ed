"""The lead's overview: each rubric's state, what needs attention first, and a query count that does not
grow with rubrics."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evalhub.demo.projects import STORE_PROJECT
from judges.models import CiResult
from labeling.models import Label, Rubric
from tests.conftest import TEST_PROJECT, make_user
from tests.judges.helpers import make_cases


def _labeled_rubrics(dataset, n: int, reviewers) -> None:
    cases = make_cases(dataset, 4, prefix=f"n{n}-")
    for i in range(n):
        rubric = Rubric.objects.create(project=dataset.project, slug=f"r{n}-{i}", name=f"Rubric {i}",
                                       criteria="Is it right?")
        # Two reviewers disagree on the first case: an open dispute on every rubric.
        Label.objects.create(case=cases[0], rubric=rubric, reviewer=reviewers[0], verdict="pass",
                             content_hash=cases[0].content_hash)
        Label.objects.create(case=cases[0], rubric=rubric, reviewer=reviewers[1], verdict="fail",
                             content_hash=cases[0].content_hash)


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


def test_it_reads_a_fixed_number_of_queries_however_many_rubrics(lead_client, dataset, reviewer, second_reviewer):
    url = reverse("project_home", args=[TEST_PROJECT])
    _labeled_rubrics(dataset, 1, [reviewer, second_reviewer])
    one = _queries(lead_client, url)
    _labeled_rubrics(dataset, 5, [reviewer, second_reviewer])
    six = _queries(lead_client, url)
    # Rubrics, promotion_rows' evidence/staleness/verdicts/judgments/CI, disputes (3), labeling progress (1),
    # datasets, recent runs, session and user: the same whatever the number of rubrics.
    assert one == six


def test_a_reviewer_lands_on_their_queue(reviewer_client):
    response = reviewer_client.get(reverse("home"), follow=True)
    assert response.redirect_chain == [(reverse("project_home", args=[TEST_PROJECT]), 302),
                                       (reverse("labeling:queue_start", args=[TEST_PROJECT]), 302)]


def test_a_lead_of_one_project_lands_on_its_overview(lead_client):
    response = lead_client.get(reverse("home"), follow=True)
    assert response.redirect_chain == [(reverse("project_home", args=[TEST_PROJECT]), 302)]
    assert "rows" in response.context


def test_another_projects_overview_is_404(lead_client, other_project):
    assert lead_client.get(reverse("project_home", args=[other_project.slug])).status_code == 404


def test_a_page_address_from_before_projects_goes_to_the_one_project(lead_client, other_project, other_lead, client):
    response = lead_client.get("/runs/12/?tab=report")
    assert response.status_code == 302 and response["Location"] == f"/p/{TEST_PROJECT}/runs/12/?tab=report"
    client.force_login(make_user("both", role=None, is_superuser=True))  # sees two projects: no way to choose
    assert client.get("/runs/12/").status_code == 404


@pytest.mark.django_db
def test_the_demo_overview_tells_the_story(client, fake_provider_server, monkeypatch):
    # load_demo judges through a running stand-in when the demo's variables name one (scripts/start.sh).
    monkeypatch.setenv("EVALHUB_JUDGE_DEMO_URL", fake_provider_server.openai_base_url)
    monkeypatch.setenv("EVALHUB_JUDGE_DEMO_KEY", "stand-in-needs-no-key")
    call_command("load_demo", stdout=StringIO())
    call_command("load_demo", stdout=StringIO())  # idempotent: nothing doubles
    client.login(username="lena", password="evalhub-demo")

    response = client.get(reverse("home"), follow=True)  # lena leads one project: she lands on its overview

    assert response.redirect_chain == [(reverse("project_home", args=[STORE_PROJECT]), 302)]
    rows = {row.rubric.slug: row for row in response.context["rows"]}
    assert rows["tool-use"].rubric.stage == "gate" and rows["tool-use"].promotion.relaxed
    assert rows["return-policy"].rubric.stage == "warn"
    assert 0.80 <= rows["return-policy"].agreement < 1.0 and rows["return-policy"].agreement_ok
    assert rows["return-policy"].disputes > 0
    # Observed from day one, with no evidence: in CI all the same (one CI result per rubric above draft).
    assert rows["grounded-answer"].rubric.stage == "observe"
    assert CiResult.objects.filter(rubric__project__slug=STORE_PROJECT).count() == 3
    texts = [item.text for item in response.context["attention"]]
    assert any("open dispute" in text for text in texts)
    assert any("relaxed thresholds" in text for text in texts)
    html = response.content.decode()
    assert 'data-testid="rubric-overview"' in html and "floor 80.0 %" in html


def test_an_outsider_is_asked_to_log_in(client, db):
    make_user("nobody")
    response = client.get(reverse("home"))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
