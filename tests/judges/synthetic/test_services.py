"""Synthetic cases through the real OpenAI SDK over HTTP against the stand-in, whose answer the test scripts:
stored with no output, kind empty and metadata.synthetic; duplicates of existing inputs dropped; the dataset's
redaction applied; only failed **dev** cases shown to the editor; a malformed answer, a timeout or a case the
checks refuse leaves nothing written and says why on the job."""

import json
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from judges.models import ModelPrice, SynthesisJob
from judges.synthetic.selectors import failed_dev_cases
from judges.synthetic.services import SynthesisError, synthesis_start, synthesis_work
from judges.synthetic.writing import PROMPT_VERSION, SYNTHETIC_TYPES, synthetic_external_id
from labeling.models import Case, case_split
from tests.judges.synthetic.helpers import (
    EDITOR_MODEL,
    SCRIPT,
    return_policy,
    stand_in_editor,
    with_policies,
)
from tests.labeling.queue_helpers import give_label, make_case

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(fake_provider, lead, dataset):
    return_policy(lead)
    ModelPrice.objects.create(model=EDITOR_MODEL, input_per_mtok=Decimal(1), output_per_mtok=Decimal(4),
                              updated_by=lead)
    return with_policies(dataset, "returns")


def synthesize(dataset, lead, **kwargs) -> SynthesisJob:
    job = synthesis_start(dataset=dataset, n=kwargs.pop("n", 10), types=kwargs.pop("types", ["adversarial",
                          "near_miss", "ordinary"]), editor=kwargs.pop("editor", stand_in_editor()), seed=7,
                          by=lead, queue=False, **kwargs)
    synthesis_work(job_id=job.pk)
    job.refresh_from_db()
    return job


def an_id(split: str, prefix: str) -> str:
    return next(f"{prefix}-{i}" for i in range(100) if case_split(f"{prefix}-{i}") == split)


def test_the_editors_cases_are_stored_with_no_answer_no_kind_and_what_wrote_them(world, lead, fake_provider):
    existing = make_case(world, "old-1")
    Case.objects.filter(pk=existing.pk).update(input="I wore the jacket ONCE and changed my mind, it's day 12.  "
                                                     "Can I return it?")
    fake_provider.control(model=EDITOR_MODEL, script=[SCRIPT])

    job = synthesize(world, lead)

    assert (job.status, job.error) == ("finished", "")
    assert (job.written, job.duplicates, job.beyond_n) == (2, 2, 0)  # one of an existing input, one in the answer
    written = {c.external_id: c for c in Case.objects.filter(dataset=world).exclude(pk=existing.pk)}
    assert set(written) == set(job.external_ids)
    adversarial = written[synthetic_external_id(SCRIPT["cases"][0]["input"])]
    assert adversarial.input == SCRIPT["cases"][0]["input"] and adversarial.output is None
    assert adversarial.kind == "" and adversarial.category == "adversarial"
    assert adversarial.expected_behaviour.startswith("Refuse politely")
    assert adversarial.metadata == {"synthetic": {"type": "adversarial", "model": EDITOR_MODEL,
                                                  "prompt_version": PROMPT_VERSION, "seed": 7}}
    assert adversarial.split == case_split(adversarial.external_id)
    ordinary = written[synthetic_external_id(SCRIPT["cases"][2]["input"])]
    assert ordinary.category == "" and ordinary.metadata["synthetic"]["type"] == "ordinary"
    # What the call cost, by the price table, from the tokens the stand-in reported.
    assert job.calls == 1 and job.cost_usd == Decimal(str(round((job.input_tokens + 4 * job.output_tokens) / 1e6, 6)))
    assert job.estimate_usd is not None and job.estimate_usd >= job.cost_usd
    # The editor read the policy, and was asked for the answer's strict schema.
    [request] = fake_provider.requests()
    assert request["scripted"] and request["structured"] and request["model"] == EDITOR_MODEL
    assert "=== POLICY returns v1 ===" in request["prompt"] and "however loyal" in request["prompt"]
    assert "Write 10 new customer message(s)" in request["prompt"]

    # Asked again, the same answer adds nothing: every input is there already.
    again = synthesize(world, lead)
    assert (again.status, again.written, again.duplicates) == ("finished", 0, 4)


def test_it_keeps_n_cases_and_only_the_types_asked_for(world, lead, fake_provider):
    fake_provider.control(model=EDITOR_MODEL, script=[SCRIPT])
    job = synthesize(world, lead, n=1)
    assert (job.written, job.beyond_n) == (1, 3)
    # An answer with a type not asked for is malformed: nothing is written.
    job = synthesize(world, lead, types=["ordinary"])
    assert job.status == "failed" and "MalformedEditorAnswer" in job.error
    assert "'adversarial' is not one of" in job.error
    assert Case.objects.filter(dataset=world).count() == 1


def test_the_datasets_redaction_applies_and_the_id_never_hashes_the_original(world, lead, fake_provider):
    world.redact = "email"
    world.save(update_fields=["redact"])
    fake_provider.control(model=EDITOR_MODEL, script=[{"cases": [
        {"input": "I am mia.jones@example.org, return my order?", "type": "ordinary", "category": None,
         "expected_behaviour": "Ask mia.jones@example.org for the order number."}]}])

    job = synthesize(world, lead)

    case = Case.objects.get(dataset=world)
    assert case.input == "I am [EMAIL_1], return my order?"
    assert case.expected_behaviour == "Ask [EMAIL_1] for the order number."
    assert case.external_id == synthetic_external_id(case.input) == job.external_ids[0]


def test_only_failed_dev_cases_reach_the_editor(world, lead, reviewer, rubric, fake_provider):
    dev, holdout, passed = an_id("dev", "f"), an_id("holdout", "h"), an_id("dev", "p")
    for external_id, verdict in ((dev, "fail"), (holdout, "fail"), (passed, "pass")):
        case = make_case(world, external_id)
        Case.objects.filter(pk=case.pk).update(input=f"question of {external_id}")
        case.refresh_from_db()
        give_label(case, rubric, reviewer, verdict)
    fake_provider.control(model=EDITOR_MODEL, script=[SCRIPT])

    job = synthesize(world, lead, from_failed_dev=True)

    assert job.failed_cases_shown == 1
    [request] = fake_provider.requests()
    assert json.dumps(f"question of {dev}") in request["prompt"]
    assert f"question of {holdout}" not in request["prompt"] and f"question of {passed}" not in request["prompt"]


def test_a_verdict_of_another_projects_rubric_never_reaches_the_editor(world, lead, reviewer, rubric, other_project):
    # A label of another project's rubric on this dataset's case (nothing in evalhub writes one): not this
    # project's verdict, so the editor is not shown the case.
    from labeling.models import Rubric

    theirs = Rubric.objects.create(project=other_project, slug="theirs", name="Theirs?", criteria="c")
    ours, stray = an_id("dev", "o"), an_id("dev", "s")
    for external_id, label_rubric in ((ours, rubric), (stray, theirs)):
        case = make_case(world, external_id)
        give_label(case, label_rubric, reviewer, "fail")
    assert [case.input for case in failed_dev_cases(dataset=world)] == [
        Case.objects.get(dataset=world, external_id=ours).input]


@pytest.mark.parametrize("script, fault, message", [
    ([{"cases": [{"input": "only this"}]}], None, "MalformedEditorAnswer"),
    ([{"cases": []}], "malformed_json", "not JSON"),
    ([SCRIPT], "timeout", "EditorTimeout"),
])
def test_a_malformed_answer_or_a_timeout_is_reported_and_nothing_written(world, lead, fake_provider, script, fault,
                                                                          message):
    fake_provider.control(model=EDITOR_MODEL, script=script, fault=fault, hang_s=3)

    job = synthesize(world, lead, editor=stand_in_editor(timeout_s=0.5))

    assert job.status == "failed" and message in job.error
    assert job.written == 0 and job.external_ids == [] and not Case.objects.filter(dataset=world).exists()


def test_a_case_the_checks_refuse_leaves_none_of_the_answers_cases_written(world, lead, fake_provider):
    bad = {**SCRIPT["cases"][1], "category": "c" * 300}
    fake_provider.control(model=EDITOR_MODEL, script=[{"cases": [SCRIPT["cases"][0], bad]}])

    job = synthesize(world, lead)

    assert job.status == "failed" and "refused by the case checks: case 2: category" in job.error
    assert job.cost_usd > 0 and not Case.objects.filter(dataset=world).exists()


def test_a_request_that_cannot_be_made_is_refused_before_any_call(world, lead, dataset, fake_provider):
    with_policies(dataset)
    with pytest.raises(SynthesisError, match="lists no policy document"):
        synthesis_start(dataset=dataset, n=3, types=["ordinary"], editor=stand_in_editor(), by=lead, queue=False)
    with pytest.raises(SynthesisError, match="No policy document nope"):
        synthesis_start(dataset=dataset, n=3, types=["ordinary"], editor=stand_in_editor(), policies=["nope"],
                        by=lead, queue=False)
    for n, types in ((0, ["ordinary"]), (101, ["ordinary"]), (3, []), (3, ["bogus"])):
        with pytest.raises(SynthesisError):
            synthesis_start(dataset=dataset, n=n, types=types, editor=stand_in_editor(), policies=["returns"],
                            by=lead, queue=False)
    assert not SynthesisJob.objects.exists() and fake_provider.requests() == []


def test_the_task_is_idempotent_and_takes_back_a_job_whose_lease_ran_out(world, lead, fake_provider):
    fake_provider.control(model=EDITOR_MODEL, script=[SCRIPT])
    job = synthesize(world, lead)
    assert synthesis_work(job_id=job.pk) is None  # done: a redelivered task asks nothing and writes nothing
    held = synthesis_start(dataset=world, n=2, types=list(SYNTHETIC_TYPES), editor=stand_in_editor(), by=lead,
                           queue=False)
    SynthesisJob.objects.filter(pk=held.pk).update(status="running", lease_until=timezone.now() + timedelta(minutes=5))
    assert synthesis_work(job_id=held.pk) is None  # another worker holds it
    assert len(fake_provider.requests()) == 1
    SynthesisJob.objects.filter(pk=held.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert synthesis_work(job_id=held.pk).status == "finished"  # that worker died: its lease ran out
    assert len(fake_provider.requests()) == 2
