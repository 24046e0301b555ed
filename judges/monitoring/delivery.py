"""Delivering a monitor's messages to its project's channels (docs/monitoring.md, "Messages")."""

from __future__ import annotations

from judges.models import Channel, Delivery, MonitorMessage


def deliveries_create(*, message: MonitorMessage) -> list[Delivery]:
    """One delivery of the message per channel of its project, due now."""
    channels = Channel.objects.filter(project_id=message.monitor.project_id)
    return Delivery.objects.bulk_create([Delivery(message=message, channel=channel) for channel in channels])
