"""A ticket's emails are rendered once per ticket and audience (not once per recipient), and its
deciders' emails are claimed in the transaction that wrote them. Pinned here: each decider still gets
exactly one email, whose text and HTML are what rendering it for them alone gives, with their own
one-tap links (never another's, never the stand-ins); and a ticket decided between the fan-out's
reads and its transaction is emailed to nobody (the claim reads the ticket again)."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.core import mail, signing
from django.db import connection
from django.template.loader import render_to_string
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals.models import PendingCall
from approvals.services import ticket_approve
from notifications import emails as emails_module
from notifications import links, services, tasks
from notifications.models import ApprovalLink, Delivery, NotificationEvent
from tests.approvals_factories import ticket

pytestmark = pytest.mark.django_db(transaction=True)
APPROVERS = ["admin@example.com", "approver2@example.com", "approver@example.com"]


@pytest.fixture
def no_tasks(monkeypatch) -> None:
    from adkweb.celery import app

    monkeypatch.setattr(app, "send_task", lambda *args, **kwargs: None)


def _alone(delivery: Delivery, link: ApprovalLink) -> tuple[str, str]:
    """The text and HTML of this decider's email rendered for them alone, their links in the context."""
    t = delivery.ticket
    ctx: dict[str, Any] = {
        "ticket": emails_module.ticket_summary(t),
        "intro": emails_module.INTROS["ticket.opened"],
        "comment": "",
        "ticket_url": settings.ADKWEB_BASE_URL + reverse("approvals:ticket", args=[t.pk]),
        "conversation_url": f"{settings.ADKWEB_BASE_URL}/sessions/{t.session_id}/",
        "approve_url": links.link_url(link, "approve"),
        "reject_url": links.link_url(link, "reject"),
        "expires_at": link.expires_at,
        "preferences_url": settings.ADKWEB_BASE_URL + reverse("notifications:preferences"),
    }
    return render_to_string("notifications/email/ticket.txt", ctx), render_to_string(
        "notifications/email/ticket.html", ctx
    )


def test_each_decider_gets_one_email_with_their_own_links_rendered_once_for_all(emails, no_tasks, monkeypatch):
    # Characters that HTML escapes, in what the email shows: the shared HTML is escaped once, right.
    event = NotificationEvent.objects.create(
        name="ticket.opened", ticket=ticket(args={"purpose": 'meals <b>& "drinks"</b>', "amount": 200.0})
    )
    renders: list[str] = []
    render = emails_module.render_to_string

    def counted(name: str, ctx: dict) -> str:
        renders.append(name)
        return render(name, ctx)

    monkeypatch.setattr(emails_module, "render_to_string", counted)
    # A link's token is signed with the time to the second: each one made once, so the reference is exact.
    tokens: dict[tuple[int, str], str] = {}
    signed = links.link_token
    monkeypatch.setattr(links, "link_token", lambda link, a: tokens.setdefault((link.pk, a), signed(link, a)))
    tasks.event_fan_out(event.pk)

    assert sorted(m.to[0] for m in mail.outbox) == APPROVERS  # one each
    assert sorted(renders) == ["notifications/email/ticket.html", "notifications/email/ticket.txt"]  # once for 3
    for message in mail.outbox:
        delivery = Delivery.objects.select_related("ticket", "recipient").get(target=message.to[0])
        assert (delivery.status, delivery.attempts) == ("delivered", 1)
        link = ApprovalLink.objects.get(user=delivery.recipient)  # their own, one each
        text, html = _alone(delivery, link)
        assert message.body == text
        assert message.alternatives[0].content == html
        assert "&lt;b&gt;&amp; &quot;drinks&quot;" in html and '<b>& "drinks"</b>' in text
        for action in ("approve", "reject"):
            token = links.link_url(link, action).rstrip("/").rsplit("/", 1)[1]
            assert signing.loads(token, salt=links.SALT)["u"] == delivery.recipient_id
            assert links.link_url(link, action) in text and links.link_url(link, action) in html
        assert emails_module.APPROVE_MARK not in text + html and emails_module.REJECT_MARK not in text + html
        assert "adkweb-one-tap" not in message.subject


def test_the_fan_out_claims_its_emails_in_the_transaction_that_writes_them(emails, no_tasks):
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=ticket())
    with CaptureQueriesContext(connection) as queries:
        tasks.event_fan_out(event.pk)
    sql = [q["sql"] for q in queries.captured_queries]
    assert len([s for s in sql if s.startswith("BEGIN")]) == 2, sql  # fan-out + claim, then the record
    begin, commit = next(i for i, s in enumerate(sql) if s.startswith("BEGIN")), sql.index("COMMIT")
    written = sql[begin:commit]
    assert any(s.startswith("INSERT") and "notifications_delivery" in s for s in written)
    assert any(s.startswith("UPDATE") and "notifications_delivery" in s and "RETURNING" in s for s in written)
    assert len(mail.outbox) == 3


def test_a_ticket_decided_after_the_fan_outs_reads_is_emailed_to_nobody(emails, no_tasks, monkeypatch):
    """The fan-out read the ticket open; it was decided before the transaction that claims the emails."""
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=ticket())
    plan = services._fan_out_plan

    def decided_meanwhile(event_id: int):
        rows = plan(event_id)
        ticket_approve(ticket=PendingCall.objects.get(pk=event.ticket_id), actor=emails["approver"])
        return rows

    monkeypatch.setattr(services, "_fan_out_plan", decided_meanwhile)
    tasks.event_fan_out(event.pk)
    assert mail.outbox == [] and not ApprovalLink.objects.exists()
    rows = Delivery.objects.filter(event=event, channel="email")
    assert rows.count() == 3 and {(d.status, d.attempts) for d in rows} == {("skipped", 1)}
    assert all("approved before the email went out" in d.last_error.lower() for d in rows), [d.last_error for d in rows]


def test_the_one_tap_stand_ins_cannot_be_written_into_a_ticket_by_its_requester():
    """The emails' stand-ins for each decider's links are replaced after rendering, arguments and all:
    a requester who could write one into a ticket's arguments would have the approver's own approve
    link shown there. They are random per process, so nobody can know them from the source."""
    import subprocess
    import sys

    code = (
        "import django; django.setup(); from notifications import emails; "
        "print(emails.APPROVE_MARK, emails.REJECT_MARK)"
    )
    seen = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        for _ in range(2)
    }
    assert len(seen) == 2, seen
    assert f"{emails_module.APPROVE_MARK} {emails_module.REJECT_MARK}" not in seen
