"""What the ticket page and its partials show (`ticket_context`: also the ticket socket's, approvals.ticket_consumer),
split out of approvals.views, which renders it and imports it back."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

from django.forms import Form
from django.utils.functional import SimpleLazyObject

from agents_app import visibility

from . import edits, forms, grants, selectors, services
from .decision_plan import PastDue
from .models import PendingCall
from .permissions import decide_refusal, escalated_since


def ticket_context(
    ticket: PendingCall, user: Any, bound: dict[str, Form] | None = None, **extra: Any
) -> dict[str, Any]:
    """Everything the ticket page and its partials show (also used by the ticket consumer)."""
    # Past its due time it takes no decision (PastDue, by the clock), whether or not the sweep expired it yet.
    refusal = decide_refusal(user, ticket) or (str(PastDue(ticket)) if ticket.past_due else None)
    answerable = ticket.is_open and refusal is None
    confirmation = ticket.kind == PendingCall.Kind.CONFIRMATION
    responses = selectors.ticket_responses(ticket=ticket)
    tally = selectors.approval_record(ticket=ticket, responses=responses)
    approved_by_me = selectors.own_approval_counts(user, ticket, tally.counted) is not None
    ctx: dict[str, Any] = {
        "ticket": ticket,
        "responses": responses,
        "activities": selectors.ticket_activities(ticket=ticket),
        "escalated_since": escalated_since(ticket),  # by the clock, recorded or not
        "approvals": tally.counted,
        # in its history, not counted: their givers may no longer decide it (open), could not when it closed
        "lapsed_approvals": tally.lapsed,
        "approvals_recorded": tally.recorded,  # closed: whether its close recorded which counted
        "approved_by_me": approved_by_me,
        "args_diff": edits.diff(ticket.tool_args, ticket.edited_args),
        "refusal": refusal,
        "grantable": grants.grant_refusal(ticket) is None,
        "can_answer": answerable,
        # Which of its states the actions card shows this viewer: the ticket socket re-renders the card when
        # it changes (their own approval now counts, given elsewhere), else swaps only the counts in it.
        "actions_shown": actions_shown(ticket, answerable, approved_by_me),
        # Lazy (SimpleLazyObject): asked only by what renders them (the page, the ticket socket), not
        # by the panel an action answers with.
        "activity": SimpleLazyObject(lambda: _activity(ticket)),
        "approve_ok": forms.fits_schema(ticket, services.approve_payload(ticket)),
        "reject_ok": forms.fits_schema(ticket, services.reject_payload(ticket, "reason")),
        "update_ok": not confirmation,
        "confirmation": confirmation,
        "can_assign": answerable,
        "take_refusal": services.take_refusal(ticket, user, tally.counted) if answerable else None,
        "assigned_to_me": ticket.assigned_to_id == getattr(user, "pk", None),
        "viewer": user,  # the consumer renders partials without a request
        "changed": changed_stamp(ticket),  # the ticket's last change the page shows (its socket's changed=)
        # Its conversation holds no ticket hidden from this person (else it is not shown here either).
        "conversation_visible": SimpleLazyObject(lambda: visibility.session_visible(user, ticket.session)),
    }
    if answerable:
        seen = {"args_hash": ticket.args_hash}
        ctx.update(
            approve_form=_approve_form(ticket, None),
            reject_form=forms.RejectForm(prefix="reject", initial=seen),
            update_form=forms.UpdateForm(prefix="update", initial=seen),
            custom_form=forms.response_form_for(ticket),
        )
        ctx.update({f"{name}_form": form for name, form in (bound or {}).items()})
    ctx.update(extra)
    return ctx


def changed_stamp(ticket: PendingCall) -> int:
    """The ticket's last change (updated_at: every decision, held approvals included, an update, an
    assignment, an escalation bumps it) as whole microseconds: a page's socket that says an older one
    than the ticket's shows a ticket changed since its page read it (approvals.ticket_consumer)."""
    return microseconds(ticket.updated_at)


def microseconds(when: datetime) -> int:
    """An aware datetime as whole microseconds since the epoch (exact: no float on the way)."""
    return (when - _EPOCH) // timedelta(microseconds=1)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def actions_shown(ticket: PendingCall, answerable: bool, approved_by_me: bool) -> str:
    """The actions card's state for a viewer (ticket.html#actions): "closed", "refused" (they may not
    answer), "counted" (their approval counts: no approve button nor link) or "answer"."""
    if not ticket.is_open:
        return "closed"
    if not answerable:
        return "refused"
    return "counted" if approved_by_me else "answer"


ACTIONS_SHOWN = frozenset({"closed", "refused", "counted", "answer"})  # actions_shown's answers
# A ticket page's own name (`page_token`), sent by its htmx requests (hx-headers) and named in its
# socket's URL (`page=`): the decision a request of the page made is not pushed back to it
# (approvals.events.on_page, approvals.ticket_consumer).
PAGE_HEADER = "X-Ticket-Page"


def page_token() -> str:
    return secrets.token_urlsafe(12)


def page_key(user: Any, token: str | None) -> str | None:
    """A page's name with its person's: a request and a socket match only if both are this person's
    (None: no page named, or not one page_token gives)."""
    if not token or len(token) > 32:
        return None
    return f"{getattr(user, 'pk', None)}:{token}"


def _activity(ticket: PendingCall) -> str:
    """The conversation's stored status (agents_app.selectors.session_status), from the session row
    ticket_get read with the ticket: "idle" once the conversation is deleted (archived)."""
    session = ticket.session
    return "idle" if session.archived_at is not None else (session.status or "idle")


def _approve_form(ticket: PendingCall, data: Any) -> forms.ApproveForm:
    params = edits.params(ticket) if ticket.is_open else None
    initial = {"args_hash": ticket.args_hash}
    return forms.ApproveForm(data, prefix="approve", initial=initial, params=params, current=ticket.current_args)
