"""The verdict export's tasks (judges/export/otlp.py says what is sent): queued by the worker once a batch of
judgments is committed, and by label_submit once a reviewer's verdict is (LABEL_RECORDED, judges/apps.py);
sent through evalhub/outbound.py, retried with backoff (up to 8 times, at most 10 minutes apart) while the
backend fails (5xx, 429) or cannot be reached."""

import logging
from collections.abc import Callable

import httpx
from celery import shared_task
from django.conf import settings
from django.db import transaction

from evalhub import outbound
from judges.export.otlp import ExportProblem, Verdict, destination, verdicts_request
from judges.models import Judgment, Run, VerdictExport
from labeling.models import Label

log = logging.getLogger(__name__)

EXPORT_TASK = "judges.export_verdicts"
EXPORT_LABEL_TASK = "judges.export_label"


def export_later(*, run, keys: list[tuple[int, int]]) -> None:
    """Queue the export of these judgments once they are committed, when the run's project exports verdicts."""
    project_id = run.dataset.project_id
    if keys and VerdictExport.objects.filter(project_id=project_id, enabled=True).exists():
        transaction.on_commit(lambda: export_verdicts.delay(run.pk, [list(key) for key in keys]))


class _Retry(Exception):
    """The backend failed or could not be reached: the task tries again later."""


@shared_task(name=EXPORT_TASK, ignore_result=True, autoretry_for=(_Retry,), retry_backoff=True,
             retry_backoff_max=600, max_retries=8)
def export_verdicts(run_id: int, keys: list[list[int]]) -> int:
    """Send a run's recorded judgments to its project's OTLP endpoint; how many were sent."""
    run = Run.objects.select_related("dataset").get(pk=run_id)
    return _send(run.dataset.project_id, lambda: judgment_verdicts(run_id, [(c, r) for c, r in keys]))


def export_label_later(label: Label) -> None:
    """Queue the export of a reviewer's verdict once committed, when its project exports verdicts."""
    if VerdictExport.objects.filter(project_id=label.rubric.project_id, enabled=True).exists():
        transaction.on_commit(lambda: export_label.delay(label.pk))


@shared_task(name=EXPORT_LABEL_TASK, ignore_result=True, autoretry_for=(_Retry,), retry_backoff=True,
             retry_backoff_max=600, max_retries=8)
def export_label(label_id: int) -> int:
    """Send a reviewer's verdict (as it is now: a label revised since is sent as revised)."""
    label = Label.objects.select_related("case", "rubric").filter(pk=label_id).first()
    if label is None:  # undone since
        return 0
    return _send(label.rubric.project_id, lambda: [label_verdict(label)])


def _send(project_id: int, verdicts_of: Callable[[], list[Verdict]]) -> int:
    """Send verdicts to the project's endpoint; raises _Retry when the backend fails or cannot be reached."""
    export = VerdictExport.objects.filter(project_id=project_id, enabled=True).first()
    if export is None:
        return 0
    try:
        endpoint, headers = destination(export)
    except ExportProblem as exc:
        log.warning("verdict export of project %s not sent: %s", project_id, exc)
        return 0
    verdicts = verdicts_of()
    if not verdicts:
        return 0
    body = verdicts_request(verdicts).SerializeToString()
    try:
        answer = outbound.post(endpoint, body, {**headers, "Content-Type": "application/x-protobuf"},
                               timeout=settings.EVALHUB_VERDICT_EXPORT_TIMEOUT_SECONDS)
    except outbound.OutboundRefused as exc:
        log.warning("verdict export of project %s refused: %s", project_id, exc)
        return 0
    except httpx.HTTPError as exc:
        raise _Retry(f"the OTLP endpoint could not be reached: {exc}") from None
    if answer.status == 429 or answer.status >= 500:
        raise _Retry(f"the OTLP endpoint answered {answer.status}")
    if answer.status >= 400:  # OTLP/HTTP: a 4xx other than 429 is not retryable
        log.warning("verdict export of project %s refused by the endpoint (%s): %s", project_id, answer.status,
                    answer.body[:300])
        return 0
    return len(verdicts)


def judgment_verdicts(run_id: int, keys: list[tuple[int, int]]) -> list[Verdict]:
    """The verdicts of a run's judgments, by (case id, repeat)."""
    wanted = set(map(tuple, keys))
    judgments = (Judgment.objects.filter(run_id=run_id, case_id__in={case_id for case_id, _ in wanted})
                 .select_related("case", "run__config__rubric").order_by("case_id", "repeat"))
    return [Verdict(rubric=j.run.config.rubric.slug, outcome=j.outcome, reason=j.reason, kind="judge",
                    external_id=j.case.external_id, root_span=str((j.case.metadata or {}).get("otlp", {})
                                                                  .get("root_span", "")),
                    time_unix_nano=int(j.created_at.timestamp() * 1e9), config_version=j.run.config.version,
                    run_id=run_id)
            for j in judgments if (j.case_id, j.repeat) in wanted]


def label_verdict(label) -> Verdict:
    """A reviewer's verdict: no config version (a person, not a judge config); the note as the explanation."""
    metadata = label.case.metadata or {}
    return Verdict(rubric=label.rubric.slug, outcome=label.verdict, reason=label.note, kind="human",
                   external_id=label.case.external_id, root_span=str(metadata.get("otlp", {}).get("root_span", "")),
                   time_unix_nano=int(label.updated_at.timestamp() * 1e9))
