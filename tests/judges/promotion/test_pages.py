"""The promotion pages: overview, a rubric's promotion page and its forms, permissions, query counts."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from judges.models import RubricEvent, Run
from judges.promotion.selectors import candidate_runs
from judges.promotion.services import rubric_promote
from labeling.models import Case, Dataset, Rubric
from tests.conftest import TEST_PROJECT, store_project
from tests.judges.promotion_factories import REASON, evidence_run
from tests.judges.report_factories import make_config

pytestmark = pytest.mark.django_db


def page_url(rubric) -> str:
    return reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])


def post_promote(client, rubric, run, to_stage="observe", reason=REASON):
    return client.post(
        reverse("judges:promotion_promote", args=[TEST_PROJECT, rubric.slug]),
        {"to_stage": to_stage, "run": run.pk, "reason": reason},
    )


def chosen_runs(html: str) -> list[int]:
    """The run each evidence menu of the page starts on, promote form first."""
    menus = re.findall(r'<select name="run"[^>]*>(.*?)</select>', html, re.S)
    return [int(chosen) for menu in menus for chosen in re.findall(r'<option value="(\d+)" selected>', menu)]


def test_the_forms_start_on_the_newest_run_that_can_be_evidence(lead_client, lead, rubric, dataset, reviewer):
    first = evidence_run(rubric, dataset, lead, reviewer)
    rubric_promote(rubric=rubric, to_stage="observe", run=first, reason=REASON, by=lead)
    candidate = make_config(rubric, lead, note="Returns: 60 days.", behavioral=True)
    eligible = evidence_run(rubric, dataset, lead, reviewer, config=candidate, prefix="v2")
    older = evidence_run(rubric, dataset, lead, reviewer, config=first.config, prefix="late")  # newest, of v1
    drift = Run.objects.create(config=candidate, dataset=dataset, created_by=lead, parent=eligible,
                               status=Run.Status.FINISHED, finished_at=timezone.now())
    assert candidate_runs(rubric=rubric).first() == older

    html = lead_client.get(page_url(rubric)).text

    assert chosen_runs(html) == [eligible.pk, eligible.pk]  # promote to warn, renew at observe
    assert f'<option value="{drift.pk}"' not in html
    # Once that run goes stale (one of its cases changed), no run can be evidence: no run is preselected.
    Case.objects.filter(dataset=dataset, external_id="v2-000").update(
        content_changed_at=timezone.now() + timedelta(seconds=1))
    assert chosen_runs(lead_client.get(page_url(rubric)).text) == []


def test_it_enters_observe_with_a_config_then_promotes_with_a_run_through_the_page(
    lead_client, lead, rubric, dataset, reviewer
):
    run = evidence_run(rubric, dataset, lead, reviewer)
    page = lead_client.get(page_url(rubric))
    assert page.status_code == 200
    # At draft the page offers observe with a config version, never an evidence run.
    assert "Enter observe" in page.text and f'<option value="{run.config.pk}"' in page.text
    assert "Promote to observe" not in page.text
    response = lead_client.post(reverse("judges:promotion_observe", args=[TEST_PROJECT, rubric.slug]),
                                {"action": "enter", "config": run.config.pk, "reason": REASON})
    assert response.status_code == 302 and response["Location"] == page_url(rubric)
    rubric.refresh_from_db()
    assert rubric.stage == "observe"
    page = lead_client.get(page_url(rubric))
    assert "entered observe" in page.text and "Promote to warn" in page.text
    response = post_promote(lead_client, rubric, run, to_stage="warn")
    assert response.status_code == 302
    rubric.refresh_from_db()
    assert rubric.stage == "warn"
    event = RubricEvent.objects.order_by("id").last()
    assert (event.by, event.run, event.reason) == (lead, run, REASON)
    page = lead_client.get(page_url(rubric))
    assert "promoted from observe to warn" in page.text
    assert f"run {run.pk}</a>" in page.text and "The evidence still holds" in page.text


def test_a_refused_promotion_lists_each_failing_rule_with_its_number_and_threshold(
    lead_client, lead, rubric, dataset, reviewer
):
    run = evidence_run(rubric, dataset, lead, reviewer, wrong=10, repeats=1)
    response = post_promote(lead_client, rubric, run)
    assert response.status_code == 400
    text = response.text
    assert 'data-testid="refusal"' in text
    assert "2 of 12 rules not met by run" in text
    assert "Rule 4: repeats K</strong> — run" in text and "has <span class=\"mono\">1</span>" in text
    assert "needs <span class=\"mono\">≥ 2</span>" in text
    assert "Rule 5: agreement (floor)</strong>" in text and "75.0 %" in text and "≥ 80.0 %" in text
    rubric.refresh_from_db()
    assert rubric.stage == "draft" and not RubricEvent.objects.exists()


def test_it_needs_a_reason_on_the_page(lead_client, lead, rubric, dataset, reviewer):
    run = evidence_run(rubric, dataset, lead, reviewer)
    response = post_promote(lead_client, rubric, run, reason="")
    assert response.status_code == 400
    assert "Type the reason for this change" in response.text
    assert not RubricEvent.objects.exists()


def test_a_stale_page_cannot_skip_a_stage(lead_client, lead, rubric, dataset, reviewer):
    run = evidence_run(rubric, dataset, lead, reviewer)
    response = post_promote(lead_client, rubric, run, to_stage="warn")
    assert response.status_code == 400 and "one stage at a time" in response.text


def test_it_demotes_and_changes_thresholds_through_the_page(lead_client, lead, rubric, dataset, reviewer):
    rubric_promote(rubric=rubric, to_stage="observe", run=evidence_run(rubric, dataset, lead, reviewer), reason=REASON,
                   by=lead)
    response = lead_client.post(reverse("judges:promotion_demote", args=[TEST_PROJECT, rubric.slug]),
                                {"to_stage": "draft", "reason": "Criteria rewrite."})
    assert response.status_code == 302
    rubric.refresh_from_db()
    assert rubric.stage == "draft"
    data = {"min_cases": 50, "min_repeats": 3, "agreement_floor": 85, "agreement_ceiling": 99,
            "min_true_pass_rate": 70, "min_true_fail_rate": 70, "max_flip_rate": 5, "min_coverage": 95,
            "fail_closed": "on", "reason": "Checkout is critical."}
    response = lead_client.post(reverse("judges:promotion_thresholds", args=[TEST_PROJECT, rubric.slug]), data)
    assert response.status_code == 302
    rubric.refresh_from_db()
    assert (rubric.min_cases, rubric.min_repeats, rubric.agreement_ceiling, rubric.fail_closed) == (50, 3, 0.99, True)
    # Rates are typed and shown in percent, like the report; stored as fractions.
    assert rubric.agreement_floor == 0.85
    page = lead_client.get(reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])).text
    assert 'name="agreement_floor" value="85"' in page and 'name="max_flip_rate" value="5"' in page
    assert "Agreement floor (≥) (%)" in page and "DESIGN" not in page
    kinds = list(RubricEvent.objects.order_by("id").values_list("kind", flat=True))
    assert kinds == ["promote", "demote", "thresholds", "fail_closed"]
    response = lead_client.post(reverse("judges:promotion_thresholds", args=[TEST_PROJECT, rubric.slug]),
                                {**data, "agreement_floor": 99})
    assert response.status_code == 400 and "ceiling must be above the floor" in response.text


@pytest.mark.parametrize("name", ["promotion_promote", "promotion_demote", "promotion_thresholds", "promotion_release"])
def test_reviewers_cannot_promote_demote_or_change(reviewer_client, rubric, name):
    response = reviewer_client.post(reverse(f"judges:{name}", args=[TEST_PROJECT, rubric.slug]),
                                    {"to_stage": "observe", "reason": "x", "min_cases": 1})
    assert response.status_code == 403
    rubric.refresh_from_db()
    assert rubric.stage == "draft" and not RubricEvent.objects.exists()


@pytest.mark.parametrize("url", ["judges:promotion_overview", "judges:audit_log"])
def test_reviewers_cannot_see_the_promotion_pages(reviewer_client, url):
    assert reviewer_client.get(reverse(url, args=[TEST_PROJECT])).status_code == 403


def test_reviewers_cannot_see_a_rubrics_promotion_page(reviewer_client, rubric):
    assert reviewer_client.get(page_url(rubric)).status_code == 403


def test_anonymous_users_are_sent_to_log_in(client, rubric):
    response = client.get(page_url(rubric))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_an_unknown_rubric_is_404(lead_client):
    assert lead_client.get(reverse("judges:promotion_rubric", args=[TEST_PROJECT, "nope"])).status_code == 404


def test_the_overview_shows_stage_evidence_and_recalibration(lead_client, lead, rubric, dataset, reviewer):
    run = evidence_run(rubric, dataset, lead, reviewer)
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)
    Rubric.objects.create(project=store_project(), slug="tone", name="Is the tone right?", criteria="Polite.")
    text = lead_client.get(reverse("judges:promotion_overview", args=[TEST_PROJECT])).text
    assert "evidence holds" in text and f"run {run.pk}</a>" in text
    assert "no evidence: not in the gate config" in text  # the draft rubric
    case = dataset.cases.first()
    case.output = "changed by a re-import"
    case.content_changed_at = run.finished_at.replace(year=run.finished_at.year + 1)
    case.save(update_fields=["output", "content_changed_at"])
    text = lead_client.get(reverse("judges:promotion_overview", args=[TEST_PROJECT])).text
    assert "recalibration needed" in text and "1 case changed since this run finished" in text
    page = lead_client.get(page_url(rubric)).text
    assert 'data-testid="recalibration"' in page


def test_the_pages_name_the_agreement_now_and_when_granted(lead_client, lead, rubric, dataset, reviewer):
    rubric_promote(rubric=rubric, to_stage="observe", run=evidence_run(rubric, dataset, lead, reviewer),
                   reason=REASON, by=lead)
    # Humans change their minds on 10 passed cases (one the judge had wrong): 38/40 when granted, 30/40 now.
    for lbl in reviewer.labels.filter(verdict="pass").order_by("case_id")[:10]:
        lbl.verdict = "fail"
        lbl.save(update_fields=["verdict"])
    page = lead_client.get(page_url(rubric)).text
    assert "<dt>When granted</dt>" in page and "agreement 95.0 %" in page
    assert '<dt>Now, on current labels</dt>\n    <dd data-testid="agreement-now">agreement 75.0 %</dd>' in page
    overview = lead_client.get(reverse("judges:promotion_overview", args=[TEST_PROJECT])).text
    assert "agreement 95.0 % when granted" in overview and "agreement 75.0 % now" in overview
    home = lead_client.get(reverse("project_home", args=[TEST_PROJECT])).text
    assert 'data-testid="agreement-now">75.0 %</strong> now, on current labels' in home
    assert 'data-testid="agreement-granted">95.0 % when granted' in home


def test_the_rubric_list_links_to_promotion(lead_client, rubric):
    assert page_url(rubric) in lead_client.get(reverse("labeling:rubric_list", args=[TEST_PROJECT])).text


# ---- query counts: fixed whatever the number of rubrics -------------------------------------------------


def promoted_rubrics(n: int, lead, reviewer) -> None:
    for i in range(n):
        rubric = Rubric.objects.create(project=store_project(), slug=f"r{i}", name=f"Rubric {i}?", criteria="c")
        data = Dataset.objects.create(project=store_project(), slug=f"d{i}", name=f"D{i}")
        run = evidence_run(rubric, data, lead, reviewer, prefix=f"r{i}")
        rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)


@pytest.mark.parametrize("n", [1, 4])
def test_the_overview_query_count_does_not_grow_with_rubrics(lead_client, lead, reviewer, n,
                                                             django_assert_num_queries):
    promoted_rubrics(n, lead, reviewer)
    # session + user, the door (membership and project), rubrics, evidence events, staleness, judgments counted per
    # case, human verdicts (one UNION), the not-evaluated judgments, the reviewers' labels on cases labeled twice,
    # the newest drift check of each evidence, latest CI, the runs with an audit sample (none here), the menu's
    # projects.
    with django_assert_num_queries(13):
        assert lead_client.get(reverse("judges:promotion_overview", args=[TEST_PROJECT])).status_code == 200


@pytest.mark.parametrize("n", [1, 4])
def test_the_audit_log_query_count_does_not_grow_with_entries(lead_client, lead, reviewer, n,
                                                              django_assert_num_queries):
    promoted_rubrics(n, lead, reviewer)
    # session + user, the door (membership and project), the rubric filter's slugs, the page's count, the menu's
    # projects, the page's events (with who, rubric, run).
    with django_assert_num_queries(6):
        assert lead_client.get(reverse("judges:audit_log", args=[TEST_PROJECT])).status_code == 200


@pytest.mark.parametrize("n", [1, 5])
def test_the_rubric_page_query_count_does_not_grow_with_history(client, lead_client, lead, rubric, dataset, reviewer,
                                                                n, django_assert_num_queries):
    from judges.models import CiResult
    from judges.promotion.services import rubric_demote

    run = evidence_run(rubric, dataset, lead, reviewer)
    for _ in range(n):
        rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)
        rubric_demote(rubric=rubric, to_stage="draft", reason="again", by=lead)
        evidence_run(rubric, dataset, lead, reviewer, prefix=f"more-{_}")
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)
    CiResult.objects.bulk_create([
        CiResult(rubric=rubric, config_hash="a" * 64, stage="observe", outcome="recorded", passed=3, failed=1,
                 not_evaluated=0, total=4, exit_code=0, token_name="ci")
        for _ in range(n)
    ])
    # session + user, the door (membership and project), rubric, evidence, staleness, judgments counted per case,
    # human verdicts, the not-evaluated judgments, the reviewers' labels on cases labeled twice, the newest drift
    # check, latest CI, whether runs
    # exist, whether the stand-in served the evidence run, the promote and the renew forms' evidence menus (twice each: Django's ModelChoiceIterator queries
    # on each pass over the choices), the run they start on (the newest kept version, its runs, their
    # staleness), at observe whether another kept config exists to switch CI to (none here: the switch form is
    # not shown), recent audit entries, CI results, which of their judges is the scripted stand-in, the drift
    # checks over time and the drift run at work, the traffic judging pairs and the traffic form's dataset menu;
    # the release tier (its entry, its newest config, the newest again for its form's start, whether it has runs).
    with django_assert_num_queries(33):
        assert lead_client.get(page_url(rubric)).status_code == 200
