"""A judge that agrees with the reviewers' labels more than they agree with each other is refused, not
praised: one decision (metrics.judge_above_reviewers) read by the promotion services, the promotion page,
the report page, its JSON and `calibration_report`; on by default, a lead may turn it off, audited."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from evalhub.models import ApiToken, Scope
from judges.models import RubricEvent
from judges.promotion.gate_config import gate_config
from judges.promotion.services import PromotionRefused, rubric_promote, rubric_thresholds_change
from labeling.models import Case
from tests.conftest import TEST_PROJECT, store_project
from tests.judges.promotion.test_pinned_models import THRESHOLDS
from tests.judges.promotion_factories import REASON, evidence_run, flip, human
from tests.judges.report_factories import label

pytestmark = pytest.mark.django_db

SUSPECT = "suspect: on the 24 cases with two or more labels the judge agrees with each reviewer&#x27;s label"


def second_labels(rubric, dataset, reviewer, *, split: int, agreed: int = 16):
    """A second reviewer labels cases 16 … 39 of `evidence_run` (past its 2 wrong cases): splitting on the
    first `split` of them (a tie: those cases lose their human verdict), agreeing on the next `agreed`."""
    cases = list(Case.objects.filter(dataset=dataset).order_by("external_id"))
    for i in range(16, 16 + split + agreed):
        label(cases[i], rubric, reviewer, flip(human(i)) if i < 16 + split else human(i))


@pytest.fixture
def above(rubric, dataset, lead, reviewer, second_reviewer):
    """Evidence that meets every other rule (30 of 32 cases right, K = 2, no flip) while on the 24 cases
    with two labels the judge agrees with each label 0.5 on the 8 split ones and 1 on the 16 agreed ones
    (mean 0.833), the reviewers 0 and 1 (mean 0.667). The differences d: 0.5 eight times, 0 sixteen times;
    mean 1/6, Σ(d − 1/6)² = 8/9 + 4/9 = 4/3, sd = √(4/3 / 23) = 0.24077, z = (1/6) / (0.24077 / √24) = 3.391."""
    run = evidence_run(rubric, dataset, lead, reviewer)
    second_labels(rubric, dataset, second_reviewer, split=8)
    return run


def test_the_service_refuses_it_with_that_rule_alone(rubric, lead, above):
    with pytest.raises(PromotionRefused) as refused:
        rubric_promote(rubric=rubric, to_stage="observe", run=above, reason=REASON, by=lead)
    [rule] = refused.value.failing
    assert rule.key == "judge_above_reviewers"
    assert rule.value["cases"] == 24 and rule.value["above"] is True
    assert rule.value["judge"] == pytest.approx(20 / 24) and rule.value["reviewers"] == pytest.approx(16 / 24)
    assert rule.value["z"] == pytest.approx(3.391, abs=1e-3)


def test_reviewers_who_agree_as_often_as_the_judge_pass_it(rubric, dataset, lead, reviewer, second_reviewer):
    run = evidence_run(rubric, dataset, lead, reviewer)
    second_labels(rubric, dataset, second_reviewer, split=0, agreed=24)  # everyone agrees: d = 0 on each case
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)
    rubric.refresh_from_db()
    assert rubric.stage == "observe"


def test_the_promotion_page_shows_the_refusal(lead_client, rubric, above):
    response = lead_client.post(reverse("judges:promotion_promote", args=[TEST_PROJECT, rubric.slug]),
                                {"to_stage": "observe", "run": above.pk, "reason": REASON})
    assert response.status_code == 400
    text = response.text
    assert "1 of 12 rules not met" in text
    assert "judge&#x27;s agreement with each label</strong>" in text
    assert "83.3 % vs the reviewers&#x27; 66.7 % on 24 cases (z = 3.39)" in text


def test_the_report_never_says_may_be_promoted_beside_suspect(lead_client, above):
    text = lead_client.get(reverse("judges:run_report", args=[TEST_PROJECT, above.pk])).text
    assert 'data-testid="suspect"' in text and SUSPECT in text
    assert "May be promoted" not in text
    assert '<tr class="rule-unmet" data-rule="judge_above_reviewers">' in text
    # The like-with-like figures beside the reviewers' own agreement, not only the pooled percentages.
    assert '<span class="nowrap">83.3 % vs 66.7 %</span>' in text
    assert "on the 24 cases with two or more labels: higher by a one-sided 95 % test paired by case (z = 3.39)" in text


def test_the_reports_json_and_the_command_carry_the_warning(client, lead, above):
    raw = ApiToken.issue(project=store_project(), name="ci", scopes=[Scope.RUNS_READ], created_by=lead)[1]
    body = client.get(reverse("judges:api_run_report", args=[above.pk]),
                      headers={"Authorization": f"Bearer {raw}"}).json()
    assert body["judge_above_reviewers"]["above"] is True
    [warning] = body["warnings"]
    assert warning.startswith("suspect: on the 24 cases with two or more labels")

    out = StringIO()
    call_command("calibration_report", str(above.pk), "--json", stdout=out)
    assert json.loads(out.getvalue())["warnings"] == [warning]
    out = StringIO()
    call_command("calibration_report", str(above.pk), stdout=out)
    text = out.getvalue()
    assert f"warning: {warning}" in text
    assert "Not promotable:" in text and "✗ judge's agreement with each label: 83.3 %" in text


def test_a_lead_turns_it_off_audited_and_back_on(lead_client, rubric, lead, above):
    url = reverse("judges:promotion_thresholds", args=[TEST_PROJECT, rubric.slug])
    response = lead_client.post(url, THRESHOLDS | {"allow_judge_above_reviewers": "on",
                                                   "reason": "The prompt was written from the adjudications."})
    assert response.status_code == 302
    rubric.refresh_from_db()
    assert rubric.refuse_judge_above_reviewers is False
    event = RubricEvent.objects.get(kind=RubricEvent.Kind.THRESHOLDS)
    assert event.changes == {"refuse_judge_above_reviewers": [True, False]}
    assert "a judge above the reviewers&#x27; agreement is not refused" in lead_client.get(
        reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])).text  # shown as relaxed

    rubric_promote(rubric=rubric, to_stage="observe", run=above, reason=REASON, by=lead)
    # The report still warns (the figure has not changed), and says the rule is off rather than praising.
    report = lead_client.get(reverse("judges:run_report", args=[TEST_PROJECT, above.pk])).text
    assert 'data-testid="suspect"' in report and "a lead turned this rule off" in report

    # Back on (a form posted without the box): the evidence no longer holds, on the page and in the gate config.
    rubric_thresholds_change(rubric=rubric, reason="Back to the default.", by=lead, refuse_judge_above_reviewers=True)
    page = lead_client.get(reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])).text
    assert 'data-testid="recalibration"' in page and "evidence-holds" not in page
    [entry] = gate_config(project=store_project())["rubrics"]
    assert entry["recalibration_needed"]
    assert entry["recalibration_reasons"][0].startswith("judge's agreement with each label is now 83.3 %")
