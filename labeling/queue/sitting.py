"""What this sitting labeled in one queue: the steps undo may take back, kept in the reviewer's session.

Undo reaches only labels given (or revised) in this sitting, newest first, one step at a time: never a
label from an earlier sitting, whatever was skipped in between. A sitting is one login session in one
queue; a pause of SITTING_PAUSE without labeling there ends it (docs/labeling.md).
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.sessions.backends.base import SessionBase
from django.utils import timezone
from django.utils.dateparse import parse_datetime

SITTING_PAUSE = timedelta(minutes=30)
# A bound on what the session keeps; undo goes back this many steps at most.
MAX_STEPS = 100


@dataclass(frozen=True)
class Step:
    """One label given in this sitting: `created` (a new label) or a revision of one, stamped as it was
    left (the label's updated_at), so undo can tell whether anything changed it since."""

    label_id: int
    given_at: datetime
    created: bool


def _key(dataset_id: int, rubric_id: int) -> str:
    return f"sitting:{dataset_id}:{rubric_id}"


def sitting_steps(session: SessionBase, *, dataset_id: int, rubric_id: int, now: datetime | None = None) -> list[Step]:
    """This sitting's steps, oldest first; none once the sitting has ended (a pause of SITTING_PAUSE)."""
    stored = session.get(_key(dataset_id, rubric_id)) or []
    steps = [Step(label_id=row[0], given_at=at, created=row[2])
             for row in stored if (at := parse_datetime(row[1])) is not None]
    if steps and (now or timezone.now()) - steps[-1].given_at > SITTING_PAUSE:
        return []
    return steps


def sitting_record(session: SessionBase, *, dataset_id: int, rubric_id: int, step: Step) -> None:
    """Add a label just given or revised; after a pause this starts a new sitting."""
    steps = sitting_steps(session, dataset_id=dataset_id, rubric_id=rubric_id, now=step.given_at)
    _store(session, dataset_id, rubric_id, [*steps, step][-MAX_STEPS:])


def sitting_forget(session: SessionBase, *, dataset_id: int, rubric_id: int, step: Step) -> None:
    """Drop a step: undone, or refused (a repeated undo then changes nothing)."""
    steps = sitting_steps(session, dataset_id=dataset_id, rubric_id=rubric_id)
    _store(session, dataset_id, rubric_id, [kept for kept in steps if kept != step])


def _store(session: SessionBase, dataset_id: int, rubric_id: int, steps: list[Step]) -> None:
    session[_key(dataset_id, rubric_id)] = [[s.label_id, s.given_at.isoformat(), s.created] for s in steps]
