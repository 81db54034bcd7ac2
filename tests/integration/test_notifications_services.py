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


def test_a_delivery_whose_worker_was_killed_in_its_last_attempt_says_failed_not_retrying_forever(
    demo,
    notifications_worker,
    webhook_receiver,  # noqa: F811  (the fixture imported above)
    wait,
):
    """The notifications worker is SIGKILLed inside a webhook's last attempt (its POST in flight: the
    receiver answers slowly). The sweeper hands back a delivery left 'sending' for 5 minutes to be tried
    again, but this one has no attempt left: it was set 'retrying' and no try ever claimed it (a claim
    takes only deliveries with attempts left), so the ticket page said 'retrying' for ever and every sweep
    sent it another task that did nothing. Now it is failed, saying why, and an admin may resend it."""
    from django.utils import timezone

    from notifications import services as notify
    from notifications.models import NotificationEvent
    from notifications.sending import delivery_attempt
    from tests.approvals_factories import ticket

    receiver = webhook_receiver(SECRET, sleep=8)
    hook = WebhookEndpoint.objects.create(url=receiver.url, secret=SECRET, events=["ticket.opened"])
    call = ticket()
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=call, fanned_out_at=timezone.now())
    delivery = Delivery.objects.create(  # its first try failed (a 503); its second and last is owed now
        event=event,
        ticket=call,
        channel="webhook",
        endpoint=hook,
        target=hook.url,
        payload={"id": "x"},
        status="retrying",
        attempts=1,
        max_attempts=2,
    )
    from adkweb.celery import app

    app.send_task("notifications.tasks.delivery_send", args=[delivery.pk])
    wait(lambda: Delivery.objects.filter(pk=delivery.pk, status="sending", attempts=2).exists(), what="its claim")
    notifications_worker.kill()  # SIGKILL, its POST in flight
    notifications_worker.wait()

    stale = timezone.now() - notify.STALE_SENDING - notify.SWEEP_GRACE
    Delivery.objects.filter(pk=delivery.pk).update(updated_at=stale)
    notify.notifications_sweep()
    assert delivery_attempt(delivery_id=delivery.pk) is None  # what the task the sweep sent does
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("failed", 2), delivery.status
    assert "stopped" in delivery.last_error and "may have" in delivery.last_error, delivery.last_error
    Delivery.objects.filter(pk=delivery.pk).update(updated_at=stale)
    sent = []
    app_send = app.send_task
    try:
        app.send_task = lambda name, args, **kw: sent.append((name, args))  # type: ignore[method-assign]
        notify.notifications_sweep()
    finally:
        app.send_task = app_send  # type: ignore[method-assign]
    assert ("notifications.tasks.delivery_send", (delivery.pk,)) not in sent
