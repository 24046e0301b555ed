"""Judge improvement end to end (docs/improving.md): a run's dev disagreements go to a scripted editor, its
proposals become proposed config versions judged on dev, the best on holdout; through the real SDKs over HTTP
against the stand-in, its runs worked eagerly in this process.

The stand-in judge's verdict depends on whether its prompt holds RULE: without it, it passes any answer that
names the 30 days (so it passes answers that forget the item must be unused, which the humans fail); with it,
only answers saying "unused". PERFECT makes it pass exactly what the humans pass: 100 % on dev, the ceiling.
The editor is a script (the stand-in's `script`), never a model: the test writes what it proposes.
"""

from decimal import Decimal

import pytest

from judges.engine import parse_sections
from judges.models import JudgeConfig, Proposal, RubricEvent, Run
from judges.promotion.services import PromotionError, PromotionRefused, rubric_promote
from judges.proposals import selectors, services

from .conftest import CYCLE, EDITOR, PERFECT, RULE, proposal


def propose(capture, world, lead, **extra) -> Proposal:
    with capture(execute=True):
        started = services.proposal_start(run=world["run"], by=lead, editor_model=EDITOR, **extra)
    return Proposal.objects.get(pk=started.pk)


def test_it_finds_the_rule_among_decoys_and_holdout_never_reaches_the_editor(
    world, lead, fake_provider, django_capture_on_commit_callbacks
):
    holdout_id = next(iter(world["holdout"]))
    dev_example = next(eid for eid in world["dev"] if CYCLE[int(eid[3:]) % len(CYCLE)] == "forgets")
    fake_provider.control(model=EDITOR, script=[{"proposals": [
        proposal("be concise", guidance="Prefer short answers."),
        proposal("the unused rule", guidance=RULE, note="The criteria never say what 'follows the policy' means."),
        proposal("be polite", guidance="Reward a polite tone."),
        proposal("perfect", guidance=PERFECT),
        proposal("peek at holdout", change="examples", examples=[holdout_id]),
        proposal("show a forgetful answer", change="examples", examples=[dev_example]),
    ]}])

    done = propose(django_capture_on_commit_callbacks, world, lead, candidates=6, seed=7)

    assert done.status == Proposal.Status.FINISHED, done.error
    assert [r["name"] for r in done.rejected] == ["peek at holdout"]  # names a holdout case: reported, not applied
    rows = {row.candidate.name: row for row in selectors.candidate_rows(proposal=done)}
    base = selectors.runs_figures([world["run"]])
    base_dev, base_holdout = (base["by_split"][s]["agreement"] for s in ("dev", "holdout"))
    rule, perfect = rows["the unused rule"], rows["perfect"]
    # The rule lifts dev and holdout alike; the decoys change nothing and are never held out.
    assert rule.dev_agreement > base_dev and rule.holdout_agreement > base_holdout
    for decoy in ("be concise", "be polite"):
        assert rows[decoy].dev_agreement == pytest.approx(base_dev) and rows[decoy].candidate.holdout_run is None
    # 100 % on dev: flagged by the ceiling, never recommended; the rule is.
    assert perfect.dev_agreement == 1.0 and perfect.at_ceiling and not perfect.recommended
    assert rule.recommended and not rule.at_ceiling and rule.rules_pass
    assert rule.overfit_gap == pytest.approx(rule.dev_agreement - rule.holdout_agreement)
    assert ("add", RULE) in rule.diff
    assert rule.candidate.criteria_note.startswith("The criteria never say")
    # The example case is left out of its candidate's runs; its text and human verdict are in the spec.
    shown = rows["show a forgetful answer"].candidate
    assert shown.config.spec["examples"][0]["external_id"] == dev_example
    assert shown.config.spec["examples"][0]["verdict"] == "fail"
    assert not shown.dev_run.judgments.filter(case__external_id=dev_example).exists()
    # Proposed versions are never the rubric's newest, every one has its own hash.
    configs = JudgeConfig.objects.filter(proposal="proposed")
    assert configs.count() == 5 and len({c.config_hash for c in configs}) == 5
    assert JudgeConfig.objects.filter(rubric=done.rubric).kept().get() == world["run"].config

    requests = fake_provider.requests()
    [editor_request] = [r for r in requests if r["model"] == EDITOR]
    assert all(question not in editor_request["prompt"] for question in world["holdout"].values())
    assert all(eid not in editor_request["prompt"] for eid in world["holdout"])
    assert dev_example in editor_request["prompt"]
    for request in requests:
        examples = parse_sections(request["prompt"]).get("EXAMPLES", "")
        assert all(question not in examples for question in world["holdout"].values())
    # Only the finalists (the best two on dev) were judged on holdout.
    held_out = {c.name for c in done.candidates.filter(holdout_run__isnull=False)}
    assert held_out == {"the unused rule", "perfect"}

    # Never promoted while proposed: neither named for observe nor its run taken as evidence.
    with pytest.raises(PromotionError, match="proposed judge improvement"):
        rubric_promote(rubric=done.rubric, to_stage="observe", config=rule.candidate.config, reason="r", by=lead)
    with pytest.raises(PromotionRefused):
        rubric_promote(rubric=done.rubric, to_stage="observe", run=rule.candidate.holdout_run, reason="r", by=lead)

    kept = services.proposal_keep(proposal=done, candidate=rule.candidate, by=lead)
    assert kept.proposal == "" and JudgeConfig.objects.filter(rubric=done.rubric).kept().first() == kept
    assert set(JudgeConfig.objects.filter(proposal="discarded").values_list("pk", flat=True)) == {
        row.candidate.config_id for row in rows.values() if row.candidate.config_id != kept.pk}
    events = RubricEvent.objects.filter(kind__in=["proposal", "keep"]).order_by("pk")
    assert [e.kind for e in events] == ["proposal", "keep"]
    assert events[0].changes["editor_model"] == EDITOR and events[0].changes["run"] == world["run"].pk
    assert Decimal(events[0].changes["cost_usd"]) > 0 and events[1].by == lead


@pytest.mark.parametrize("fault", ["malformed", "timeout"])
def test_an_editor_that_fails_is_reported_and_saves_nothing(
    world, lead, fake_provider, django_capture_on_commit_callbacks, fault
):
    if fault == "malformed":
        fake_provider.control(model=EDITOR, script=[{"proposals": [{"name": "no change field"}]}])
    else:
        fake_provider.control(model=EDITOR, script=[{"proposals": []}], fault="timeout", hang_s=3)

    done = propose(django_capture_on_commit_callbacks, world, lead)

    assert done.status == Proposal.Status.FAILED
    assert ("invalid output" if fault == "malformed" else "timeout") in done.error
    assert not done.candidates.exists() and not JudgeConfig.objects.exclude(proposal="").exists()
    assert Run.objects.count() == 1
    assert RubricEvent.objects.get(kind="proposal").changes["status"] == "failed"


def test_a_spend_cap_reached_midway_stops_the_job_and_discards_its_candidates(
    world, lead, fake_provider, django_capture_on_commit_callbacks
):
    fake_provider.control(model=EDITOR, script=[{"proposals": [
        proposal("the unused rule", guidance=RULE), proposal("be polite", guidance="Reward a polite tone.")]}])

    done = propose(django_capture_on_commit_callbacks, world, lead, candidates=2, max_cost_usd=Decimal("1.5"))

    assert done.status == Proposal.Status.FAILED and "spend cap" in done.error
    assert set(JudgeConfig.objects.exclude(proposal="").values_list("proposal", flat=True)) == {"discarded"}
    assert not done.candidates.filter(holdout_run__isnull=False).exists()
    assert services.spent_usd(done) <= Decimal("1.5")
    with pytest.raises(services.ProposalError, match="finished"):
        services.proposal_keep(proposal=done, candidate=done.candidates.first(), by=lead)


def test_the_editor_reads_only_the_projects_own_cases(world, lead, other_project):
    # The run's dataset (its labeled cases and all) moved to another project, which nothing in evalhub does: the
    # editor is shown none of its cases, and the run cannot be improved at all.
    from labeling.models import Case, Dataset

    run = world["run"]
    assert selectors.labeled_cases(run=run, split=Case.Split.DEV)  # its own project's dev cases
    Dataset.objects.filter(pk=run.dataset_id).update(project=other_project)
    run = Run.objects.select_related("config__rubric", "dataset").get(pk=run.pk)
    assert selectors.labeled_cases(run=run, split=Case.Split.DEV) == {}
    with pytest.raises(services.ProposalError, match="dataset of another project"):
        services.proposal_start(run=run, by=lead, editor_model=EDITOR)
