"""Emails: plain text + HTML, the ticket's summary as the ticket page shows it, and links (the
ticket page; for deciders, signed one-tap approve/reject links)."""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import escape

from agents_app.summaries import ticket_summary as args_summary
from approvals.forms import fits_schema
from approvals.selectors import approval_refusal
from approvals.services import PastDue, approve_payload, reject_payload
from approvals.templatetags.approvals_tags import edit_note, items_readable, tool_label

from . import links
from .models import ApprovalLink, Delivery
from .outcome import Outcome, closed_before_sending
from .selectors import preferences_for, unwanted_reason

SUBJECTS = {
    "ticket.opened": "Approval needed",
    "ticket.reminder": "Reminder: still waiting for you",
    "ticket.escalated": "Escalated to you",
    "ticket.decided": "Your request was {status}",
    "ticket.expired": "Your request expired",
}
INTROS = {
    "ticket.opened": "An agent is waiting for a person to decide.",
    "ticket.reminder": "This ticket is still waiting for a decision and is due soon.",
    "ticket.escalated": "This ticket was escalated to you: nobody has decided it yet.",
    "ticket.decided": "Your request was {status}{by}.",
    "ticket.expired": "Nobody decided your request in time: it expired and the agent was told.",
}


def ticket_summary(ticket: Any) -> dict[str, Any]:
    """What the ticket page's first card shows, as data for the email templates: the arguments an
    approval approves now (or approved), an approver's edit of them said (`edited`)."""
    rows = items_readable(ticket.current_args)
    question = ticket.hint if ticket.kind == "confirmation" else (ticket.args or {}).get("message", "")
    return {
        "id": ticket.pk,
        "tool": tool_label(ticket),
        "kind": ticket.get_kind_display(),
        "agent": ticket.app_name,
        "requester": ticket.requester,
        "summary": args_summary(ticket),
        "rows": rows,
        "edited": edit_note(ticket, 300),  # "edited by ann: amount $200.00 → $150.00", or ""
        "question": question if ticket.kind in ("confirmation", "input") else "",
        "options": (ticket.args or {}).get("options") or [] if ticket.kind == "choice" else [],
        "status": ticket.get_status_display(),
    }


def _absolute(path: str) -> str:
    return settings.ADKWEB_BASE_URL + path


# Stand-ins for a decider's own one-tap links while the bodies shared by an audience are rendered
# (`Rendered`): unchanged by HTML escaping, replaced by each person's URLs (escaped in the HTML). Random
# per process: a requester who wrote a stand-in into a ticket's arguments would otherwise see it turned
# into the decider's own approve link in the email, where it reads as part of the request.
_MARK = secrets.token_hex(16)
APPROVE_MARK = f"adkweb-one-tap-approve-{_MARK}"
REJECT_MARK = f"adkweb-one-tap-reject-{_MARK}"


class Rendered(dict[tuple, tuple[str, str, str]]):
    """The bodies of a batch's emails, rendered once per ticket, event and audience (`_bodies`): a
    ticket's three deciders get the same text but for their own one-tap links, put in after."""


def _bodies(delivery: Delivery, link: Any, rendered: Rendered | None) -> tuple[str, str, str]:
    """(subject, text, HTML) of this delivery's email, the links stand-ins (`APPROVE_MARK`)."""
    ticket, event = delivery.ticket, delivery.event
    assert ticket is not None, "email deliveries are about a ticket"
    template = "notifications/email/ticket" if delivery.role == "decider" else "notifications/email/outcome"
    # Everything the templates show: the link's expiry only to the minute ("Y-m-d H:i T").
    expires = link.expires_at.replace(second=0, microsecond=0) if link else None
    shown = (ticket.status, ticket.args_hash, ticket.edited_by_id, ticket.closed_by_id)  # its arguments' editor too
    key = (event.pk, event.name, ticket.pk, *shown, template, expires)
    found = rendered.get(key) if rendered is not None else None
    if found is not None:
        return found
    status = ticket.get_status_display()
    by = f" by {ticket.closed_by_label}" if ticket.closed_by_label else ""
    ctx = {
        "ticket": ticket_summary(ticket),
        "intro": INTROS.get(event.name, event.name).format(status=status, by=by),
        "comment": (event.data or {}).get("comment", ""),
        "ticket_url": _absolute(reverse("approvals:ticket", args=[ticket.pk])),
        "conversation_url": _absolute(f"/sessions/{ticket.session_id}/"),
        "approve_url": APPROVE_MARK if link else "",
        "reject_url": REJECT_MARK if link else "",
        "expires_at": link.expires_at if link else None,
        "preferences_url": _absolute(reverse("notifications:preferences")),
    }
    subject = f"{SUBJECTS.get(event.name, event.name).format(status=status)}: #{ticket.pk} {ctx['ticket']['tool']}"
    if ctx["ticket"]["summary"]:
        subject += f" — {ctx['ticket']['summary']}" + (" (edited)" if ctx["ticket"]["edited"] else "")
    found = (subject[:200], render_to_string(f"{template}.txt", ctx), render_to_string(f"{template}.html", ctx))
    if rendered is not None:
        rendered[key] = found
    return found


def email_message(
    delivery: Delivery, link: Any = None, connection: Any = None, rendered: Rendered | None = None
) -> EmailMultiAlternatives:
    """The message for one delivery (one-tap links only when a link is given), sent through
    `connection` (a new one, with EMAIL_TIMEOUT, when none is given). `rendered`: the batch's bodies
    so far, by ticket and audience (rendered once each)."""
    ticket, event = delivery.ticket, delivery.event
    assert ticket is not None, "email deliveries are about a ticket"
    subject, text, html = _bodies(delivery, link, rendered)
    if link:
        approve, reject = links.link_url(link, "approve"), links.link_url(link, "reject")
        text = text.replace(APPROVE_MARK, approve).replace(REJECT_MARK, reject)
        html = html.replace(APPROVE_MARK, escape(approve)).replace(REJECT_MARK, escape(reject))
    message = EmailMultiAlternatives(
        subject=subject,
        body=text,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[delivery.target],
        headers={
            # One thread per ticket in mail clients; the delivery id lets an admin find the row.
            "References": f"<ticket-{ticket.pk}@adkweb>",
            "X-Adkweb-Delivery": str(delivery.uuid),
            "X-Adkweb-Event": event.name,
        },
        connection=connection or email_connection(),
    )
    message.attach_alternative(html, "text/html")
    return message


def email_connection() -> Any:
    """A connection to the mail server (opened when first used), with EMAIL_TIMEOUT."""
    return get_connection(timeout=settings.EMAIL_TIMEOUT)


def email_prepare(delivery: Delivery, prefs: dict[int, Any] | None = None) -> Outcome | ApprovalLink | None:
    """Whether this email still goes out: a skip `Outcome` (the ticket closed, no longer theirs to
    decide, preferences changed since it was queued), or the fresh one-tap link it carries (a
    decider's, while the ticket can take one), or None (no link). Writes the link: call it in the
    transaction that claims the delivery, so a link exists only for an email being sent. `prefs`:
    the recipients' saved preferences by user id, read for a batch (`preferences_of`)."""
    ticket, person = delivery.ticket, delivery.recipient
    if ticket is None or person is None:
        return Outcome.skip("The ticket or the person no longer exists.")
    if delivery.role == "decider":  # opened, reminder, escalated: a call to act, stale once it is not
        if ticket.is_closed:
            return Outcome.skip(closed_before_sending(ticket))
        refusal = approval_refusal(person, ticket)
        if refusal:  # its routing, four-eyes, or their approval already counts (M of N)
            return Outcome.skip(f"No longer theirs to decide: {refusal}")
        if ticket.past_due:  # nobody decides it now (nor could its link: links.link_create refuses one)
            return Outcome.skip(f"No longer anyone's to decide: {PastDue(ticket)}")
    pref = prefs.get(person.pk) if prefs is not None else preferences_for(person)
    unwanted = unwanted_reason(person, delivery.role, pref, ticket=ticket)
    if unwanted:  # preferences changed since the email was queued (a retry hours later)
        return Outcome.skip(unwanted)
    if delivery.role == "decider":
        if fits_schema(ticket, approve_payload(ticket)) and fits_schema(ticket, reject_payload(ticket, "reason")):
            return links.link_create(ticket=ticket, user=person)
    return None


def email_deliver(
    delivery: Delivery, link: ApprovalLink | None, connection: Any = None, rendered: Rendered | None = None
) -> Outcome:
    """Send one prepared email; its link is deleted if it could not be sent (no live link for it)."""
    assert delivery.recipient is not None, "a prepared email has a recipient"
    delivery.target = delivery.recipient.email or delivery.target
    try:
        email_message(delivery, link, connection, rendered).send(fail_silently=False)
    except Exception:
        if link is not None:
            link.delete()
        raise
    return Outcome(ok=True)
