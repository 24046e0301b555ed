"""The report page's cache: a second view computes nothing again, and any change to what the figures
read shows at once. These tests commit (transactional_db): inside a test's transaction the cache is off,
since rows written by one transaction cannot be told apart by their version."""

import pytest
from django.core.cache import cache
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from evalhub.models import Role
from judges.calibration.selectors import evidence_key
from judges.models import Judgment, Run
from labeling.models import Adjudication, Case, Dataset, Label, Rubric
from tests.conftest import TEST_PROJECT, make_user, store_project
from tests.judges.report_factories import label, make_cases, make_config, make_run


@pytest.fixture
def report(transactional_db, client):
    cache.clear()
    lead = make_user("lena", role=Role.LEAD)
    reviewer = make_user("rita")
    project = store_project()
    dataset = Dataset.objects.create(project=project, slug="store-support", name="Store support")
    rubric = Rubric.objects.create(project=project, slug="return-policy", name="Q?", criteria="…")
    cases = make_cases(dataset, [(f"c{i}", "policy") for i in range(6)])
    for i, case in enumerate(cases):
        label(case, rubric, reviewer, "pass" if i % 2 else "fail")
    run = make_run(make_config(rubric, lead), dataset, lead,
                   {case: ["pass", "pass"] for case in cases})  # right on c1, c3, c5: 50 %
    client.force_login(lead)
    yield {"run": run, "cases": cases, "rubric": rubric, "lead": lead, "reviewer": reviewer, "dataset": dataset,
           "url": reverse("judges:run_report", args=[TEST_PROJECT, run.pk])}
    cache.clear()


def agreement(client, url) -> str:
    html = client.get(url).content.decode()
    start = html.index('data-testid="agreement">') + len('data-testid="agreement">')
    return html[start:html.index("<", start)]


def test_it_serves_a_second_view_from_the_cache(client, report, django_assert_num_queries):
    assert agreement(client, report["url"]) == "50.0 %"
    # session, user, the project door's membership, run, evidence key, rules' newest version, the page's reasons,
    # the bias probe runs (their status is live), whether the stand-in served the run: nothing recomputed.
    with django_assert_num_queries(9):
        assert client.get(report["url"] + "?only=false_pass").status_code == 200


def test_a_changed_label_shows_at_once(client, report):
    assert agreement(client, report["url"]) == "50.0 %"
    # A verdict changed in place (as the admin would), updated_at untouched: still a new row version.
    Label.objects.filter(case=report["cases"][0]).update(verdict="pass")
    assert agreement(client, report["url"]) == "66.7 %"


def test_an_adjudication_and_a_deleted_label_show_at_once(client, report):
    assert agreement(client, report["url"]) == "50.0 %"
    Adjudication.objects.create(case=report["cases"][0], rubric=report["rubric"], verdict="pass",
                                decided_by=report["lead"])
    assert agreement(client, report["url"]) == "66.7 %"
    Label.objects.filter(case=report["cases"][2]).delete()  # c2 loses its verdict: 4 of 5 cases right
    assert agreement(client, report["url"]) == "80.0 %"


def test_a_changed_case_and_a_new_config_show_at_once(client, report):
    client.get(report["url"])
    Case.objects.filter(pk=report["cases"][0].pk).update(content_changed_at=timezone.now())
    html = client.get(report["url"]).content.decode()
    assert "1 case changed since this run finished" in html
    make_config(report["rubric"], report["lead"], note="v2")
    assert "a newer version v2 exists" in client.get(report["url"]).content.decode()


def test_a_deleted_judgment_shows_at_once(client, report):
    assert agreement(client, report["url"]) == "50.0 %"
    Judgment.objects.filter(run=report["run"], case=report["cases"][0], repeat=2).delete()  # as the admin can
    assert agreement(client, report["url"]) == "54.5 %"  # 6 of 11


def test_it_gives_no_key_inside_a_transaction_that_wrote(report):
    run = Run.objects.select_related("config__rubric").get(pk=report["run"].pk)
    assert evidence_key(run=run) is not None
    with transaction.atomic():
        Run.objects.filter(pk=run.pk).update(cache_hits=1)
        assert evidence_key(run=run) is None
