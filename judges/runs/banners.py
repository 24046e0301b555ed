"""Banners about background work that follow it: "run queued" turns into the run's live state.

A view that queues runs says so with `live_message(request, text, runs)`. base.html shows such a message
as a banner that asks judges:run_banner for the runs' state now, every two seconds, and stops once none
is queued or running (that answer is 286): no banner keeps saying "queued" for a run that has finished.
The run ids travel in the message's extra tags, so they survive the redirect like any message.
"""

from collections.abc import Iterable

from django.contrib import messages
from django.http import HttpRequest

from evalhub.models import Project
from evalhub.params import object_id
from judges.models import Run
from judges.runs.selectors import project_runs

TAG_PREFIX = "live-runs-"
MAX_RUNS = 10  # more than any one action queues (three probes); a longer list in a URL is not ours


def live_message(request: HttpRequest, text: str, runs: Iterable[Run]) -> None:
    """A success message that the page turns into the live state of `runs`."""
    ids = "-".join(str(run.pk) for run in runs)
    messages.success(request, text, extra_tags=f"{TAG_PREFIX}{ids}" if ids else "")


def live_run_ids(extra_tags: str) -> list[int]:
    """The run ids a message's extra tags carry; none for an ordinary message."""
    for tag in (extra_tags or "").split():
        if tag.startswith(TAG_PREFIX):
            return parse_run_ids(tag.removeprefix(TAG_PREFIX).replace("-", ","))
    return []


def parse_run_ids(text: str) -> list[int]:
    """"12,13" → [12, 13]; anything that is not a short list of ids gives none (no banner, never an error)."""
    ids = [object_id(part) for part in text.split(",")]
    if len(ids) > MAX_RUNS or None in ids:
        return []
    return list(dict.fromkeys(pk for pk in ids if pk is not None))


def banner_runs(run_ids: list[int], *, project: Project) -> list[Run]:
    """The project's runs a banner follows, with what it names: the rubric, the version, the dataset, a drift
    check. Another project's run is left out, as one that does not exist."""
    runs = project_runs(project=project).filter(pk__in=run_ids)
    runs = runs.select_related("config__rubric", "dataset", "drift_check")
    return list(runs.order_by("pk"))
