"""Messages to channels (judges/monitoring/delivery.py): through a real SMTP server (aiosmtpd) and to a real HTTP
receiver that checks the signature as docs/monitoring.md tells receivers to; retried with backoff; the log holds
answers, never the address or the secret. And what makes a message: a sure drop, once."""

import hashlib
import hmac
import json
import socket
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aiosmtpd.controller import Controller
from django.utils import timezone

from judges.models import Delivery, MonitorMessage
from judges.monitoring.delivery import channel_create, delivery_attempt
from judges.monitoring.services import message_add, monitor_create, monitor_tick
from tests.judges.monitoring.factories import fabricated_windows, observed

SECRET = "whsec-test-only-0123456789"
TOLERANCE_S = 300


def verify(header: str, body: bytes, secret: str, now: float) -> bool:
    """What a receiver does (docs/monitoring.md): parse t and v1, reject a stale t, compare in constant time."""
    parts = dict(item.split("=", 1) for item in header.split(","))
    at = int(parts["t"])
    if abs(now - at) > TOLERANCE_S:
        return False
    expected = hmac.new(secret.encode(), f"{at}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, parts["v1"])


class Receiver(BaseHTTPRequestHandler):
    received: list = []
    fail_first = 0

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if Receiver.fail_first > 0:
            Receiver.fail_first -= 1
            self.send_response(503)
            self.end_headers()
            self.wfile.write(b"busy")
            return
        ok = verify(self.headers.get("X-Evalhub-Signature", "t=0,v1=x"), body, SECRET, time.time())
        Receiver.received.append((ok, json.loads(body)))
        self.send_response(204 if ok else 401)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver(settings):
    settings.EVALHUB_OUTBOUND_ALLOW_PRIVATE = True
    Receiver.received, Receiver.fail_first = [], 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()


class Inbox:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((envelope.rcpt_tos, envelope.content.decode()))
        return "250 OK"


@pytest.fixture
def smtp(settings):
    inbox = Inbox()
    with socket.socket() as probe:  # a free port: the controller checks its server by connecting to its port
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    settings.MAILERS = {"default": {"BACKEND": "django.core.mail.backends.smtp.EmailBackend",
                                    "OPTIONS": {"host": "127.0.0.1", "port": port}}}
    yield inbox
    controller.stop()


@pytest.fixture
def monitor(db, project, lead):
    dataset, rubric, _ = observed(project=project, lead=lead)
    return monitor_create(project=project, slug="ships", rubric=rubric, dataset=dataset, by=lead)


def test_a_signed_webhook_reaches_a_receiver_that_checks_it_after_a_retry(monitor, lead, receiver, monkeypatch,
                                                                          django_capture_on_commit_callbacks):
    monkeypatch.setenv("EVALHUB_CHANNEL_HOOK_URL", receiver)
    monkeypatch.setenv("EVALHUB_CHANNEL_HOOK_SECRET", SECRET)
    channel_create(project=monitor.project, name="ops", kind="webhook", url_env="EVALHUB_CHANNEL_HOOK_URL",
                   secret_env="EVALHUB_CHANNEL_HOOK_SECRET", by=lead)
    Receiver.fail_first = 1
    with django_capture_on_commit_callbacks(execute=False):
        message = message_add(monitor=monitor, kind="pause", key="pause:1", subject="ships: judging paused",
                              body="The provider could not answer.")
    [delivery] = Delivery.objects.filter(message=message)
    assert delivery_attempt(delivery_id=delivery.pk) == "pending"  # 503: tried again later
    delivery.refresh_from_db()
    assert delivery.next_at > timezone.now() + timedelta(seconds=30)  # backoff, not at once
    assert delivery_attempt(delivery_id=delivery.pk) is None  # not due yet
    assert delivery_attempt(delivery_id=delivery.pk, now=delivery.next_at) == "sent"
    [(verified, payload)] = Receiver.received
    assert verified and payload["subject"] == "ships: judging paused" and payload["monitor"] == "ships"
    delivery.refresh_from_db()
    assert [entry["ok"] for entry in delivery.log] == [False, True]
    logged = json.dumps(delivery.log)
    assert "503" in logged and "204" in logged
    assert SECRET not in logged and receiver not in logged


def test_a_wrong_secret_is_rejected_by_the_receiver(monitor, lead, receiver, monkeypatch):
    monkeypatch.setenv("EVALHUB_CHANNEL_HOOK_URL", receiver)
    monkeypatch.setenv("EVALHUB_CHANNEL_HOOK_SECRET", "not-the-receivers-secret")
    channel_create(project=monitor.project, name="ops", kind="webhook", url_env="EVALHUB_CHANNEL_HOOK_URL",
                   secret_env="EVALHUB_CHANNEL_HOOK_SECRET", by=lead)
    message = message_add(monitor=monitor, kind="cap", key="cap:1", subject="cap", body="cap")
    delivery = Delivery.objects.get(message=message)
    assert delivery_attempt(delivery_id=delivery.pk) == "pending"
    assert Receiver.received == [(False, Receiver.received[0][1])]


def test_an_email_goes_through_a_real_smtp_server(monitor, lead, smtp):
    channel_create(project=monitor.project, name="team", kind="email", addresses="ops@example.com, lead@example.com",
                   by=lead)
    message = message_add(monitor=monitor, kind="drift", key="drift:1", subject="ships: the judge drifted",
                          body="Recalibrate.")
    assert delivery_attempt(delivery_id=Delivery.objects.get(message=message).pk) == "sent"
    [(recipients, content)] = smtp.messages
    assert recipients == ["ops@example.com", "lead@example.com"]
    assert "Subject: ships: the judge drifted" in content and "Recalibrate." in content


def test_a_slack_webhook_gets_text(monitor, lead, receiver, monkeypatch):
    monkeypatch.setenv("EVALHUB_CHANNEL_SLACK", receiver)
    channel_create(project=monitor.project, name="slack", kind="slack", url_env="EVALHUB_CHANNEL_SLACK", by=lead)
    message = message_add(monitor=monitor, kind="cap", key="cap:2", subject="capped", body="covers 00:00–14:20")
    delivery_attempt(delivery_id=Delivery.objects.get(message=message).pk)
    [(_, payload)] = Receiver.received
    assert payload == {"text": "*capped*\ncovers 00:00–14:20"}


def test_a_sure_drop_sends_one_message(monitor, reviewer, django_capture_on_commit_callbacks):
    fabricated_windows(monitor=monitor, reviewer=reviewer, days=9, cases_per_day=1000,
                       rates=[0.8] * 7 + [0.55] * 2, judge_pass=lambda ok: 0.95 if ok else 0.4)
    monitor.baseline = [w.start.date().isoformat() for w in monitor.windows.order_by("start")[:7]]
    monitor.save(update_fields=["baseline"])
    monitor_tick(monitor_id=monitor.pk)
    drops = MonitorMessage.objects.filter(monitor=monitor, kind="drop")
    assert drops.filter(key__endswith=":the baseline").count() == 2
    assert "lower than the baseline" in drops.first().body
    monitor_tick(monitor_id=monitor.pk)
    assert MonitorMessage.objects.filter(monitor=monitor, kind="drop", key__endswith=":the baseline").count() == 2


def test_drift_on_a_windows_audit_labels_sends_one_message(monitor, reviewer):
    # A judge that passes 90 % of the failures of an agent at 60 %: agreement about 0.6 * 0.95 + 0.4 * 0.1 = 61 %
    # on each day's ~150 audit labels, surely below the 80 % floor.
    fabricated_windows(monitor=monitor, reviewer=reviewer, days=2, cases_per_day=1000, rates=[0.6, 0.6],
                       judge_pass=lambda ok: 0.95 if ok else 0.9)
    monitor_tick(monitor_id=monitor.pk)
    drifts = MonitorMessage.objects.filter(monitor=monitor, kind="drift")
    assert drifts.count() == 2 and "recalibrate" in drifts.first().body


def test_the_weekly_digest_is_sent_on_mondays_when_asked(monitor, reviewer):
    from datetime import UTC, datetime, timedelta

    monday = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
    fabricated_windows(monitor=monitor, reviewer=reviewer, days=3, cases_per_day=200, rates=[0.8] * 3,
                       judge_pass=lambda ok: 0.9 if ok else 0.3, start=monday - timedelta(days=3, hours=9))
    monitor_tick(monitor_id=monitor.pk, now=monday)
    assert not MonitorMessage.objects.filter(kind="digest").exists()  # not asked for
    monitor.digest = True
    monitor.save(update_fields=["digest"])
    monitor_tick(monitor_id=monitor.pk, now=monday + timedelta(days=1))  # a Tuesday: none
    assert not MonitorMessage.objects.filter(kind="digest").exists()
    monitor_tick(monitor_id=monitor.pk, now=monday)
    monitor_tick(monitor_id=monitor.pk, now=monday + timedelta(hours=1))
    [digest] = MonitorMessage.objects.filter(kind="digest")
    assert digest.body.count("corrected") == 3 and "2026-12-04" in digest.body
