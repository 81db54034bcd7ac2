"""Signed one-tap approval links: create, check and use. A link is bound to a ticket, a person and
the hash of the arguments they were shown; it is single-use and expires. The decision itself goes
through approvals' services (same rules, same 409 on a closed ticket, same record of who decided)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core import signing
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone

from adkweb.errors import Refused
from approvals import services as approvals
from approvals.models import PendingCall, Response
from approvals.selectors import Counted, can_decide, own_approval_counts, ticket_approvals

from .models import ApprovalLink

SALT = "adkweb.notifications.approval-link"
ACTIONS = ("approve", "reject")


Tally = Counted  # a quorum ticket's approvals that count so far, of those it needs


class LinkRefused(Refused):
    """A link that cannot be used now; `reason` picks the page shown, `status` its HTTP status."""

    STATUS = {
        "tampered": 400,
        "wrong_person": 403,
        "used": 410,
        "expired": 410,
        "closed": 409,
        "changed": 409,
        "not_eligible": 403,
        "counted": 409,
    }

    def __init__(self, reason: str, link: ApprovalLink | None = None, tally: Tally | None = None) -> None:
        super().__init__(f"This approval link cannot be used ({reason.replace('_', ' ')}); nothing was decided.")
        self.reason = reason
        self.link = link
        self.status = self.STATUS[reason]
        self.tally = tally  # "counted", and "used" by an approval still waiting: how far the quorum is


@dataclass(frozen=True)
class CheckedLink:
    link: ApprovalLink
    action: str
    ticket: PendingCall


def link_create(*, ticket: PendingCall, user: Any) -> ApprovalLink:
    """A new link for one person and one ticket, valid for ADKWEB_APPROVAL_LINK_SECONDS, or until the
    ticket's due time if that comes first (it takes no person's decision after: decision_plan.PastDue).
    A ticket already past its due time (PendingCall.past_due, swept or not) gets none: PastDue (409), not
    a link born expired. One plain INSERT (a fan-out makes one per decider; the ORM compiled each)."""
    if ticket.past_due:
        raise approvals.PastDue(ticket)
    now = timezone.now()
    expires = now + timedelta(seconds=settings.ADKWEB_APPROVAL_LINK_SECONDS)
    link = ApprovalLink(
        key=secrets.token_urlsafe(24),
        ticket=ticket,
        user=user,
        args_hash=ticket.args_hash,  # the arguments as shown now (an approver may have edited them)
        created_at=now,
        expires_at=min(expires, ticket.due_at) if ticket.due_at is not None else expires,
    )
    adapt = connection.ops.adapt_datetimefield_value
    with connection.cursor() as cursor:
        cursor.execute(
            _INSERT, [link.key, ticket.pk, user.pk, link.args_hash, adapt(link.created_at), adapt(link.expires_at)]
        )
        link.pk = cursor.fetchone()[0]
    link._state.adding, link._state.db = False, connection.alias  # as saved
    return link


_INSERT = (
    f'INSERT INTO {ApprovalLink._meta.db_table} ("key", ticket_id, user_id, args_hash, created_at, expires_at, '
    "used_action) VALUES (%s, %s, %s, %s, %s, %s, '') RETURNING id"
)


def link_token(link: ApprovalLink, action: str) -> str:
    data = {"k": link.key, "t": link.ticket_id, "u": link.user_id, "h": link.args_hash, "a": action}
    return signing.dumps(data, salt=SALT, compress=True)


def link_url(link: ApprovalLink, action: str) -> str:
    """The absolute URL of the confirmation page for one action."""
    return settings.ADKWEB_BASE_URL + reverse("notifications:approval-link", args=[link_token(link, action)])


def link_check(*, token: str, viewer: Any) -> CheckedLink:
    """The link behind a token if it can decide now, else LinkRefused saying why. Changes nothing."""
    try:
        data = signing.loads(token, salt=SALT)
    except signing.BadSignature as exc:
        raise LinkRefused("tampered") from exc
    link = (
        ApprovalLink.objects.select_related("ticket__closed_by", "ticket__edited_by", "user", "response__actor")
        .filter(key=str(data.get("k", "")) if isinstance(data, dict) else "")
        .first()
    )
    bound = (link.ticket_id, link.user_id, link.args_hash) if link else None
    if link is None or bound != (data.get("t"), data.get("u"), data.get("h")) or data.get("a") not in ACTIONS:
        raise LinkRefused("tampered")
    if viewer is not None and viewer.is_authenticated and viewer.pk != link.user_id:
        raise LinkRefused("wrong_person", link)
    if link.used_at is not None:
        raise _used(link)
    if link.ticket.is_closed:  # before its expiry: one that lasted until the ticket's due time, it expired
        raise LinkRefused("closed", link)
    if link.expires_at <= timezone.now():
        raise LinkRefused("expired", link)
    if link.ticket.args_hash != link.args_hash:
        raise LinkRefused("changed", link)
    if not can_decide(link.user, link.ticket):
        raise LinkRefused("not_eligible", link)
    # their approval already counts (the rule the ticket page and the assign read): an approve link could only refuse
    if data["a"] == "approve" and (tally := own_approval_counts(link.user, link.ticket)) is not None:
        raise LinkRefused("counted", link, tally)
    return CheckedLink(link=link, action=data["a"], ticket=link.ticket)


def _tally(ticket: PendingCall) -> Tally:
    """How many approvals of the ticket count now, of how many it needs."""
    return Tally(len(ticket_approvals(ticket=ticket)), ticket.required_approvals)


def _used(link: ApprovalLink) -> LinkRefused:
    """A spent link's refusal: with the tally when its approval is held on a ticket still open."""
    held = link.response is not None and not link.response.final and link.ticket.is_open
    return LinkRefused("used", link, _tally(link.ticket) if held else None)


@transaction.atomic
def link_use(*, token: str, viewer: Any, reason: str = "") -> Response:
    """Decide the ticket as the link's person, once; the link is spent only if the decision is recorded."""
    checked = link_check(token=token, viewer=viewer)
    link = ApprovalLink.objects.select_for_update().get(pk=checked.link.pk)
    if link.used_at is not None:
        raise _used(link)
    if checked.action == "approve":
        response = approvals.ticket_approve(ticket=checked.ticket, actor=link.user, args_hash=link.args_hash)
    else:
        response = approvals.ticket_reject(
            ticket=checked.ticket, actor=link.user, reason=reason, args_hash=link.args_hash
        )
    link.used_at, link.used_action, link.response = timezone.now(), checked.action, response
    link.save(update_fields=["used_at", "used_action", "response"])
    return response
