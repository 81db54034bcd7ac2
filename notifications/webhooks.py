"""Webhook payloads (adkweb JSON or Slack's text + blocks), the HMAC signature, and one POST."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from typing import Any

from django.conf import settings
from django.urls import reverse

from adkweb.api import iso

from . import webhook_urls
from .models import Delivery, NotificationEvent, WebhookEndpoint
from .outcome import Outcome

SIGNATURE_HEADER = "X-Adkweb-Signature"
USER_AGENT = "adkweb-webhooks/1"


def absolute(path: str) -> str:
    return settings.ADKWEB_BASE_URL + path


def sign(secret: str, body: bytes) -> str:
    """`sha256=<hex HMAC-SHA256 of the exact body bytes with the endpoint's secret>`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def body_bytes(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def ticket_data(ticket: Any) -> dict[str, Any]:
    """The ticket as the payload shows it: enough to act on without calling back."""
    from agents_app.summaries import ticket_summary as args_summary
    from approvals.templatetags.approvals_tags import edit_note, tool_label

    return {
        "id": ticket.pk,
        "url": absolute(reverse("approvals:ticket", args=[ticket.pk])),
        "api_url": absolute(reverse("approvals_api:pending-call", args=[ticket.pk])),
        "kind": ticket.kind,
        "status": ticket.status,
        "agent": ticket.app_name,
        "tool": tool_label(ticket),
        "summary": args_summary(ticket),  # the arguments an approval approves now: an approver's edit
        "edited": edit_note(ticket, 300) or None,  # "edited by ann: amount $200.00 → $150.00"
        "args": ticket.args,  # as the agent sent them
        "edited_args": ticket.edited_args,
        "edited_by": ticket.edited_by_name,
        "requester": ticket.requester,
        "created_at": iso(ticket.created_at),
        "closed_at": iso(ticket.closed_at),
        "closed_by": ticket.closed_by_name,
    }


def turn_data(turn: Any) -> dict[str, Any]:
    session = turn.session
    return {
        "id": turn.pk,
        "status": turn.status,
        "error": turn.error,
        "agent": session.app_name,
        "user_id": session.user_id,
        "session_id": session.session_id,
        "conversation_url": absolute(f"/sessions/{session.pk}/"),
    }


def payload(*, event: NotificationEvent, endpoint: WebhookEndpoint, delivery_id: uuid.UUID) -> dict[str, Any]:
    """The body one endpoint receives for one event (built once; every retry sends it unchanged)."""
    body: dict[str, Any] = {
        "id": str(delivery_id),
        "event": event.name,
        "created_at": event.created_at.isoformat(),
        "data": event.data,
    }
    if event.ticket is not None:
        body["ticket"] = ticket_data(event.ticket)
    if event.turn is not None:
        body["turn"] = turn_data(event.turn)
    if endpoint.format == WebhookEndpoint.Format.SLACK:
        return slack_payload(body)
    return body


def _mrkdwn(text: Any) -> str:
    """Slack's escaping: model output must not become links or mentions."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


HEADLINES = {
    "ticket.opened": "Approval needed",
    "ticket.decided": "Ticket decided",
    "ticket.expired": "Ticket expired",
    "ticket.reminder": "Reminder: still waiting",
    "ticket.escalated": "Escalated",
    "turn.failed": "An agent turn failed",
}


def slack_payload(body: dict[str, Any]) -> dict[str, Any]:
    """What Slack incoming webhooks accept: `text` (the notification) plus `blocks`."""
    headline = HEADLINES.get(body["event"], body["event"])
    ticket, turn = body.get("ticket"), body.get("turn")
    if ticket:
        title = f"{headline}: #{ticket['id']} {ticket['tool']} ({ticket['agent']})"
        edited = f" ({ticket['edited']})" if ticket["edited"] else ""
        detail = (
            f"{ticket['summary'] or '(no arguments)'}{edited} · requested by {ticket['requester']} · {ticket['status']}"
        )
        url = ticket["url"]
    else:
        title = f"{headline}: {turn['agent']} for {turn['user_id']}" if turn else headline
        detail = (turn or {}).get("error") or ""
        url = (turn or {}).get("conversation_url", settings.ADKWEB_BASE_URL)
    text = f"{title} — {detail}" if detail else title
    return {
        "text": _mrkdwn(text),
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*<{url}|{_mrkdwn(title)}>*"}},
            {"type": "section", "text": {"type": "mrkdwn", "text": _mrkdwn(detail) or " "}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": f"adkweb · {body['event']} · {body['id']}"}]},
        ],
    }


# Calls to act on a ticket: stale once it closed (approved, rejected, expired, cancelled meanwhile). Its
# opening is one: a ticket closed before its ticket.opened went out (fanned out late, retried after the
# close) is then told of as a ticket decided as it opened (a policy's, a grant's), which sends no
# ticket.opened at all; its close has its own event (ticket.decided, ticket.expired) with the ticket whole.
ACT_NOW_EVENTS = ("ticket.opened", "ticket.reminder", "ticket.escalated")


def stale_for(event_name: str, ticket: Any) -> str:
    """Why a webhook of this event about this ticket is no longer true, or "" (`ACT_NOW_EVENTS`)."""
    if event_name in ACT_NOW_EVENTS and ticket is not None and ticket.is_closed:
        return f"The ticket was {ticket.get_status_display()} before this {event_name} went out."
    return ""


def stale_reason(delivery: Delivery) -> str:
    """Why an opening, a reminder or an escalation is no longer true when its turn to go out comes, or ""."""
    return stale_for(delivery.event.name, delivery.ticket)


def webhook_send(delivery: Delivery) -> Outcome:
    """POST the stored body once, signed with the endpoint's current secret; 2xx is delivered."""
    import httpx

    endpoint = delivery.endpoint
    if endpoint is None:
        return Outcome.skip("The endpoint was deleted.")
    if not endpoint.enabled:
        return Outcome.skip("The endpoint is disabled.")
    stale = stale_reason(delivery)
    if stale:
        return Outcome.skip(stale)
    try:
        target = webhook_urls.delivery_target(endpoint.url)
    except (OSError, UnicodeError) as exc:
        return Outcome.fail(f"Could not resolve the endpoint's host: {exc}")
    if target.refusal:
        return Outcome.skip(f"Not sent: {target.refusal}")
    body = body_bytes(delivery.payload)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        SIGNATURE_HEADER: sign(endpoint.secret, body),
        "X-Adkweb-Event": delivery.event.name,
        "X-Adkweb-Delivery": str(delivery.uuid),
    }
    if target.host_header:
        headers["Host"] = target.host_header
    extensions = {"sni_hostname": target.sni_hostname} if target.sni_hostname else None
    timeout = settings.ADKWEB_WEBHOOK_TIMEOUT
    unreachable: list[str] = []
    with httpx.Client(timeout=timeout, follow_redirects=False) as client:
        for url in (target.url, *target.fallbacks):
            try:
                response = client.post(url, content=body, headers=headers, extensions=extensions)
                break
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                # Nothing was sent: the name's next checked address may answer (never after a
                # request went out, which the receiver may have acted on).
                unreachable.append(f"{httpx.URL(url).host}: {type(exc).__name__}: {exc}")
            except httpx.TimeoutException:
                return Outcome.fail(f"Timed out after {timeout:g} s.")
            except httpx.HTTPError as exc:
                return Outcome.fail(f"{type(exc).__name__}: {exc}")
        else:
            return Outcome.fail("Could not connect: " + "; ".join(unreachable))
    if 200 <= response.status_code < 300:
        return Outcome(ok=True, status_code=response.status_code)
    snippet = response.text[:300].strip()
    return Outcome.fail(f"HTTP {response.status_code}" + (f": {snippet}" if snippet else ""), response.status_code)
