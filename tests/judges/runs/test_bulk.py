"""copy_rows, the COPY the worker records with: rows go in as Django would save them (JSON, decimals,
nulls), and rows that would break a unique constraint are left out when asked (as bulk_create's
ignore_conflicts) or refused."""

from decimal import Decimal

import pytest
from django.utils import timezone

from judges.models import CachedEmbedding, CachedJudgment, Judgment
from judges.runs.bulk import copy_rows, jsonb
from judges.runs.embeddings import vector_bytes, vector_from_bytes
from judges.runs.worker import JUDGMENT_FIELDS, _judgment_row

pytestmark = pytest.mark.django_db


def test_rows_go_in_as_saved_and_a_conflict_is_left_out_when_asked(project, other_project):
    now = timezone.now()
    CachedEmbedding.objects.create(project=project, key="a" * 64, vector=vector_bytes([1.0, 2.0]))
    sent = copy_rows(CachedEmbedding, ("project_id", "key", "vector", "created_at"),
                     [(project.pk, "a" * 64, vector_bytes([9.0]), now),
                      (project.pk, "b" * 64, vector_bytes([0.5, -0.25]), now),
                      (other_project.pk, "a" * 64, vector_bytes([3.0]), now)],  # another project's: no conflict
                     ignore_conflicts=True)
    assert sent == 3
    stored = {(project_id, key): vector_from_bytes(v).tolist()
              for project_id, key, v in CachedEmbedding.objects.values_list("project_id", "key", "vector")}
    assert stored == {(project.pk, "a" * 64): [1.0, 2.0], (project.pk, "b" * 64): [0.5, -0.25],
                      (other_project.pk, "a" * 64): [3.0]}
    judgment = {"outcome": "pass", "reason": 'quotes " and \\ and a tab\tand\nlines', "scores": None}
    copy_rows(CachedJudgment, ("project_id", "key", "judgment", "created_at"),
              [(project.pk, "c" * 64, jsonb(judgment), now)])
    assert CachedJudgment.objects.get(key="c" * 64).judgment == judgment


def test_without_ignore_conflicts_a_conflict_is_an_error(project):
    CachedEmbedding.objects.create(project=project, key="a" * 64, vector=vector_bytes([1.0]))
    with pytest.raises(Exception, match="duplicate key"):
        copy_rows(CachedEmbedding, ("project_id", "key", "vector", "created_at"),
                  [(project.pk, "a" * 64, vector_bytes([2.0]), timezone.now())])


def test_a_judgment_row_reads_back_as_the_engine_made_it(dataset, rubric, lead):
    from judges.configs import services as config_services
    from judges.engine import Judgment as EngineJudgment
    from judges.models import Run
    from tests.judges.helpers import make_cases

    [case] = make_cases(dataset, 1)
    config = config_services.judge_config_save(rubric=rubric, by=lead, spec={
        "layers": ["contract"], "contract_checks": ["answer_present"]})
    run = Run.objects.create(config=config, dataset=dataset, repeats=1, concurrency=1, created_by=lead)
    made = EngineJudgment("c000", 1, "pass", scores={"relevance": 5}, reason="ok", checks=[{"name": "x"}],
                          input_tokens=3, cost_usd=0.0000125, similarity=0.5, secondary_outcome=None)
    copy_rows(Judgment, JUDGMENT_FIELDS, [_judgment_row(run, case.pk, made, {"output": "v"}, timezone.now())])
    row = Judgment.objects.get(run=run)
    assert (row.scores, row.checks, row.cost_usd, row.similarity, row.variant, row.secondary_outcome, row.outcome) == (
        {"relevance": 5}, [{"name": "x"}], Decimal("0.000013"), 0.5, {"output": "v"}, "", "pass")
    copy_rows(Judgment, JUDGMENT_FIELDS, [])  # nothing to send: no statement
    assert Judgment.objects.filter(run=run, scores__isnull=True).count() == 0
