"""Every page that shows the scripted stand-in's verdicts says so, and only then: the compare page, the promotion
page's evidence summary and its CI results table (the report, run and config pages: test_newcomer_browser.py)."""

import pytest
from django.urls import reverse

from judges.configs import services as config_services
from judges.models import CiResult, JudgeConfig
from judges.promotion.services import rubric_promote
from tests.conftest import TEST_PROJECT
from tests.judges.helpers import behavioral_spec
from tests.judges.promotion_factories import REASON, evidence_run

pytestmark = pytest.mark.django_db

NOTE = 'data-testid="stand-in-note"'


def judge(rubric, lead, *, stand_in: bool, note: str = ""):
    """A judge named after a real model on an ordinary endpoint variable: whether it is the stand-in is told by
    its runs (served_by), never by its spec."""
    config = config_services.judge_config_save(
        rubric=rubric, spec=behavioral_spec(policy=note, model="gpt-4o-2024-08-06"), by=lead)
    config.stand_in = stand_in  # read by served_by
    return config


def served_by(run):
    """The run's judgments as the worker records a stand-in's when the config's judge is one (the whole path,
    over HTTP: tests/judges/test_stand_in_by_origin.py)."""
    if run.config.stand_in:
        run.judgments.update(stand_in=True)
    return run


def run_of(rubric, dataset, lead, reviewer, config, **kwargs):
    return served_by(evidence_run(rubric, dataset, lead, reviewer, config=config, **kwargs))


def test_a_config_is_marked_by_its_runs_answers_never_by_its_name(rubric, dataset, lead, reviewer):
    # Before: marked by its endpoint variable's name; now by its runs, and not before any run.
    config = judge(rubric, lead, stand_in=True)
    assert not config.uses_stand_in
    run_of(rubric, dataset, lead, reviewer, config)
    assert JudgeConfig.objects.get(pk=config.pk).uses_stand_in


def section(html: str, testid: str) -> str:
    start = html.index(f'data-testid="{testid}"')
    return html[start:html.index("</section>", start)]


def promotion_page(client, rubric) -> str:
    response = client.get(reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug]))
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.parametrize("stand_in", [True, False])
def test_the_evidence_summary_says_when_the_stand_in_judged_it(lead_client, rubric, dataset, lead, reviewer, stand_in):
    run = run_of(rubric, dataset, lead, reviewer, judge(rubric, lead, stand_in=stand_in))
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)
    evidence = section(promotion_page(lead_client, rubric), "stage")
    assert (NOTE in evidence) is stand_in
    assert ("The evidence run's verdicts come from <code>judges.testing.fake_provider</code>" in evidence) is stand_in


def ci_result(rubric, config_hash: str) -> CiResult:
    return CiResult.objects.create(rubric=rubric, config_hash=config_hash, stage="observe", outcome="recorded",
                                   passed=3, failed=1, not_evaluated=0, total=4, exit_code=0, token_name="ci")


def test_the_ci_results_mark_the_runs_the_stand_in_judged(lead_client, rubric, dataset, lead, reviewer):
    stand_in, real = judge(rubric, lead, stand_in=True), judge(rubric, lead, stand_in=False, note="v2")
    run_of(rubric, dataset, lead, reviewer, stand_in)
    ci_result(rubric, stand_in.config_hash)
    ci_result(rubric, real.config_hash)
    ci = section(promotion_page(lead_client, rubric), "ci-results")
    assert ci.count(NOTE) == 1
    assert "The verdicts of the CI runs marked stand-in come from" in ci
    rows = ci.split('data-testid="ci-table"')[1].split("<tr>")[2:]  # newest first: the real judge's run
    assert [('data-testid="ci-stand-in"' in row) for row in rows] == [False, True]


def test_ci_results_of_a_real_judge_carry_no_note(lead_client, rubric, lead):
    ci_result(rubric, judge(rubric, lead, stand_in=False).config_hash)
    ci_result(rubric, "f" * 64)  # a judge this server does not know: nothing to say about it
    ci = section(promotion_page(lead_client, rubric), "ci-results")
    assert "2 CI runs" in ci
    assert NOTE not in ci and "ci-stand-in" not in ci


def compare_page(client, a, b) -> str:
    response = client.get(reverse("judges:run_compare", args=[TEST_PROJECT]), {"a": a.pk, "b": b.pk})
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.parametrize(("a_stand_in", "b_stand_in", "whose"), [
    (False, True, "The verdicts of run B come from"),
    (True, True, "The verdicts of run A and run B come from"),
    (False, False, None),
])
def test_the_compare_page_says_which_runs_the_stand_in_judged(lead_client, rubric, dataset, lead, reviewer,
                                                              a_stand_in, b_stand_in, whose):
    a = run_of(rubric, dataset, lead, reviewer, judge(rubric, lead, stand_in=a_stand_in, note="a"))
    b = run_of(rubric, dataset, lead, reviewer, judge(rubric, lead, stand_in=b_stand_in, note="b"), prefix="other")
    html = compare_page(lead_client, a, b)
    if whose is None:
        assert NOTE not in html and "stand-in-badge" not in html
    else:
        assert html.count(NOTE) == 1 and whose in html
        assert html.count('<span class="badge stand-in-badge">stand-in</span>') == a_stand_in + b_stand_in
