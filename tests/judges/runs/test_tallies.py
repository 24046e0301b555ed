"""A run's per-case tallies (judges.runs.tallies) stay equal to its judgments recounted, whatever writes them:
chunks recorded in pieces and again, new repeats, re-judging the not-evaluated, an import of judgments.
(A worker killed mid-run: tests/judges/runs/test_worker_kill.py checks them too.)"""

import io
import json

import pytest

from judges.configs import services as config_services
from judges.engine import Judgment as EngineJudgment
from judges.models import Run
from judges.runs import services
from judges.runs.importing import judgments_import
from judges.runs.worker import judgments_record
from tests.judges.helpers import CONTRACT_SPEC, make_cases, recounted_tallies, stored_tallies

pytestmark = pytest.mark.django_db


def judged(case, repeat, outcome, **extra):
    return case.pk, EngineJudgment(case.external_id, repeat, outcome, **extra)


def test_the_tallies_equal_the_judgments_recounted_after_every_write(dataset, rubric, lead):
    cases = make_cases(dataset, 4)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    run = Run.objects.create(config=config, dataset=dataset, repeats=2, created_by=lead, status=Run.Status.RUNNING)
    first = [judged(cases[0], 1, "pass", similarity=0.7, latency_ms=300), judged(cases[1], 1, "fail", latency_ms=90),
             judged(cases[2], 1, "not_evaluated", error="timeout")]
    judgments_record(run=run, results=first)
    assert stored_tallies(run) == recounted_tallies(run) and len(stored_tallies(run)) == 3

    judgments_record(run=run, results=first)  # a redelivered chunk: nothing new, nothing counted twice
    later = [judged(cases[0], 2, "fail", similarity=0.4, latency_ms=200), judged(cases[2], 2, "not_evaluated"),
             judged(cases[3], 1, "fail", similarity=0.6, latency_ms=120),
             judged(cases[3], 2, "pass", similarity=0.9, latency_ms=50)]
    judgments_record(run=run, results=later)  # the second repeats, and a case first judged now (both repeats)
    assert stored_tallies(run) == recounted_tallies(run)
    assert stored_tallies(run)[cases[0].pk] == (2, 1, 1, 0, 0.4, 300)
    assert stored_tallies(run)[cases[3].pk] == (2, 1, 1, 0, 0.6, 120)

    Run.objects.filter(pk=run.pk).update(status=Run.Status.FINISHED)
    services.run_retry_not_evaluated(run=run)  # case 2's judgments go: so does its tally
    assert stored_tallies(run) == recounted_tallies(run) and cases[2].pk not in stored_tallies(run)
    judgments_record(run=run, results=[judged(cases[2], 1, "pass"), judged(cases[2], 2, "fail")])
    assert stored_tallies(run) == recounted_tallies(run)
    assert stored_tallies(run)[cases[2].pk] == (2, 1, 1, 0, None, 0)


def test_an_import_of_judgments_counts_its_cases(dataset, rubric, lead):
    cases = make_cases(dataset, 3)
    rows = [{"external_id": c.external_id, "repeat": r, "verdict": "pass" if (i + r) % 2 else "fail"}
            for i, c in enumerate(cases) for r in (1, 2)]
    stream = io.BytesIO("\n".join(json.dumps(row) for row in rows).encode())
    run = judgments_import(dataset=dataset, rubric=rubric, stream=stream, fmt="jsonl", by=lead,
                           source_name="verdicts.jsonl").run
    assert stored_tallies(run) == recounted_tallies(run) and len(stored_tallies(run)) == 3
