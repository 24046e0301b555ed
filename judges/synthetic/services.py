"""Synthetic cases (docs/cases.md, "Synthetic cases"): an editor model writes inputs a customer could send,
from the dataset's policy documents and, when asked, its failed dev cases; they become cases with no answer
yet, through the same case-writing service as imports (so the dataset's redaction applies).

`synthesis_start` checks the request and queues the job; `synthesis_work` (the task's body) asks the editor
once, outside any transaction, then writes the cases and the job's outcome in one transaction: a malformed
answer, a timeout or a rejected case leaves no case written and says why on the job.
"""

import random
from datetime import timedelta
from decimal import Decimal

from celery import signature
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from evalhub.models import Project
from judges.configs.services import engine_prices
from judges.editor import EditorError, EditorSpec, ask_editor
from judges.editor.client import estimate_editor_cost
from judges.models import JudgeConfig, SynthesisJob
from judges.synthetic import writing
from judges.synthetic.selectors import editor_configs, failed_dev_cases
from labeling.importing import ImportRejected
from labeling.importing.cases import cases_import_objects
from labeling.importing.redaction import Redactor
from labeling.models import Case, Dataset, PolicyDocument

SYNTHESIS_TASK = "judges.synthesize_cases"  # judges.synthetic.tasks.synthesize_cases
LEASE_SLACK = timedelta(seconds=60)
ERRORS_SHOWN = 5


class SynthesisError(Exception):
    """A request for synthetic cases that cannot be made; the message is meant for the person who asked."""


def synthesis_editor(*, project: Project, config: JudgeConfig | None = None, model: str = "") -> EditorSpec:
    """The editor: the primary of `config` (by default the project's newest judge config with a model), its model
    replaced by `model` when one is named. Its variables go through the engine's allowed-names check. A config of
    another project is refused as one that does not exist."""
    if config is None:
        newest = editor_configs(project=project)
        if not newest:
            raise SynthesisError("No judge config with a model to write with: save one (its primary is the editor).")
        config = newest[0]
    elif config.rubric.project_id != project.pk:
        raise SynthesisError(f"No judge config {config.pk} in project {project.slug}.")
    overrides = {"model": model.strip()} if model.strip() else {}
    try:
        return EditorSpec.from_config(config.spec, extra_allowed=settings.EVALHUB_JUDGE_ENV_ALLOW, **overrides)
    except ValueError as refused:
        raise SynthesisError(f"The editor of {config}: {refused}") from None


def _policies(*, dataset: Dataset, extra: list[str]) -> list[PolicyDocument]:
    """The newest version of each of the dataset's policy documents and of those named; an unknown one is an
    error."""
    slugs = sorted({*dataset.policies, *extra})
    if not slugs:
        raise SynthesisError(f"Dataset {dataset.slug} lists no policy document, and none was named: choose its "
                             "policy documents on its page, or name one.")
    newest = {}
    for policy in dataset.project.policies.filter(slug__in=slugs).order_by("slug", "-version"):
        newest.setdefault(policy.slug, policy)
    unknown = [slug for slug in slugs if slug not in newest]
    if unknown:
        raise SynthesisError(f"No policy document {', '.join(unknown)}.")
    return [newest[slug] for slug in slugs]


def _prompt(job: SynthesisJob, failed: list[writing.FailedCase]) -> str:
    texts = {(p.slug, p.version): p.text for p in PolicyDocument.objects.filter(
        project_id=job.dataset.project_id, slug__in=[ref["slug"] for ref in job.policies])}
    policies = [writing.Policy(slug=ref["slug"], version=ref["version"], text=texts[(ref["slug"], ref["version"])])
                for ref in job.policies]
    return writing.prompt(n=job.n, types=tuple(job.types), seed=job.seed, policies=policies, failed=failed)


def synthesis_start(*, dataset: Dataset, n: int, types: list[str] | tuple[str, ...], editor: EditorSpec,
                    policies: list[str] | tuple[str, ...] = (), from_failed_dev: bool = False,
                    seed: int | None = None, by=None, queue: bool = True) -> SynthesisJob:
    """Record a request for `n` synthetic cases of `types` and queue its work (unless `queue` is off: the
    command does the work in its own process); returns the job.

    The policy documents are the dataset's list and those named, each at its newest version now. Raises
    SynthesisError (a message for the person) for a request that cannot be made."""
    if not 1 <= n <= writing.MAX_CASES:
        raise SynthesisError(f"Ask for 1 to {writing.MAX_CASES} cases, not {n}.")
    if seed is not None and not 0 <= seed <= writing.MAX_SEED:
        raise SynthesisError(f"The seed is a whole number from 0 to {writing.MAX_SEED}, not {seed}.")
    unknown = [kind for kind in types if kind not in writing.SYNTHETIC_TYPES]
    if unknown or not types:
        raise SynthesisError(f"The types are {', '.join(writing.SYNTHETIC_TYPES)}; "
                             f"{'not ' + ', '.join(unknown) if unknown else 'choose at least one'}.")
    chosen = [kind for kind in writing.SYNTHETIC_TYPES if kind in types]
    documents = _policies(dataset=dataset, extra=list(policies))
    refusals = editor.env_refusals(extra_allowed=settings.EVALHUB_JUDGE_ENV_ALLOW)
    if refusals:
        raise SynthesisError(refusals[0])
    job = SynthesisJob(
        dataset=dataset, n=n, types=chosen, from_failed_dev=from_failed_dev,
        policies=[{"slug": p.slug, "version": p.version, "sha256": p.sha256} for p in documents],
        seed=random.randrange(1, writing.MAX_SEED + 1) if seed is None else seed, prompt_version=writing.PROMPT_VERSION,
        editor=editor.to_dict(), created_by=by,
    )
    failed = failed_dev_cases(dataset=dataset) if from_failed_dev else []
    estimate = estimate_editor_cost(editor, prompt_chars=len(writing.SYSTEM) + len(_prompt(job, failed)),
                                    prices=engine_prices())
    job.estimate_usd = None if estimate is None else Decimal(str(round(estimate, 6)))
    with transaction.atomic():
        job.save()
        job_id = job.pk
        if queue:
            transaction.on_commit(lambda: signature(SYNTHESIS_TASK, args=(job_id,)).delay())
    return job


def _claim(job_id: int, lease: timedelta) -> bool:
    """Take the job for this task: queued, or running under a lease that ran out (a killed worker's)."""
    now = timezone.now()
    return bool(SynthesisJob.objects.filter(
        Q(status=SynthesisJob.Status.QUEUED) | Q(status=SynthesisJob.Status.RUNNING, lease_until__lt=now), pk=job_id,
    ).update(status=SynthesisJob.Status.RUNNING, lease_until=now + lease))


def _cost(value: float | None) -> Decimal | None:
    return None if value is None else Decimal(str(round(value, 6)))


def synthesis_work(*, job_id: int) -> SynthesisJob | None:
    """Ask the editor for the job's cases and write them; returns the job, or None when another task holds it
    or it is done. Nothing is half-saved: the cases and the job's outcome are one transaction."""
    job = SynthesisJob.objects.select_related("dataset").filter(pk=job_id).first()
    if job is None:
        return None
    try:
        editor = EditorSpec.from_dict(job.editor, extra_allowed=settings.EVALHUB_JUDGE_ENV_ALLOW)
    except ValueError as refused:  # the operator's allowed names changed since the job was queued
        return _job_end(job, error=f"The editor is refused: {refused}") if _claim(job_id, LEASE_SLACK) else None
    if not _claim(job_id, timedelta(seconds=editor.timeout_s * editor.max_attempts) + LEASE_SLACK):
        return None
    failed = failed_dev_cases(dataset=job.dataset) if job.from_failed_dev else []
    try:
        answered = ask_editor(editor, system=writing.SYSTEM, user=_prompt(job, failed),
                              schema=writing.answer_schema(tuple(job.types)), prices=engine_prices(),
                              extra_allowed=settings.EVALHUB_JUDGE_ENV_ALLOW)
    except EditorError as error:
        return _job_end(job, error=f"{type(error).__name__}: {error}", failed_shown=len(failed), calls=error.calls,
                        input_tokens=error.input_tokens, output_tokens=error.output_tokens, cost=error.cost_usd)
    usage = {"calls": answered.calls, "input_tokens": answered.input_tokens, "output_tokens": answered.output_tokens,
             "cost": answered.cost_usd, "failed_shown": len(failed)}
    objects = writing.case_objects(answered.answer, model=answered.model, seed=job.seed)
    beyond = max(len(objects) - job.n, 0)
    try:
        with transaction.atomic():
            kept, duplicates = _new_inputs(dataset=job.dataset, objects=objects[: job.n])
            if kept:
                cases_import_objects(dataset=job.dataset, objects=kept)
            return _job_end(job, written=[o["external_id"] for o in kept], duplicates=duplicates, beyond=beyond,
                            **usage)
    except ImportRejected as rejected:
        errors = "; ".join(f"case {e.row + 1 if e.row is not None else '?'}: {e.field or ''} {e.message}".strip()
                           for e in rejected.errors[:ERRORS_SHOWN])
        more = f" (and {len(rejected.errors) - ERRORS_SHOWN} more)" if len(rejected.errors) > ERRORS_SHOWN else ""
        return _job_end(job, error=f"The editor's cases were refused by the case checks: {errors}{more}", **usage)


def _new_inputs(*, dataset: Dataset, objects: list[dict]) -> tuple[list[dict], int]:
    """The objects whose input (as the dataset would store it: redacted) differs, once whitespace is
    collapsed and case folded, from every input the dataset holds and from each other, each given its
    external_id from that stored input (never from text the redaction removes); and how many were dropped.
    Run under the dataset's row lock, so two jobs cannot both add the same input."""
    locked = Dataset.objects.select_for_update().only("pk", "redact").get(pk=dataset.pk)
    redactor = Redactor(locked.redact_kinds)
    seen = {writing.normalised(text) for text in
            Case.objects.filter(dataset=dataset).values_list("input", flat=True).iterator(chunk_size=5_000)}
    kept, dropped = [], 0
    for item in objects:
        stored = redactor.fields({"input": item["input"]})["input"] if redactor else item["input"]
        key = writing.normalised(stored)
        if key in seen:
            dropped += 1
            continue
        seen.add(key)
        kept.append({"external_id": writing.synthetic_external_id(stored), **item})
    return kept, dropped


def _job_end(job: SynthesisJob, *, written: list[str] | None = None, duplicates: int = 0, beyond: int = 0,
             error: str = "", failed_shown: int = 0, calls: int = 0, input_tokens: int = 0, output_tokens: int = 0,
             cost: float | None = 0.0) -> SynthesisJob:
    job.status = SynthesisJob.Status.FAILED if error else SynthesisJob.Status.FINISHED
    job.external_ids = written or []
    job.written, job.duplicates, job.beyond_n, job.error = len(job.external_ids), duplicates, beyond, error
    job.failed_cases_shown, job.calls, job.input_tokens, job.output_tokens = failed_shown, calls, input_tokens, \
        output_tokens
    job.cost_usd, job.finished_at, job.lease_until = _cost(cost), timezone.now(), None
    job.save(update_fields=["status", "external_ids", "written", "duplicates", "beyond_n", "error",
                            "failed_cases_shown", "calls", "input_tokens", "output_tokens", "cost_usd",
                            "finished_at", "lease_until"])
    return job
