"""base.html's filter for banners that follow a run (judges.runs.banners)."""

from django import template

from judges.runs.banners import live_run_ids

register = template.Library()


@register.filter
def live_runs(message) -> str:
    """The runs a message follows, as the banner's query ("12,13"); "" for an ordinary message."""
    return ",".join(str(run_id) for run_id in live_run_ids(message.extra_tags))
