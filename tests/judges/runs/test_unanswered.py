"""Cases with no answer yet (output null, a golden set's) are left out of runs and drift checks, which say how many."""

import uuid

import pytest
from django.urls import reverse

from judges.configs import services as config_services
from judges.models import Run
from judges.runs.services import RunError, run_start
from labeling.models import Case, case_split, labeled_content_hash
from tests.conftest import TEST_PROJECT
from tests.judges.runs.test_services import CONTRACT_SPEC, make_cases

pytestmark = pytest.mark.django_db


def golden(dataset, n: int) -> None:
    Case.objects.bulk_create([
        Case(dataset=dataset, external_id=f"gs-{i}", input=f"Question {i}?", output=None, split=case_split(f"gs-{i}"),
             content_hash=labeled_content_hash(input=f"Question {i}?", output=None, trace={}))
        for i in range(n)
    ])


@pytest.fixture
def eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True


def test_a_run_judges_the_answered_cases_and_counts_the_rest(eager, dataset, rubric, lead,
                                                             django_capture_on_commit_callbacks):
    make_cases(dataset, 4)
    golden(dataset, 3)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    with django_capture_on_commit_callbacks(execute=True):
        run = run_start(config=config, dataset=dataset, repeats=2, concurrency=2, spend_cap_usd=None, by=lead)
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED and (run.total, run.done, run.unanswered) == (8, 8, 3)
    assert not run.judgments.filter(case__output__isnull=True).exists()


def test_a_dataset_with_only_unanswered_cases_cannot_run(dataset, rubric, lead):
    golden(dataset, 2)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    with pytest.raises(RunError, match="has no answer to judge yet: its 2 case"):
        run_start(config=config, dataset=dataset, repeats=1, concurrency=1, spend_cap_usd=None, by=lead)
    assert not Run.objects.exists()


def test_the_start_form_and_the_run_page_say_how_many_are_left_out(eager, lead_client, dataset, rubric, lead,
                                                                   django_capture_on_commit_callbacks):
    make_cases(dataset, 2)
    golden(dataset, 1)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    url = reverse("judges:run_create", args=[TEST_PROJECT, config.pk])
    form = lead_client.get(url, {"dataset": dataset.slug, "repeats": 1})
    assert form.context["estimate"].cases == 2
    assert "1 case with no answer yet (a golden set&#x27;s, say) is left out: nothing to judge." in form.text
    with django_capture_on_commit_callbacks(execute=True):
        response = lead_client.post(url, {"dataset": dataset.slug, "repeats": 1, "concurrency": 1,
                                          "start_token": uuid.uuid4()})
    run = Run.objects.get()
    page = lead_client.get(response.url).text
    assert run.unanswered == 1 and "1 case with no answer yet" in page and 'data-testid="run-unanswered"' in page


def test_a_drift_check_leaves_them_out_and_says_how_many(dataset, rubric, lead, reviewer):
    from judges.drift.services import drift_start
    from judges.promotion.services import rubric_promote
    from tests.judges.promotion_factories import REASON, evidence_run

    run = evidence_run(rubric, dataset, lead, reviewer)
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)
    golden(dataset, 2)
    [check] = drift_start(by=lead)
    # The evidence's cases, each K times; the two with no answer are counted, not judged.
    assert (check.run.unanswered, check.run.total) == (2, run.total)
