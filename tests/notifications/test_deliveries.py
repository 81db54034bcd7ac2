"""Who is told what, the outbox (recorded with the change, sent after commit), delivery status on
the ticket page, resend, preferences, and the Celery queue every notification task runs on."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.core import mail
from django.db import transaction

from approvals import services as approvals
from approvals.models import PendingCall
from notifications import services
from notifications.models import Delivery, NotificationEvent, NotificationPreference, WebhookEndpoint
from tests.approvals_factories import session_for, ticket


def _fan_out(event: NotificationEvent) -> list[Delivery]:
    services.event_fan_out(event_id=event.pk)
    return list(Delivery.objects.filter(event=event).order_by("target"))


def test_ticket_opened_emails_every_eligible_approver_by_their_preferences(emails):
    third = User.objects.create_user("carol", email="carol@example.com")
    third.groups.add(Group.objects.get(name="approvers"))
    User.objects.create_user("dave", email="dave@example.com", is_active=False).groups.add(
        Group.objects.get(name="approvers")
    )
    User.objects.create_user("nomail").groups.add(Group.objects.get(name="approvers"))
    call = ticket()
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=call)
    everyone = ["admin@example.com", "approver2@example.com", "approver@example.com", "carol@example.com"]
    assert [d.target for d in _fan_out(event)] == everyone

    NotificationPreference.objects.create(user=third, email_enabled=False)
    # admin is a superuser and a member of approvers; "only my groups" keeps them, but not a bare superuser.
    NotificationPreference.objects.create(user=emails["admin"], only_my_groups=True)
    boss = User.objects.create_superuser("boss", email="boss@example.com", password="x")
    NotificationPreference.objects.create(user=boss, only_my_groups=True)
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=ticket())
    assert [d.target for d in _fan_out(event)] == ["admin@example.com", "approver2@example.com", "approver@example.com"]


def test_decided_emails_the_requester_unless_they_decided_it_themselves(emails):
    call = ticket()
    approvals.ticket_approve(ticket=call, actor=emails["approver"])
    event = NotificationEvent.objects.get(name="ticket.decided", ticket=call)
    assert event.data == {"status": "approved", "by": "approver", "comment": ""}
    assert [(d.target, d.role) for d in _fan_out(event)] == [("requester@example.com", "requester")]
    own = ticket(session=session_for(user_id="admin"))
    approvals.ticket_approve(ticket=own, actor=emails["admin"])
    assert _fan_out(NotificationEvent.objects.get(name="ticket.decided", ticket=own)) == []


def test_fan_out_is_idempotent(emails):
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=ticket())
    first = services.event_fan_out(event_id=event.pk)
    NotificationEvent.objects.filter(pk=event.pk).update(fanned_out_at=None)  # as if it crashed before saying so
    assert services.event_fan_out(event_id=event.pk) == first and Delivery.objects.count() == 3  # 3 approvers


def test_events_are_recorded_with_the_change_and_vanish_with_a_rollback(demo):
    call = ticket()
    with pytest.raises(RuntimeError), transaction.atomic():
        services.notify("ticket.expired", ticket=call)
        raise RuntimeError("the caller's transaction fails")
    assert not NotificationEvent.objects.exists()
    with pytest.raises(ValueError):
        services.notify("ticket.exploded", ticket=call)


def test_nothing_is_sent_from_the_request(demo, client, django_capture_on_commit_callbacks):
    call = ticket()
    client.force_login(demo["approver"])
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert client.post(f"/tickets/{call.pk}/approve/").status_code == 302
    assert NotificationEvent.objects.filter(name="ticket.decided").count() == 1
    assert Delivery.objects.count() == 0 and mail.outbox == []  # fan-out is a Celery task, after commit
    assert callbacks


def test_a_broken_broker_at_commit_does_not_break_the_decision(
    demo, client, monkeypatch, django_capture_on_commit_callbacks
):
    from adkweb.celery import app

    def down(*args, **kwargs):
        raise ConnectionError("broker down")

    monkeypatch.setattr(app, "send_task", down)
    call = ticket()
    client.force_login(demo["approver"])
    with django_capture_on_commit_callbacks(execute=True):  # commit hooks run, as after a real request
        r = client.post(f"/tickets/{call.pk}/approve/")
    assert r.status_code == 302 and PendingCall.objects.get(pk=call.pk).status == "approved"
    event = NotificationEvent.objects.get(name="ticket.decided")
    assert event.fanned_out_at is None  # owed: the sweeper sends it
    NotificationEvent.objects.filter(pk=event.pk).update(created_at=event.created_at.replace(year=2000))
    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, args, **kw: sent.append((name, args)))
    assert services.notifications_sweep() >= 1 and sent == [("notifications.tasks.event_fan_out", (event.pk,))]


def _delivered(event: NotificationEvent, **fields) -> Delivery:
    defaults = dict(event=event, ticket=event.ticket, status="delivered", attempts=1)
    return Delivery.objects.create(**{**defaults, **fields})


def test_ticket_page_says_who_was_notified_and_shows_rows_to_approvers(emails, client):
    call = ticket()
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=call, fanned_out_at="2026-01-01T00:00Z")
    for name in ("admin", "approver", "observer"):
        _delivered(event, channel="email", role="decider", recipient=emails[name], target=f"{name}@example.com")
    hook = WebhookEndpoint.objects.create(name="ops-pager", url="http://127.0.0.1:9/h?token=SECRET", secret="s" * 20)
    _delivered(event, channel="webhook", endpoint=hook, target=hook.url)
    client.force_login(emails["approver"])
    html = client.get(f"/tickets/{call.pk}/").content.decode()
    assert "emailed 3 approvers · webhook delivered" in html
    assert "ops-pager" in html and "token=SECRET" not in html, "a webhook's URL may hold a secret"
    assert "Resend" not in html
    client.force_login(emails["requester"])
    html = client.get(f"/tickets/{call.pk}/").content.decode()
    assert "emailed 3 approvers · webhook delivered" in html and "ops-pager" not in html


def test_ticket_page_shows_retrying_and_failed_and_admins_resend(emails, client, django_capture_on_commit_callbacks):
    call = ticket()
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=call)
    hook = WebhookEndpoint.objects.create(name="ops", url="http://127.0.0.1:9/h", secret="s" * 20)
    failed = _delivered(event, channel="webhook", endpoint=hook, target=hook.url, status="failed", attempts=6)
    _delivered(event, channel="email", role="decider", recipient=emails["approver"], target="a@x", status="retrying")
    client.force_login(emails["admin"])
    html = client.get(f"/tickets/{call.pk}/").content.decode()
    assert "1 email on the way · webhook failed" in html and "Resend" in html
    with django_capture_on_commit_callbacks(execute=False):
        r = client.post(f"/notifications/deliveries/{failed.pk}/resend/")
    assert r.status_code == 302 and r["Location"] == f"/tickets/{call.pk}/#ticket-status"
    failed.refresh_from_db()
    assert failed.status == "pending" and failed.max_attempts == 12 and failed.attempts == 6
    client.force_login(emails["approver"])
    assert client.post(f"/notifications/deliveries/{failed.pk}/resend/").status_code == 403


def test_preferences_page_saves_email_and_switches(demo, client):
    client.force_login(demo["approver"])
    page = client.get("/settings/notifications/").content.decode()
    assert 'value="approver@example.com"' in page and 'name="email_enabled" id="id_email_enabled" checked' in page
    r = client.post("/settings/notifications/", {"email": "me@example.org", "only_my_groups": "on"})
    assert r.status_code == 302
    prefs = NotificationPreference.objects.get(user=demo["approver"])
    assert (prefs.email_enabled, prefs.only_my_groups) == (False, True)
    assert User.objects.get(pk=demo["approver"].pk).email == "me@example.org"
    r = client.post("/settings/notifications/", {"email": "not an email"})
    assert r.status_code == 400 and "Enter a valid email address." in r.content.decode()


def test_every_notifications_task_runs_on_the_notifications_queue():
    from django.conf import settings

    from adkweb.celery import app

    app.loader.import_default_modules()
    ours = [name for name in app.tasks if name.startswith("notifications.")]
    assert set(ours) == {
        "notifications.tasks.event_fan_out",
        "notifications.tasks.delivery_send",
        "notifications.tasks.notifications_sweep",
    }
    for name in ours:
        assert app.amqp.router.route({}, name)["queue"].name == "notifications"
    # A worker started without -Q (the embedded and test workers) consumes both queues.
    assert [q.name for q in settings.CELERY_TASK_QUEUES] == ["agents", "notifications"]
    assert "sweep-owed-notifications" in settings.CELERY_BEAT_SCHEDULE


def test_admin_lists_deliveries_with_attempts_and_resends_them(emails, client, django_capture_on_commit_callbacks):
    from django.utils import timezone

    from notifications.models import DeliveryAttempt

    event = NotificationEvent.objects.create(name="ticket.opened", ticket=ticket())
    failed = _delivered(event, channel="email", role="decider", recipient=emails["approver"], target="a@x")
    Delivery.objects.filter(pk=failed.pk).update(status="failed", attempts=6, last_error="SMTP down")
    DeliveryAttempt.objects.create(delivery=failed, number=1, started_at=timezone.now(), ok=False, error="SMTP down")
    client.force_login(emails["admin"])
    listing = client.get("/admin/notifications/delivery/").content.decode()
    assert "SMTP down" in listing and "a@x" in listing
    page = client.get(f"/admin/notifications/delivery/{failed.pk}/change/").content.decode()
    assert "Delivery attempts" in page or "delivery attempt" in page.lower()
    with django_capture_on_commit_callbacks(execute=False):
        r = client.post(
            "/admin/notifications/delivery/", {"action": "resend", "_selected_action": [failed.pk]}, follow=True
        )
    assert "Resending 1 deliveries." in r.content.decode()
    assert Delivery.objects.get(pk=failed.pk).status == "pending"
    # Webhook endpoints: the secret is write-only in the admin too.
    hook = WebhookEndpoint.objects.create(name="ops", url="https://e.com/h", secret="topsecret-value-123", events=[])
    assert (
        "topsecret-value-123"
        not in client.get(f"/admin/notifications/webhookendpoint/{hook.pk}/change/").content.decode()
    )


def test_resend_needs_a_csrf_token(emails):
    from django.test import Client

    event = NotificationEvent.objects.create(name="ticket.opened", ticket=ticket())
    failed = _delivered(event, channel="email", role="decider", recipient=emails["approver"], target="a@x")
    Delivery.objects.filter(pk=failed.pk).update(status="failed")
    admin = Client(enforce_csrf_checks=True)
    admin.force_login(emails["admin"])
    admin.get("/settings/notifications/")  # the csrftoken cookie, as a browser would have it
    assert admin.post(f"/notifications/deliveries/{failed.pk}/resend/").status_code == 403
    assert Delivery.objects.get(pk=failed.pk).status == "failed"


def test_the_default_retry_schedule_is_six_tries_over_about_43_minutes(monkeypatch):
    """Tests shorten the delays; the shipped defaults are the issue's: ~10 s, 30 s, 2 min, 10 min, 30 min."""
    import importlib

    import adkweb.settings_notify

    monkeypatch.delenv("ADKWEB_NOTIFY_RETRY_DELAYS", raising=False)
    defaults = importlib.reload(adkweb.settings_notify)
    assert defaults.ADKWEB_NOTIFY_RETRY_DELAYS == [10.0, 30.0, 120.0, 600.0, 1800.0]
    assert defaults.ADKWEB_APPROVAL_LINK_SECONDS == 24 * 3600


def test_retry_delays_follow_the_schedule_with_ten_percent_jitter(settings):
    from notifications.sending import retry_delay

    settings.ADKWEB_NOTIFY_RETRY_DELAYS = [10.0, 30.0, 120.0, 600.0, 1800.0]
    for attempt, base in enumerate([10, 30, 120, 600, 1800, 1800], start=1):
        assert 0.9 * base <= retry_delay(attempt) <= 1.1 * base
