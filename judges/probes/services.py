"""Writes of bias probes: starting them. Their work goes through the ordinary run machinery.

A probe is a Run of its parent run's config (`parent`, `probe`), over the parent's cases that have a
human verdict of the rubric; `judges.runs.worker.run_window` judges each case's variant
(`judges.runs.variants.make_variant`) and stores it with the judgment. Nothing of the dataset changes, so a
probe never makes a run stale.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.db import transaction

from judges.models import Judgment, Run, RunChunk
from judges.probes.variants import PROBE_LABELS
from judges.runs.services import RunError, queue_run_work
from judges.runs.variants import PROBE_KINDS, applies
from labeling.disputes.selectors import cases_with_human_verdict
from labeling.models import Case

UNFINISHED = (Run.Status.QUEUED, Run.Status.RUNNING)


def probes_start(*, run: Run, kinds: Iterable[str], by) -> list[Run]:
    """Start one probe run per kind on `run` and queue their work once committed; returns them.

    Each probes the cases `run` judged that have a human verdict now (the injected instruction: only the
    human-failed ones), with the same config, repeats, concurrency and spend cap. The human verdicts are
    stored with the chunks, so the variants do not shift if labels change while the probe works. All or
    nothing: any kind that cannot start refuses every kind, with why (RunError).
    """
    kinds = list(dict.fromkeys(kinds))
    if not kinds:
        raise RunError("Choose at least one probe.")
    unknown = [kind for kind in kinds if kind not in PROBE_KINDS]
    if unknown:
        raise RunError(f"Unknown probe {', '.join(unknown)}: choose from {', '.join(PROBE_KINDS)}.")
    with transaction.atomic():
        # The parent's row lock makes a double-clicked "Start" wait, then find the first one's probes running.
        run = Run.objects.select_for_update(of=("self",)).select_related("config__rubric").get(pk=run.pk)
        if run.parent_id is not None:
            raise RunError(f"Run {run.pk} is itself a probe: probe the run it measures (run {run.parent_id}).")
        if run.config.external:
            raise RunError("An imported (external) config holds verdicts of another tool: it cannot judge variants.")
        if run.status != Run.Status.FINISHED:
            raise RunError(f"Probes are compared with run {run.pk}'s verdicts: start them once it has finished.")
        busy = sorted(set(run.probes.filter(status__in=UNFINISHED).values_list("probe", flat=True)) & set(kinds))
        if busy:
            raise RunError(f"A {', '.join(busy)} probe of run {run.pk} is still at work: wait for it to finish.")
        judged = Case.objects.filter(
            dataset_id=run.dataset_id, pk__in=Judgment.objects.filter(run=run).values("case_id")
        )
        humans = dict(
            cases_with_human_verdict(rubric=run.config.rubric, cases=judged)
            .filter(human_verdict__isnull=False)
            .order_by("pk")
            .values_list("pk", "human_verdict")
        )
        probes = []
        for kind in kinds:
            chosen = {pk: verdict for pk, verdict in humans.items() if applies(kind, verdict)}
            if not chosen:
                needs = "a human verdict of fail" if kind == "injection" else "a human verdict"
                raise RunError(f"The {PROBE_LABELS[kind].lower()} probe has nothing to judge: no case of run "
                               f"{run.pk} has {needs}.")
            probes.append(_probe_create(parent=run, kind=kind, humans=chosen, by=by))
    return probes


def _probe_create(*, parent: Run, kind: str, humans: dict[int, str], by) -> Run:
    probe = Run.objects.create(
        config=parent.config, dataset_id=parent.dataset_id, repeats=parent.repeats, concurrency=parent.concurrency,
        spend_cap_usd=parent.spend_cap_usd, created_by=by, total=len(humans) * parent.repeats, parent=parent,
        probe=kind,
    )
    case_ids, size = list(humans), settings.EVALHUB_CHUNK_CASES
    RunChunk.objects.bulk_create(
        RunChunk(
            run=probe, index=i, case_ids=case_ids[start : start + size],
            human_verdicts={str(pk): humans[pk] for pk in case_ids[start : start + size]},
        )
        for i, start in enumerate(range(0, len(case_ids), size))
    )
    queue_run_work(probe.pk)
    return probe
