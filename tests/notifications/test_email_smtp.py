"""Email through a real SMTP server (aiosmtpd on a local port): an agent opens a ticket, every
eligible approver gets a message with a plain-text and an HTML part, and its links work over HTTP
against the live server (the one-tap link logged out: confirm page first, then one decision)."""

from __future__ import annotations

import re
from typing import Any

import httpx

from agents_app import services as agent_services
from agents_app.models import Turn
from approvals.models import PendingCall, Response
from notifications.models import ApprovalLink, Delivery

pytest_plugins = ["tests.conftest_live"]


def _parts(message: Any) -> dict[str, str]:
    return {part.get_content_type(): part.get_content() for part in message.walk() if not part.is_multipart()}


def _csrf(html: str) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)


def test_ticket_email_arrives_with_both_parts_and_working_links(emails, smtp_server, worker, live_asgi, settings, wait):
    settings.ADKWEB_BASE_URL = live_asgi.url
    session = agent_services.session_create(app_name="reimbursement_agent", user_id="requester")
    agent_services.message_send(session=session, text="Please reimburse 200$ for meals", streaming=False)

    messages = wait(lambda: len(smtp_server.messages) >= 3 and smtp_server.messages, what="three emails")
    call = PendingCall.objects.get(session=session)
    assert sorted(m["To"] for m in messages) == ["admin@example.com", "approver2@example.com", "approver@example.com"]
    message = next(m for m in messages if m["To"] == "approver@example.com")
    # Python folds a long non-ASCII subject after "Subject:"; unfolding leaves one leading space.
    assert message["Subject"].strip() == f"Approval needed: #{call.pk} ask_for_approval — meals · $200.00"
    parts = _parts(message)
    assert set(parts) == {"text/plain", "text/html"}
    text, html = parts["text/plain"], parts["text/html"]
    for body in (text, html):  # the ticket's summary, as the ticket page shows it
        assert "reimbursement_agent" in body and "requester" in body and "$200.00" in body and "meals" in body
    ticket_url = f"{live_asgi.url}/tickets/{call.pk}/"
    assert ticket_url in text and ticket_url in html
    approve_url = re.search(r"Approve: (\S+)", text).group(1)
    assert approve_url.startswith(f"{live_asgi.url}/a/") and f'href="{approve_url}"' in html

    with httpx.Client(follow_redirects=False, timeout=20) as browser:  # logged out, like a phone
        page = browser.get(ticket_url)
        assert page.status_code == 302 and "/accounts/login/" in page.headers["location"]
        page = browser.get(approve_url)
        assert page.status_code == 200 and "Approve ticket #" in page.text and "$200.00" in page.text
        assert PendingCall.objects.get(pk=call.pk).status == "pending", "a GET must never decide"
        done = browser.post(approve_url, data={"csrfmiddlewaretoken": _csrf(page.text)})
        assert done.status_code == 200 and "Approved. The agent is resuming." in done.text
        again = browser.post(approve_url, data={"csrfmiddlewaretoken": _csrf(page.text)})
        assert again.status_code == 410 and "already used" in again.text

    call.refresh_from_db()
    assert call.status == "approved" and call.closed_by.username == "approver"
    response = Response.objects.get(pending_call=call)
    assert response.actor.username == "approver" and response.action == "approve"
    assert ApprovalLink.objects.get(used_at__isnull=False).response == response
    wait(lambda: not Turn.objects.filter(session=session, status__in=["queued", "running"]).exists())
    # The requester was emailed the outcome too (not the approver: nobody hears of their own decision).
    outcome = wait(lambda: [m for m in smtp_server.messages if m["To"] == "requester@example.com"], what="outcome")
    assert outcome[0]["Subject"].strip().startswith(f"Your request was approved: #{call.pk}")
    assert "approved by approver" in _parts(outcome[0])["text/plain"]
    rows = Delivery.objects.filter(ticket=call, channel="email")
    wait(lambda: all(d.status == "delivered" for d in rows.all()), what="delivered rows")
    assert sorted(rows.values_list("target", "attempts")) == [
        ("admin@example.com", 1),
        ("approver2@example.com", 1),
        ("approver@example.com", 1),
        ("requester@example.com", 1),
    ]


def test_a_broken_smtp_server_neither_loses_nor_delays_a_decision(emails, worker, settings, client, wait):
    """SMTP refuses connections: the ticket still opens, the decision is answered at once, the agent
    resumes, and the email deliveries are kept, retrying, with the error on each attempt."""
    from tests.notifications.conftest import free_port

    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", free_port()  # nothing listens there
    settings.ADKWEB_NOTIFY_RETRY_DELAYS = [60.0]
    session = agent_services.session_create(app_name="reimbursement_agent", user_id="requester")
    agent_services.message_send(session=session, text="Please reimburse 200$ for meals", streaming=False)
    call = wait(lambda: PendingCall.objects.filter(session=session).first(), what="the ticket")
    failed = wait(lambda: list(Delivery.objects.filter(ticket=call, status="retrying")) or None, what="failed attempts")
    assert "Connection refused" in failed[0].last_error and failed[0].attempt_log.get().ok is False

    client.force_login(emails["approver"])
    r = client.post(f"/tickets/{call.pk}/approve/", {"approve-comment": ""})
    assert r.status_code == 302
    assert PendingCall.objects.get(pk=call.pk).status == "approved"
    wait(lambda: "Done: I reimbursed $200.00 for meals." in str(list(session.events.values_list("data", flat=True))))
