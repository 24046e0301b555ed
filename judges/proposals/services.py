"""Writes of judge improvement (docs/improving.md): starting a proposal job, the editor's call and the
candidates it yields, moving the job on as its runs finish, cancelling, keeping one candidate or discarding all.

A job spends under one cap (`max_cost_usd`): the editor's call reserves against it, then each phase's runs share
what is left. When the editor's answer is unusable, or the cap is reached, or the lead cancels, the job ends
with its reason and nothing of it stays usable: no candidate was saved (the editor failed) or every candidate
version is discarded (never newest, never promoted).
"""

import logging
from datetime import timedelta
from decimal import Decimal

from celery import signature
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from judges.configs.services import judge_config_save
from judges.editor.client import EditorError, EditorSpec, ask_editor
from judges.engine.spend import SpendTracker
from judges.models import JudgeConfig, Proposal, ProposalCandidate, RubricEvent, Run
from judges.proposals.editing import MAX_CANDIDATES, PROMPT_VERSION, PROPOSALS_SCHEMA, SYSTEM
from judges.proposals.selectors import (
    engine_prices,
    finalists,
    labeled_cases,
    proposal_estimate,
    proposal_prompt,
)
from judges.runs.services import UNFINISHED, RunError, run_cancel, run_start
from labeling.models import Case

log = logging.getLogger(__name__)

PROPOSAL_TASK = "judges.proposal_work"  # judges.proposals.tasks.proposal_work
ENDED = (Proposal.Status.FINISHED, Proposal.Status.FAILED, Proposal.Status.CANCELLED)


class ProposalError(Exception):
    """A proposal job cannot be started or decided as asked; the message says why."""


def editor_for(*, run: Run, editor_model: str = "") -> EditorSpec:
    """The editor: the run's config's own primary, with another model when one is named; ValueError names
    what is wrong (an env name a judge may not read among it)."""
    overrides: dict = {"timeout_s": settings.EVALHUB_EDITOR_TIMEOUT_SECONDS}
    if editor_model.strip():
        overrides["model"] = editor_model.strip()
    return EditorSpec.from_config(run.config.spec, extra_allowed=settings.EVALHUB_JUDGE_ENV_ALLOW, **overrides)


def proposal_start(
    *, run: Run, by, candidates: int = 3, editor_model: str = "", seed: int = 0, max_cost_usd: Decimal | None = None,
) -> Proposal:
    """Check the run can be learned from, estimate the job and queue it once the row is committed."""
    config = run.config
    if run.dataset.project_id != config.rubric.project_id:
        raise ProposalError("The run judged a dataset of another project than its rubric's: nothing to learn from.")
    if by is not None and not by.leads(config.rubric.project_id):
        raise ProposalError(f"Only a lead of {config.rubric.slug}'s project may improve its judge.")
    if run.status != Run.Status.FINISHED:
        raise ProposalError("Only a finished run's disagreements can be learned from.")
    if config.external or "behavioral" not in (config.spec.get("layers") or []):
        raise ProposalError("Only a config with a behavioral judge (a prompt to improve) can be improved.")
    if config.proposal:
        raise ProposalError("This run's config is itself a proposal: keep it first, then improve it.")
    if run.parent_id is not None or run.source != Run.Source.WORKER:
        raise ProposalError("Improve from an ordinary run of the config, not a probe, drift, CI or traffic run.")
    if not 1 <= candidates <= MAX_CANDIDATES:
        raise ProposalError(f"Candidates must be between 1 and {MAX_CANDIDATES}.")
    if max_cost_usd is not None and max_cost_usd <= 0:
        raise ProposalError("The spend cap must be more than $0.")
    try:
        editor = editor_for(run=run, editor_model=editor_model)
    except ValueError as exc:
        raise ProposalError(str(exc)) from None
    _, shown, _ = proposal_prompt(run=run, seed=seed, candidates=candidates)
    if not shown:
        raise ProposalError("The run has no disagreement with the humans on its dev cases: nothing to learn from.")
    estimate = proposal_estimate(run=run, editor=editor, candidates=candidates, seed=seed)
    with transaction.atomic():
        proposal = Proposal.objects.create(
            rubric=config.rubric, run=run, editor=editor.to_dict(), candidates_asked=candidates, seed=seed,
            max_cost_usd=max_cost_usd, estimate_usd=estimate.total_usd, created_by=by,
        )
        queue_proposal_work(proposal.pk)
    return proposal


def queue_proposal_work(proposal_id: int) -> None:
    transaction.on_commit(lambda: signature(PROPOSAL_TASK, args=(proposal_id,)).delay())


def proposal_propose(*, proposal_id: int) -> None:
    """The job's first step: ask the editor (no transaction held over the call), then save its candidates as
    proposed versions and start their dev runs, all or nothing. Claimed by a conditional update: a second
    delivery of the task does nothing."""
    if not Proposal.objects.filter(pk=proposal_id, status=Proposal.Status.QUEUED).update(
        status=Proposal.Status.PROPOSING, started_at=timezone.now()
    ):
        return
    proposal = Proposal.objects.select_related("run__config__rubric", "run__dataset").get(pk=proposal_id)
    run = proposal.run
    prompt, shown, left_out = proposal_prompt(run=run, seed=proposal.seed, candidates=proposal.candidates_asked)
    Proposal.objects.filter(pk=proposal_id).update(disagreements_shown=shown, disagreements_left_out=left_out)
    spend = SpendTracker(None if proposal.max_cost_usd is None else float(proposal.max_cost_usd))
    try:
        answered = ask_editor(
            EditorSpec.from_dict(proposal.editor, extra_allowed=settings.EVALHUB_JUDGE_ENV_ALLOW),
            system=SYSTEM, user=prompt, schema=PROPOSALS_SCHEMA, prices=engine_prices(), spend=spend,
            extra_allowed=settings.EVALHUB_JUDGE_ENV_ALLOW,
        )
    except EditorError as exc:
        _record_editor(proposal_id, exc.calls, exc.input_tokens, exc.output_tokens, exc.cost_usd)
        _end(proposal_id, Proposal.Status.FAILED, f"The editor gave no usable answer: {exc}")
        return
    except ValueError as exc:  # the stored editor spec no longer passes (an env name no longer allowed)
        _end(proposal_id, Proposal.Status.FAILED, f"The editor cannot be asked: {exc}")
        return
    _record_editor(proposal_id, answered.calls, answered.input_tokens, answered.output_tokens, answered.cost_usd)
    rejected: list[dict] = []
    try:
        with transaction.atomic():
            proposal = Proposal.objects.select_for_update().select_related("run__config__rubric").get(pk=proposal_id)
            if proposal.status != Proposal.Status.PROPOSING:
                return  # cancelled while the editor wrote: nothing is saved
            made, rejected = _save_candidates(proposal, answered.answer["proposals"])
            if not made:
                why = "; ".join(f"{r['name']}: {r['why']}" for r in rejected) or "it proposed nothing"
                raise ProposalError(f"No proposal of the editor could be applied ({why}).")
            _start_dev_runs(proposal, made)
            proposal.rejected = rejected
            proposal.status = Proposal.Status.DEV
            proposal.save(update_fields=["rejected", "status"])
    except (ProposalError, RunError) as exc:  # rolled back: no candidate version, no run
        Proposal.objects.filter(pk=proposal_id).update(rejected=rejected)
        _end(proposal_id, Proposal.Status.FAILED, str(exc))


def _start_dev_runs(proposal: Proposal, made: list[ProposalCandidate]) -> None:
    """Each candidate judged on the dev split without its own example cases, sharing what the cap leaves."""
    run = proposal.run
    dev = labeled_cases(run=run, split=Case.Split.DEV)
    share = _share(proposal, len(made))
    for candidate in made:
        shown_ids = {e["external_id"] for e in candidate.config.spec.get("examples") or []}
        case_ids = [c.case_id for eid, c in dev.items() if eid not in shown_ids]
        candidate.dev_run = run_start(
            config=candidate.config, dataset=run.dataset, repeats=run.repeats, concurrency=run.concurrency,
            spend_cap_usd=share, by=proposal.created_by, case_ids=case_ids,
        )
        candidate.save(update_fields=["dev_run"])


def _record_editor(proposal_id: int, calls: int, tokens_in: int, tokens_out: int, cost: float | None) -> None:
    Proposal.objects.filter(pk=proposal_id).update(
        editor_calls=calls, editor_input_tokens=tokens_in, editor_output_tokens=tokens_out,
        editor_cost_usd=None if cost is None else Decimal(str(round(cost, 6))),
    )


def _save_candidates(proposal: Proposal, proposals: list[dict]) -> tuple[list[ProposalCandidate], list[dict]]:
    """Each usable proposal as a proposed config version and a candidate row; the rest as {"name", "why"}.
    A proposal naming a case outside the labeled dev cases, changing nothing, or repeating another is
    reported, not applied."""
    run = proposal.run
    base = run.config.spec
    dev = labeled_cases(run=run, split=Case.Split.DEV)
    made: list[ProposalCandidate] = []
    rejected: list[dict] = []
    hashes: set[str] = set()
    for item in proposals[: proposal.candidates_asked]:
        name = item["name"].strip()[:200] or "(unnamed)"
        spec = {k: v for k, v in base.items() if k not in ("rubric", "criteria")}
        if item["change"] == "guidance":
            guidance = item["guidance"].strip()
            if not guidance:
                rejected.append({"name": name, "why": "a guidance change with no guidance"})
                continue
            spec["guidance"] = f"{base.get('guidance', '').strip()}\n{guidance}".strip()
        else:
            unknown = [eid for eid in item["examples"] if eid not in dev]
            if unknown or not item["examples"]:
                why = (f"names {', '.join(unknown[:3])}, not a labeled dev case" if unknown
                       else "an examples change with no example")
                rejected.append({"name": name, "why": why})
                continue
            shown = list(base.get("examples") or [])
            for eid in dict.fromkeys(item["examples"]):
                case = dev[eid]
                if all(e["external_id"] != eid for e in shown):
                    shown.append({"external_id": eid, "input": case.input, "output": case.output,
                                  "verdict": case.human, "reason": ""})
            spec["examples"] = shown
        try:
            config = judge_config_save(rubric=proposal.rubric, spec=spec, by=proposal.created_by,
                                       note=f"proposed: {name}"[:300], proposed=True, tier=run.config.tier)
        except ValueError as exc:
            rejected.append({"name": name, "why": str(exc)})
            continue
        if config.config_hash in hashes or config.pk == run.config_id:
            rejected.append({"name": name, "why": "the same judge as another proposal"})
            continue
        earlier = ProposalCandidate.objects.filter(config=config).exclude(proposal=proposal).first()
        if earlier is not None:  # one job's keep or discard must not decide another's candidate
            rejected.append({"name": name, "why": f"already proposed as v{config.version} (proposal "
                                                  f"{earlier.proposal_id}): decide that one"})
            continue
        hashes.add(config.config_hash)
        added = len(config.spec.get("guidance", "")) - len(base.get("guidance", ""))
        added += sum(len(e["input"]) + len(e["output"]) for e in config.spec.get("examples") or [])
        added -= sum(len(e["input"]) + len(e["output"]) for e in base.get("examples") or [])
        made.append(ProposalCandidate.objects.create(
            proposal=proposal, index=len(made) + 1, name=name, change=item["change"], why=item["why"],
            criteria_note=(item.get("criteria_note") or "").strip(), config=config,
            added_tokens=max(added, 0) // 4,
        ))
    return made, rejected


def _share(proposal: Proposal, runs: int) -> Decimal | None:
    """Each of `runs` new runs' spend cap: what the job's cap leaves after what is spent, shared alike."""
    if proposal.max_cost_usd is None:
        return None
    left = proposal.max_cost_usd - spent_usd(proposal)
    return max(left, Decimal(0)) / runs


def spent_usd(proposal: Proposal) -> Decimal:
    """What the job has spent (known costs): the editor and every candidate run."""
    runs = Run.objects.filter(pk__in=_run_ids(proposal))
    return (proposal.editor_cost_usd or Decimal(0)) + sum((r.cost_usd for r in runs), Decimal(0))


def _run_ids(proposal: Proposal) -> list[int]:
    ids = []
    for dev_run, holdout_run in proposal.candidates.values_list("dev_run_id", "holdout_run_id"):
        ids += [i for i in (dev_run, holdout_run) if i is not None]
    return ids


def proposals_sweep(*, now=None) -> list[int]:
    """The jobs a lost message or a killed worker left: a queued job older than a sweep interval is queued
    again; a job still asking the editor well past the editor's deadline (its timeout times its attempts,
    and a minute) ends as failed, its editor call lost. Returns the ids of the jobs it touched."""
    now = now or timezone.now()
    touched = []
    grace = timedelta(seconds=settings.EVALHUB_SWEEP_SECONDS)
    for proposal in Proposal.objects.filter(status=Proposal.Status.QUEUED, created_at__lt=now - grace):
        signature(PROPOSAL_TASK, args=(proposal.pk,)).delay()
        touched.append(proposal.pk)
    for proposal in Proposal.objects.filter(status=Proposal.Status.PROPOSING, started_at__isnull=False):
        editor = proposal.editor
        deadline = float(editor.get("timeout_s", 120)) * int(editor.get("max_attempts", 2)) + 60
        if proposal.started_at < now - timedelta(seconds=deadline):
            _end(proposal.pk, Proposal.Status.FAILED, "The editor's call was lost (its worker stopped): start again.")
            touched.append(proposal.pk)
    return touched


def proposal_advance(*, run_id: int) -> None:
    """Called when a run's work ends (judges.runs.tasks.AFTER_RUN_WORK): when every dev run of a job is done,
    start the finalists' holdout runs; when those are done, the job is finished. A run that reached its
    share of the cap ends the job ("spend cap"). A no-op for a run that is no candidate's."""
    candidate = ProposalCandidate.objects.filter(dev_run_id=run_id).first() or \
        ProposalCandidate.objects.filter(holdout_run_id=run_id).first()
    if candidate is None:
        return
    with transaction.atomic():
        proposal = Proposal.objects.select_for_update().select_related("run__dataset").get(pk=candidate.proposal_id)
        if proposal.status not in (Proposal.Status.DEV, Proposal.Status.HOLDOUT):
            return
        candidates = list(proposal.candidates.select_related("config", "dev_run__config__rubric",
                                                             "holdout_run__config__rubric"))
        field = "dev_run" if proposal.status == Proposal.Status.DEV else "holdout_run"
        runs = [getattr(c, field) for c in candidates if getattr(c, field) is not None]
        if any(r.status in UNFINISHED for r in runs):
            return
        if any(r.judgments.filter(error="spend cap").exists() for r in runs):
            _end_locked(proposal, Proposal.Status.FAILED,
                        f"The spend cap of ${proposal.max_cost_usd} was reached before every candidate was judged.")
            return
        if proposal.status == Proposal.Status.HOLDOUT:
            _end_locked(proposal, Proposal.Status.FINISHED, "")
            return
        best = finalists(candidates=candidates)
        holdout = labeled_cases(run=proposal.run, split=Case.Split.HOLDOUT)
        if not holdout:
            _end_locked(proposal, Proposal.Status.FINISHED, "")  # nothing to hold out: dev figures only
            return
        share = _share(proposal, len(best))
        for candidate in best:
            candidate.holdout_run = run_start(
                config=candidate.config, dataset=proposal.run.dataset, repeats=proposal.run.repeats,
                concurrency=proposal.run.concurrency, spend_cap_usd=share, by=proposal.created_by,
                case_ids=[c.case_id for c in holdout.values()],
            )
            candidate.save(update_fields=["holdout_run"])
        proposal.status = Proposal.Status.HOLDOUT
        proposal.save(update_fields=["status"])


def _end(proposal_id: int, status: str, error: str) -> None:
    with transaction.atomic():
        proposal = Proposal.objects.select_for_update().get(pk=proposal_id)
        if proposal.status in ENDED:
            return
        _end_locked(proposal, status, error)


def _end_locked(proposal: Proposal, status: str, error: str) -> None:
    """End the job (in the caller's transaction, the proposal locked): its unfinished runs cancelled, and unless
    it finished, its candidate versions discarded; audited with the source run, the editor model and the cost."""
    ids = _run_ids(proposal)
    for run in Run.objects.filter(pk__in=ids, status__in=UNFINISHED):
        run_cancel(run=run)
    if status != Proposal.Status.FINISHED:
        JudgeConfig.objects.filter(pk__in=proposal.candidates.values("config_id"), proposal="proposed").update(
            proposal="discarded"
        )
    proposal.status, proposal.error, proposal.finished_at = status, error, timezone.now()
    proposal.save(update_fields=["status", "error", "finished_at"])
    _audit(proposal, RubricEvent.Kind.PROPOSAL, by=proposal.created_by,
           reason=f"Judge improvement {proposal.get_status_display()}" + (f": {error}" if error else "."))


def _audit(proposal: Proposal, kind: str, *, by, reason: str, kept: JudgeConfig | None = None) -> RubricEvent:
    versions = list(proposal.candidates.order_by("index").values_list("config__version", flat=True))
    return RubricEvent.objects.create(
        rubric_id=proposal.rubric_id, kind=kind, reason=reason[:2000], by=by,
        changes={
            "proposal": proposal.pk, "run": proposal.run_id, "editor_model": proposal.editor.get("model"),
            "prompt_version": PROMPT_VERSION, "status": proposal.status, "candidates": versions,
            "kept": None if kept is None else kept.version,
            "editor_cost_usd": None if proposal.editor_cost_usd is None else str(proposal.editor_cost_usd),
            "cost_usd": str(spent_usd(proposal)),
        },
    )


def proposal_cancel(*, proposal: Proposal, by) -> None:
    """Stop the job now: its runs are cancelled (each stops within about a second), an editor answer arriving
    later is dropped, and its candidate versions are discarded."""
    _check_lead(proposal, by)
    with transaction.atomic():
        proposal = Proposal.objects.select_for_update().get(pk=proposal.pk)
        if proposal.status in ENDED:
            raise ProposalError("The job has already ended.")
        _end_locked(proposal, Proposal.Status.CANCELLED, f"Cancelled by {by.username}.")


def proposal_keep(*, proposal: Proposal, candidate: ProposalCandidate, by, reason: str = "") -> JudgeConfig:
    """Keep one candidate: its version becomes an ordinary one (a candidate for promotion, which is unchanged);
    the others are discarded. Audited."""
    _check_lead(proposal, by)
    with transaction.atomic():
        proposal = Proposal.objects.select_for_update().get(pk=proposal.pk)
        _decidable(proposal)
        if candidate.proposal_id != proposal.pk:
            raise ProposalError("That candidate is not one of this job's.")
        config = JudgeConfig.objects.select_for_update().get(pk=candidate.config_id)
        if config.proposal != "proposed":
            raise ProposalError(f"Config v{config.version} is no longer a proposal.")
        JudgeConfig.objects.filter(pk=config.pk).update(proposal="")
        others = proposal.candidates.exclude(pk=candidate.pk).values("config_id")
        JudgeConfig.objects.filter(pk__in=others, proposal="proposed").update(proposal="discarded")
        _decide(proposal, Proposal.Decision.KEPT, by)
        _audit(proposal, RubricEvent.Kind.KEEP, by=by, kept=config,
               reason=reason.strip() or f"Kept v{config.version} ({candidate.name}).")
        config.refresh_from_db()
        return config


def proposal_discard(*, proposal: Proposal, by, reason: str = "") -> None:
    """Discard every candidate of a finished job. Audited."""
    _check_lead(proposal, by)
    with transaction.atomic():
        proposal = Proposal.objects.select_for_update().get(pk=proposal.pk)
        _decidable(proposal)
        JudgeConfig.objects.filter(pk__in=proposal.candidates.values("config_id"), proposal="proposed").update(
            proposal="discarded"
        )
        _decide(proposal, Proposal.Decision.DISCARDED, by)
        _audit(proposal, RubricEvent.Kind.DISCARD, by=by, reason=reason.strip() or "Discarded every candidate.")


def _check_lead(proposal: Proposal, by) -> None:
    """Only a lead of the proposal's rubric's project (or the instance admin) decides or stops it."""
    if by is None or not by.leads(proposal.rubric.project_id):
        raise ProposalError("Only a lead of this rubric's project may decide or cancel its improvement.")


def _decidable(proposal: Proposal) -> None:
    if proposal.status != Proposal.Status.FINISHED:
        raise ProposalError("Only a finished job's candidates can be kept or discarded.")
    if proposal.decision:
        raise ProposalError(f"This job is already decided ({proposal.get_decision_display()}).")


def _decide(proposal: Proposal, decision: str, by) -> None:
    proposal.decision, proposal.decided_by, proposal.decided_at = decision, by, timezone.now()
    proposal.save(update_fields=["decision", "decided_by", "decided_at"])
