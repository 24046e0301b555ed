"""The scenario every judge improvement test shares: a stand-in judge whose verdicts depend on whether its
prompt holds RULE, 48 labeled cases, and a finished run of the plain judge. See test_improve.py."""

from decimal import Decimal

import pytest

from judges.configs import services as config_services
from judges.models import ModelPrice, Run
from judges.runs import services as run_services
from labeling.models import Case, Label, case_split, labeled_content_hash
from tests.judges.helpers import MODEL, behavioral_spec

EDITOR = "gpt-4.1-2025-04-14"
RULE = "A change of mind needs the item unused."
PERFECT = "Pass an answer only when it asks for the item unused or unopened."
ANSWERS = {  # kind: (answer, human verdict)
    "right": ("You can return it within 30 days if the item is unused.", "pass"),
    "forgets": ("You can return it within 30 days.", "fail"),
    "refuses": ("Sorry, we take no returns.", "fail"),
    "unopened": ("Returns are fine for 30 days as the item is unopened.", "pass"),
}
CYCLE = ["right", "right", "right", "forgets", "forgets", "refuses", "refuses", "unopened"]
JUDGE_RULE = {"kind": "any", "rules": [
    {"kind": "all", "rules": [{"kind": "prompt_contains", "text": PERFECT},
                              {"kind": "any", "rules": [{"kind": "answer_contains", "text": "unused"},
                                                        {"kind": "answer_contains", "text": "unopened"}]}]},
    {"kind": "all", "rules": [{"kind": "not", "rule": {"kind": "prompt_contains", "text": PERFECT}},
                              {"kind": "prompt_contains", "text": RULE},
                              {"kind": "answer_contains", "text": "unused"}]},
    {"kind": "all", "rules": [{"kind": "not", "rule": {"kind": "prompt_contains", "text": PERFECT}},
                              {"kind": "not", "rule": {"kind": "prompt_contains", "text": RULE}},
                              {"kind": "answer_contains", "text": "30 days"}]},
]}


def proposal(name, change="guidance", guidance="", examples=(), note=None):
    return {"name": name, "change": change, "guidance": guidance, "examples": list(examples),
            "why": f"scripted for the test: {name}", "criteria_note": note}


@pytest.fixture
def eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.EVALHUB_CHUNK_CASES = 20
    settings.EVALHUB_EDITOR_TIMEOUT_SECONDS = 1


@pytest.fixture
def world(db, dataset, rubric, reviewer, lead, fake_provider, eager, django_capture_on_commit_callbacks):
    """48 labeled cases (dev and holdout by their ids' hash) and a finished K=2 run of the plain judge."""
    cases = []
    for i in range(48):
        external_id = f"ret{i:03}"
        question = f"Order {external_id}: I changed my mind, can I return it?"
        answer, _ = ANSWERS[CYCLE[i % len(CYCLE)]]
        cases.append(Case(dataset=dataset, external_id=external_id, input=question, output=answer,
                          category="policy", split=case_split(external_id),
                          content_hash=labeled_content_hash(input=question, output=answer, trace={})))
    cases = Case.objects.bulk_create(cases)
    Label.objects.bulk_create(
        Label(case=c, rubric=rubric, reviewer=reviewer, verdict=ANSWERS[CYCLE[i % len(CYCLE)]][1],
              content_hash=c.content_hash) for i, c in enumerate(cases))
    for model in (MODEL, EDITOR):
        ModelPrice.objects.create(model=model, input_per_mtok=Decimal(100), output_per_mtok=Decimal(100),
                                  updated_by=lead)
    fake_provider.control(rule=JUDGE_RULE)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    with django_capture_on_commit_callbacks(execute=True):
        run = run_services.run_start(config=config, dataset=dataset, repeats=2, concurrency=4, spend_cap_usd=None,
                                     by=lead)
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED and run.not_evaluated == 0
    holdout = {c.external_id: c.input for c in cases if c.split == Case.Split.HOLDOUT}
    dev = sorted(c.external_id for c in cases if c.split == Case.Split.DEV)
    assert 10 <= len(holdout) <= 20
    return {"run": run, "holdout": holdout, "dev": dev, "cases": cases}


