"""Delivering a monitor's messages to its project's channels (docs/monitoring.md, "Messages").

A channel holds no secret: a webhook's URL and a signed webhook's secret live in environment variables of the
server whose names start EVALHUB_CHANNEL_, and the channel names them (as a judge config names its key), so no
page, log or database row ever holds them. E-mail goes through Django's mail (SMTP from the environment).
Every attempt is logged on the delivery with the receiver's status and answer (never the URL or the secret);
a failed one is tried again with exponential backoff, for at most a day.

A signed webhook carries `X-Evalhub-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">` keyed with
the secret; a receiver recomputes it over the raw body and rejects a stale t (docs/monitoring.md).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import smtplib
import time
from datetime import datetime, timedelta

import httpx
from celery import signature
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from evalhub import outbound
from judges.models import Channel, Delivery, MonitorMessage

DELIVER_TASK = "judges.monitor_deliver"  # judges.monitoring.tasks.deliver_due
CHANNEL_ENV_PREFIX = "EVALHUB_CHANNEL_"
_ENV_NAME = re.compile(r"^EVALHUB_CHANNEL_[A-Z0-9_]{1,80}$")
GIVE_UP_AFTER = timedelta(days=1)
FIRST_BACKOFF_S, MAX_BACKOFF_S = 60.0, 3600.0
LEASE = timedelta(minutes=2)
SIGNATURE_HEADER = "X-Evalhub-Signature"


class ChannelError(ValueError):
    """A channel that cannot be saved as asked; the message says why."""


def channel_create(*, project, name: str, kind: str, addresses: str = "", url_env: str = "", secret_env: str = "",
                   by) -> Channel:
    """A channel of the project. E-mail needs addresses; a webhook the name of the variable holding its URL, a
    signed webhook also the one holding its secret: names only, each starting EVALHUB_CHANNEL_."""
    if by is None or not by.leads(project.pk):
        raise ChannelError("Only a lead of the project may add channels.")
    if kind not in Channel.Kind.values:
        raise ChannelError(f"The kind must be one of {', '.join(Channel.Kind.values)}.")
    addresses = ", ".join(a.strip() for a in addresses.split(",") if a.strip())
    if kind == Channel.Kind.EMAIL:
        if not addresses or any("@" not in a for a in addresses.split(", ")):
            raise ChannelError("An e-mail channel needs one or more addresses, comma-separated.")
        url_env = secret_env = ""
    else:
        for label, value in (("URL", url_env), ("secret", secret_env)):
            if (value or label == "URL" or kind == Channel.Kind.WEBHOOK) and not _ENV_NAME.match(value):
                raise ChannelError(f"Name the environment variable holding the webhook's {label}: a name starting "
                                   f"{CHANNEL_ENV_PREFIX} (capitals, digits, _), set on the server. The value itself "
                                   "is never typed here.")
        addresses = ""
    return Channel.objects.create(project=project, name=name, kind=kind, addresses=addresses, url_env=url_env,
                                  secret_env=secret_env, created_by=by)


def deliveries_create(*, message: MonitorMessage) -> list[Delivery]:
    """One delivery of the message per channel of its project, due now; queued once the transaction commits."""
    channels = Channel.objects.filter(project_id=message.monitor.project_id)
    made = Delivery.objects.bulk_create([Delivery(message=message, channel=channel) for channel in channels])
    if made:  # by task name: the tasks module imports this one
        transaction.on_commit(lambda: signature(DELIVER_TASK).delay())
    return made


def signed_header(secret: str, body: bytes, at: int) -> str:
    digest = hmac.new(secret.encode(), f"{at}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={at},v1={digest}"


def _payload(message: MonitorMessage) -> dict:
    monitor = message.monitor
    return {"project": monitor.project.slug, "monitor": monitor.slug, "kind": message.kind, "subject": message.subject,
            "body": message.body, "at": message.created_at.isoformat()}


def _send(channel: Channel, message: MonitorMessage) -> tuple[bool, str]:
    """One attempt: (delivered, what the receiver answered, for the log)."""
    if channel.kind == Channel.Kind.EMAIL:
        try:
            send_mail(message.subject, message.body, None, channel.addresses.split(", "))
        except (OSError, smtplib.SMTPException) as error:
            return False, f"mail server: {type(error).__name__}"
        return True, "accepted by the mail server"
    url = os.environ.get(channel.url_env, "")
    if not url:
        return False, f"the variable {channel.url_env} is not set on the server"
    if channel.kind == Channel.Kind.SLACK:
        body = json.dumps({"text": f"*{message.subject}*\n{message.body}"}).encode()
        headers = {"Content-Type": "application/json"}
    else:
        secret = os.environ.get(channel.secret_env, "")
        if not secret:
            return False, f"the variable {channel.secret_env} is not set on the server"
        body = json.dumps(_payload(message)).encode()
        headers = {"Content-Type": "application/json", SIGNATURE_HEADER: signed_header(secret, body, int(time.time()))}
    try:
        answer = outbound.post(url, body, headers)
    except outbound.OutboundRefused as refused:
        return False, f"refused: {refused}"
    except httpx.HTTPError as error:
        return False, f"no answer: {type(error).__name__}"
    return 200 <= answer.status < 300, f"HTTP {answer.status}: {answer.body[:500]}"


def _backoff(attempts: int) -> timedelta:
    return timedelta(seconds=min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** max(0, attempts - 1)))


def delivery_attempt(*, delivery_id: int, now: datetime | None = None) -> str | None:
    """Claim a due delivery (a lease, so two workers never send it together), send it outside any transaction,
    log the answer, and settle it: sent, due again after a backoff, or failed after a day. Its new status, or
    None when it was not due or taken."""
    now = now or timezone.now()
    claimed = Delivery.objects.filter(pk=delivery_id, status=Delivery.Status.PENDING, next_at__lte=now).exclude(
        lease_until__gt=now).update(lease_until=now + LEASE)
    if not claimed:
        return None
    delivery = Delivery.objects.select_related("channel", "message__monitor__project").get(pk=delivery_id)
    delivered, answer = _send(delivery.channel, delivery.message)
    attempts = delivery.attempts + 1
    at = timezone.now()
    if delivered:
        status = Delivery.Status.SENT
    elif at - delivery.message.created_at >= GIVE_UP_AFTER:
        status = Delivery.Status.FAILED
    else:
        status = Delivery.Status.PENDING
    delivery.log = [*delivery.log, {"at": at.isoformat(), "ok": delivered, "answer": answer}]
    Delivery.objects.filter(pk=delivery.pk).update(status=status, attempts=attempts, log=delivery.log,
                                                   next_at=at + _backoff(attempts), lease_until=None)
    return status


def deliveries_due(*, now: datetime | None = None) -> list[int]:
    now = now or timezone.now()
    return list(Delivery.objects.filter(status=Delivery.Status.PENDING, next_at__lte=now).exclude(
        lease_until__gt=now).order_by("next_at").values_list("pk", flat=True)[:200])
