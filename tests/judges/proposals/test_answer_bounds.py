"""The editor's answer is untrusted text: every field bounded before anything is stored, and a NUL character
(which PostgreSQL stores in no text or JSON column) taken out, so the job ends at once, for its real reason.
Through the real SDKs over HTTP against the stand-in, whose editor answers are scripted."""

import pytest

from judges.models import JudgeConfig, Proposal
from judges.proposals import services

from .conftest import EDITOR, RULE, proposal


def propose(capture, world, lead) -> Proposal:
    with capture(execute=True):
        started = services.proposal_start(run=world["run"], by=lead, editor_model=EDITOR, candidates=1)
    return Proposal.objects.get(pk=started.pk)


@pytest.mark.parametrize("field", ["why", "criteria_note"])
def test_an_oversized_field_fails_the_job_with_a_short_reason_and_stores_nothing(
    world, lead, fake_provider, django_capture_on_commit_callbacks, field
):
    huge = proposal("the unused rule", guidance=RULE) | {field: "x" * 100_000}
    fake_provider.control(model=EDITOR, script=[{"proposals": [huge]}])

    done = propose(django_capture_on_commit_callbacks, world, lead)

    assert done.status == Proposal.Status.FAILED
    assert f"invalid output: proposals/0/{field}: longer than 2000 characters" in done.error
    assert len(done.error) < 500 and "xxxx" not in done.error  # the answer is not echoed back
    assert not done.candidates.exists() and not JudgeConfig.objects.exclude(proposal="").exists()


def test_a_nul_or_a_lone_surrogate_in_any_field_is_taken_out_and_the_job_goes_on(
    world, lead, fake_provider, django_capture_on_commit_callbacks
):
    # A lone surrogate too (JSON's "\ud800"): no UTF-8 encodes it, so the database would refuse it as well.
    fake_provider.control(model=EDITOR, script=[{"proposals": [
        proposal("the\x00 unused rule", guidance=RULE.replace("unused", "un\x00used"), note="ambig\x00uous")
        | {"why": "because\x00 \ud800"},
    ]}])

    done = propose(django_capture_on_commit_callbacks, world, lead)

    assert done.status == Proposal.Status.FINISHED, (done.status, done.error)
    candidate = done.candidates.get()
    assert candidate.name == "the unused rule" and candidate.criteria_note == "ambiguous"
    assert candidate.why == "because \ufffd"
    assert candidate.config.spec["guidance"].endswith(RULE)


def test_a_nul_in_a_rejected_proposal_is_taken_out_too(world, lead, fake_provider, django_capture_on_commit_callbacks):
    fake_provider.control(model=EDITOR, script=[{"proposals": [
        proposal("peek\x00", change="examples", examples=["nope\x00"]),
    ]}])

    done = propose(django_capture_on_commit_callbacks, world, lead)

    # Failed for its real reason, at once: not left "proposing" for the sweep to call the editor's call lost.
    assert done.status == Proposal.Status.FAILED
    assert done.error == "No proposal of the editor could be applied (peek: names nope, not a labeled dev case)."
    assert done.rejected == [{"name": "peek", "why": "names nope, not a labeled dev case"}]
