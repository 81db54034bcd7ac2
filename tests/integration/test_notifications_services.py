"""Notifications in services mode: PostgreSQL, Redis, the agents worker subprocess opening the
ticket, and a separate `celery worker -Q notifications` subprocess (as the Procfile runs it)
sending the email through a real SMTP server and the webhook to a real receiver that fails twice."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from agents_app import services as agent_services
from approvals.models import PendingCall
from notifications.models import Delivery, WebhookEndpoint
from tests.integration.conftest import ROOT, _wait_ready
from tests.notifications.conftest import SmtpSink, free_port, webhook_receiver  # noqa: F401  (fixture)

SECRET = "whsec-integration-0123456789"


@pytest.fixture
def smtp_sink():
    from aiosmtpd.controller import Controller

    sink, port = SmtpSink(), free_port()
    controller = Controller(sink, hostname="127.0.0.1", port=port)
    controller.start()
    yield sink, port
    controller.stop()


@pytest.fixture
def notifications_worker(worker, smtp_sink):
    """`celery -A adkweb worker -Q notifications` on the test database, pointed at the SMTP sink."""
    import redis

    redis.Redis.from_url(settings.REDIS_URL).delete("notifications")  # earlier tests' messages
    db = settings.DATABASES["default"]
    host = f"{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER'] or 'postgres'}@{host}/{db['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "ADKWEB_WEBHOOK_ALLOW_PRIVATE": "1",  # the receiver is on 127.0.0.1
        "DJANGO_SETTINGS_MODULE": "adkweb.settings",
        "ADKWEB_EMBEDDED_WORKER": "0",
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(smtp_sink[1]),
        "ADKWEB_NOTIFY_RETRY_DELAYS": "0.5,0.5,0.5,0.5,0.5",
        "ADKWEB_BASE_URL": "https://adkweb.example.com",
        "PYTHONPATH": str(ROOT),
    }
    log = Path(ROOT / f".celery-notify-{os.getpid()}.log")
    with open(log, "w") as out:
        args = ["-Q", "notifications", "--concurrency", "2", "-n", f"notify-{os.getpid()}@%h"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "adkweb", "worker", *args, "--loglevel", "INFO"]
            + ["--without-gossip", "--without-mingle", "--without-heartbeat"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        _wait_ready(proc, log)
        yield proc
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    log.unlink(missing_ok=True)


def test_ticket_opened_by_the_agents_worker_is_emailed_and_webhooked_by_the_notifications_worker(
    demo,
    notifications_worker,
    smtp_sink,
    webhook_receiver,  # noqa: F811  (the fixture imported above)
    wait,
):
    receiver = webhook_receiver(SECRET, fail_first=2)
    WebhookEndpoint.objects.create(url=receiver.url, secret=SECRET, events=["ticket.opened"])
    session = agent_services.session_create(app_name="reimbursement_agent", user_id="requester")
    agent_services.message_send(session=session, text="Please reimburse 200$ for meals", streaming=False)

    call = wait(lambda: PendingCall.objects.filter(session=session).first(), what="the ticket")
    sink, _ = smtp_sink
    # Every eligible decider, once (the three go out together, in the fan-out's own task).
    messages = wait(lambda: len(sink.messages) >= 3 and sink.messages, what="the emails", timeout=30)
    assert sorted(m["To"] for m in messages) == ["admin@example.com", "approver2@example.com", "approver@example.com"]
    parts = {p.get_content_type(): p.get_content() for p in messages[0].walk() if not p.is_multipart()}
    assert set(parts) == {"text/plain", "text/html"}
    assert f"https://adkweb.example.com/tickets/{call.pk}/" in parts["text/plain"]
    assert "https://adkweb.example.com/a/" in parts["text/plain"] and "meals" in parts["text/html"]

    hits = receiver.wait_for(3, timeout=30)
    assert [h.status for h in hits] == [503, 503, 204] and all(h.signature_ok for h in hits)
    assert hits[0].json["ticket"]["id"] == call.pk and hits[0].json == hits[2].json
    hook = wait(lambda: Delivery.objects.filter(channel="webhook", status="delivered").first(), what="delivered")
    assert list(hook.attempt_log.values_list("ok", flat=True)) == [False, False, True]
