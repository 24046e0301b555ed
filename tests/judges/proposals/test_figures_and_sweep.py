"""A config's example cases never count in the figures of its runs (docs/improving.md), kept or not, and the
report says how many were left out; the sweep ends a job a killed worker left asking the editor."""

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from judges.calibration.selectors import run_figures
from judges.configs import services as config_services
from judges.models import Proposal, Run
from judges.proposals.services import proposals_sweep
from labeling.models import Case
from tests.conftest import TEST_PROJECT
from tests.judges.helpers import behavioral_spec, make_cases
from tests.judges.report_factories import label, make_run


def test_the_example_cases_are_left_out_of_every_figure(db, dataset, rubric, reviewer, lead, client):
    cases = make_cases(dataset, 6)
    for case in cases:
        label(case, rubric, reviewer, "pass")
    shown = cases[0]
    example = {"external_id": shown.external_id, "input": shown.input, "output": shown.output, "verdict": "pass",
               "reason": ""}
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(examples=[example]), by=lead)
    # The judge fails only the example case: were it counted, agreement would be 5 of 6.
    run = make_run(config, dataset, lead, {case: ["fail" if case == shown else "pass"] for case in cases})

    figures = run_figures(run=Run.objects.select_related("config__rubric").get(pk=run.pk))

    assert figures["n"] == 5 and figures["agreement"] == 1.0 and figures["example_cases_left_out"] == 1
    assert shown.split in (Case.Split.DEV, Case.Split.HOLDOUT)
    client.force_login(lead)
    page = client.get(reverse("judges:run_report", args=[TEST_PROJECT, run.pk]))
    assert 'data-testid="examples-left-out"' in page.text


def test_the_sweep_ends_a_job_whose_editor_call_a_killed_worker_lost(db, dataset, rubric, lead):
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    run = make_run(config, dataset, lead, {})
    editor = {"provider": "openai", "model": "m", "timeout_s": 10, "max_attempts": 2}
    now = timezone.now()
    lost = Proposal.objects.create(rubric=rubric, run=run, editor=editor, created_by=lead, status="proposing",
                                   started_at=now - timedelta(seconds=81))
    asking = Proposal.objects.create(rubric=rubric, run=run, editor=editor, created_by=lead, status="proposing",
                                     started_at=now - timedelta(seconds=79))
    fresh = Proposal.objects.create(rubric=rubric, run=run, editor=editor, created_by=lead)

    assert proposals_sweep(now=now) == [lost.pk]

    assert Proposal.objects.get(pk=lost.pk).status == "failed" and "lost" in Proposal.objects.get(pk=lost.pk).error
    assert {p.status for p in Proposal.objects.filter(pk__in=[asking.pk, fresh.pk])} == {"proposing", "queued"}
