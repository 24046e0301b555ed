"""Drawing a run's audit sample (judges.estimates.services) and `manage.py audit_sample`."""

from io import StringIO

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from judges.calibration.estimates import inclusion_probabilities, uncertainty_from_repeats
from judges.estimates.selectors import run_cases
from judges.estimates.services import NO_UNCERTAINTY, AuditSampleError, audit_sample_draw
from judges.models import AuditDraw, AuditSampleCase
from labeling.models import CaseTally, Dataset, QueuePriority
from labeling.queue.selectors import next_case
from tests.judges.estimates.factories import make_sampled_run
from tests.judges.report_factories import label, make_cases, make_config, make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(dataset, rubric, lead):
    return make_sampled_run(dataset, rubric, lead)


def test_a_uniform_draw_takes_exactly_n_with_equal_probability_and_stores_its_seed(run, lead):
    drawn = audit_sample_draw(run=run, size=20, method="uniform", seed=42, by=lead)
    rows = list(AuditSampleCase.objects.filter(run=run).order_by("position"))
    assert len(rows) == 20 == len(set(drawn.external_ids))
    assert {row.inclusion_probability for row in rows} == {20 / 60}
    assert [row.case.external_id for row in rows] == drawn.external_ids  # printed in the served order
    assert (drawn.draw.seed, drawn.draw.eligible, drawn.draw.scale, drawn.draw.uniform_share) == (42, 60, 20 / 60, 1.0)
    assert [row.position for row in rows] == list(range(1, 21))


def test_the_same_seed_draws_the_same_cases_in_the_same_order(dataset, other_dataset, rubric, lead):
    first = audit_sample_draw(run=make_sampled_run(dataset, rubric, lead), size=10, method="uniform", seed=7, by=lead)
    second = audit_sample_draw(run=make_sampled_run(other_dataset, rubric, lead), size=10, method="uniform", seed=7,
                               by=lead)
    third = Dataset.objects.create(project=dataset.project, slug="third", name="Third")
    other = audit_sample_draw(run=make_sampled_run(third, rubric, lead), size=10, method="uniform", seed=8, by=lead)
    assert first.external_ids == second.external_ids != other.external_ids


def test_a_second_draw_adds_cases_not_drawn_before_served_after_the_first(run, lead):
    first = audit_sample_draw(run=run, size=20, method="uniform", seed=1, by=lead)
    second = audit_sample_draw(run=run, size=10, method="uniform", seed=2, by=lead)
    assert not set(first.external_ids) & set(second.external_ids)
    assert second.draw.eligible == 40 and second.draw.scale == 10 / 40
    positions = dict(AuditSampleCase.objects.filter(run=run).values_list("case__external_id", "position"))
    assert max(positions[e] for e in first.external_ids) < min(positions[e] for e in second.external_ids)
    assert AuditSampleCase.objects.filter(run=run).count() == 30


def test_a_draw_of_more_than_is_left_takes_the_rest_then_says_nothing_is_left(run, lead):
    assert len(audit_sample_draw(run=run, size=500, method="uniform", seed=1, by=lead).external_ids) == 60
    with pytest.raises(AuditSampleError, match="drawn already"):
        audit_sample_draw(run=run, size=1, method="uniform", seed=1, by=lead)


def test_an_active_draw_uses_the_judges_uncertainty_and_records_each_probability(run, lead):
    drawn = audit_sample_draw(run=run, size=20, method="active", seed=3, by=lead)
    cases = run_cases(run=run)
    expected, scale = inclusion_probabilities(uncertainty_from_repeats(cases.f), budget=20, uniform_share=0.2)
    by_id = dict(zip(cases.external_id, expected, strict=True))
    rows = AuditSampleCase.objects.filter(run=run).select_related("case")
    assert {row.case.external_id: row.inclusion_probability for row in rows} == pytest.approx(
        {row.case.external_id: by_id[row.case.external_id] for row in rows})
    assert drawn.draw.uncertainty == AuditDraw.Uncertainty.REPEATS and drawn.draw.scale == pytest.approx(scale)
    # Cases whose repeats split are likelier to be drawn than those whose repeats agree.
    f = dict(zip(cases.external_id, cases.f, strict=True))
    split = [e for e in drawn.external_ids if 0 < f[e] < 1]
    assert len(split) / len(drawn.external_ids) > np.mean([0 < v < 1 for v in cases.f])


def test_active_is_refused_without_uncertainty(dataset, rubric, lead):
    cases = make_cases(dataset, [("a", "policy"), ("b", "policy")])
    run = make_run(make_config(rubric, lead), dataset, lead, {cases[0]: ["pass"], cases[1]: ["fail"]})
    with pytest.raises(AuditSampleError) as refused:
        audit_sample_draw(run=run, size=1, method="active", seed=1, by=lead)
    assert str(refused.value) == NO_UNCERTAINTY and "uniform" in NO_UNCERTAINTY
    assert not AuditDraw.objects.exists()


@pytest.mark.parametrize(("size", "method", "seed", "message"), [
    (0, "uniform", 1, "at least 1"), (5, "stratified", 1, "method"), (5, "uniform", -1, "seed"),
])
def test_it_refuses_bad_input_and_writes_nothing(run, lead, size, method, seed, message):
    with pytest.raises(AuditSampleError, match=message):
        audit_sample_draw(run=run, size=size, method=method, seed=seed, by=lead)
    assert not AuditDraw.objects.exists()


def test_drawn_cases_go_first_in_the_queue_in_the_samples_order(run, rubric, dataset, reviewer):
    drawn = audit_sample_draw(run=run, size=5, method="uniform", seed=9, by=None)
    tallies = CaseTally.objects.filter(rubric=rubric, priority=QueuePriority.AUDIT_SAMPLE)
    assert tallies.count() == 5
    served = []
    for _ in range(6):
        case = next_case(dataset=dataset, rubric=rubric, reviewer=reviewer)
        served.append(case.external_id)
        label(case, rubric, reviewer, "pass")
    assert served[:5] == drawn.external_ids
    assert served[5] not in drawn.external_ids


def test_the_command_prints_the_drawn_ids_one_a_line(run):
    out = StringIO()
    call_command("audit_sample", str(run.pk), "--size", "7", "--seed", "11", stdout=out)
    printed = out.getvalue().split()
    assert len(printed) == 7
    assert printed == list(AuditSampleCase.objects.filter(run=run).order_by("position")
                           .values_list("case__external_id", flat=True))
    assert AuditDraw.objects.get().created_by is None


def test_the_command_says_why_it_cannot_draw(dataset, rubric, lead):
    cases = make_cases(dataset, [("a", "policy")])
    run = make_run(make_config(rubric, lead), dataset, lead, {cases[0]: ["pass"]})
    with pytest.raises(CommandError, match="draw a uniform sample instead"):
        call_command("audit_sample", str(run.pk), "--size", "1", "--method", "active")
    with pytest.raises(CommandError, match="No run 999999"):
        call_command("audit_sample", "999999", "--size", "1")
