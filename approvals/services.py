"""Writes on the human side: tickets opened from agent events, and responses sent to them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from google.genai import types

from adkweb.errors import Conflict
from adkweb.log_context import log_ids
from adkweb.notify import TICKET_OPENED, notify
from agents_app.models import AdkSession, StoredEvent, Turn
from agents_app.services import turn_create

from . import assignees, events, rules, run_answers, selectors
from .decision_plan import PastDue, approvers
from .decisions import AlreadyCounted, Answer, NotAllowed, StaleArguments, TicketClosed, answers_submit
from .escalations import escalation_record
from .grants import GrantSpec
from .models import PendingCall, Response, TicketActivity
from .payloads import InvalidResponse, approve_payload, reject_payload, update_payload
from .permissions import decide_refusal

__all__ = [  # what other modules and apps use from here
    "AlreadyCounted",
    "Answer",
    "GrantSpec",
    "InvalidResponse",
    "NotAllowed",
    "PastDue",
    "StaleArguments",
    "TicketClosed",
    "answers_submit",
    "approve_payload",
    "reject_payload",
    "update_payload",
]

KIND_BY_CALL_NAME = {
    "adk_request_confirmation": PendingCall.Kind.CONFIRMATION,
    "adk_request_input": PendingCall.Kind.INPUT,
    "get_user_choice": PendingCall.Kind.CHOICE,
    "adk_request_credential": PendingCall.Kind.CREDENTIAL,
}
ABORTED = "INVOCATION_ABORTED"


# -- tickets from events (runs inside the session service's append transaction) ---------------
def tickets_event_wanted(event: Any, session: Any) -> bool:
    """Whether tickets_record_event has anything to do with this event: a long-running call (a new
    ticket) or a tool's response (an initial response, an abort) that may have a ticket. Without a
    query: the session store stores the other events without running the hook (in one statement).
    A response to a call the ADK session in memory shows was not long-running has no ticket (tickets
    are opened for long-running calls only), so an ordinary tool's response needs no lookup."""
    interrupts = event.long_running_tool_ids
    if interrupts and any(fc.id in interrupts for fc in event.get_function_calls()):
        return True
    if event.author == "user":
        return False
    responses = event.get_function_responses()
    return bool(responses) and not _answers_only_plain_calls(session, {fr.id for fr in responses})


def _answers_only_plain_calls(session: Any, left: set[Any]) -> bool:
    """True when each of these ids (a set of its own: emptied as they are found) is the id of a
    function call among the session's events (newest first) that was not long-running. Not found
    (a call from before a partial load), no id, or a long-running call: False, and the hook looks in
    the database."""
    if not left or None in left or "" in left:
        return False
    for past in reversed(session.events):
        for fc in past.get_function_calls():
            if fc.id in left:
                if fc.id in (past.long_running_tool_ids or ()):
                    return False
                left.discard(fc.id)
        if not left:
            return True
    return False


def interrupts_of(event: Any) -> list[tuple[Any, dict, str, str | None]]:
    """The event's calls that pause for a person, each as (call, its args, the ticket's kind, the tool
    it concerns: a confirmation's is the confirmed call's)."""
    interrupts = set(event.long_running_tool_ids or ())
    found: list[tuple[Any, dict, str, str | None]] = []
    for fc in event.get_function_calls():
        if fc.id not in interrupts:
            continue
        args = dict(fc.args or {})
        kind = KIND_BY_CALL_NAME.get(fc.name or "", PendingCall.Kind.LONG_RUNNING)
        tool_name = (args.get("originalFunctionCall") or {}).get("name", fc.name) if kind == "confirmation" else fc.name
        found.append((fc, args, kind, tool_name))
    return found


# approvals.ticket_sqlite.record, set by ApprovalsConfig.ready (it imports this module): the hook's
# common cases on SQLite in plain SQL; False for what it declines (nothing written, the ORM path runs).
sqlite_record: Callable[[AdkSession, StoredEvent, Any], bool] | None = None


def tickets_record_event(session: AdkSession, stored: StoredEvent, event: Any) -> None:
    """Open a ticket for each new interrupt; attach a tool's initial response; cancel aborted ones.
    On SQLite the common cases are plain SQL (approvals.ticket_sqlite); what it declines runs here."""
    if sqlite_record is not None and connection.vendor == "sqlite" and sqlite_record(session, stored, event):
        return
    for fc, args, kind, tool_name in interrupts_of(event):
        # Not get_or_create (a savepoint, two more round trips): the append holds the session row's
        # lock, so no other transaction opens a ticket of this session meanwhile.
        if not PendingCall.objects.filter(session=session, call_id=fc.id).exists():
            ticket = PendingCall.objects.create(
                session=session,
                call_id=fc.id,
                event=stored,
                app_name=session.app_name,
                requester=session.user_id,
                invocation_id=event.invocation_id,
                kind=kind,
                call_name=fc.name,
                tool_name=tool_name or "",
                args=args,
            )
            _announce(ticket, opened=True)
            rules.ticket_open_rules(ticket)
            if ticket.is_open:  # a ticket a policy or a grant decided at once concerns no decider
                notify(TICKET_OPENED, ticket=ticket, data={})
    if event.author == "user":
        return  # user-authored answers are recorded by answers_submit
    responses = event.get_function_responses()
    found = PendingCall.objects.filter(session=session, call_id__in=[fr.id for fr in responses])
    if any(aborted_response(event, fr.response) for fr in responses):
        # Locked (after the session row the append holds: the decisions' order), so the cancel sees
        # a decision, an assignment or an escalation committed meanwhile and keeps them.
        found = found.select_for_update(of=("self",))
    answered = {t.call_id: t for t in found}  # one query for all of the event's responses
    for fr in responses:
        answer_to = answered.get(fr.id or "")
        if answer_to is None:
            continue
        response = dict(fr.response or {})
        aborted = aborted_response(event, response)
        if answer_to.is_open and aborted:
            _cancel(answer_to, "Cancelled: the agent stopped waiting for this answer (its run was aborted).")
        elif answer_to.initial_response is None and not aborted:
            answer_to.initial_response = response  # also of a ticket a policy decided as it opened
            answer_to.save(update_fields=["initial_response", "updated_at"])
            _announce(answer_to, inbox=False)  # its page shows it; its inbox row and facts do not change


def _cancel(ticket: PendingCall, line: str) -> None:
    """Close an open ticket, locked by the caller, without an answer (its agent's run aborted, its
    conversation deleted). Its history says why, and on a quorum ticket which held approvals would have
    counted (their Response ids in `detail`: they decided nothing); an escalation whose time came before
    is recorded first, as a decision records it (approvals.escalations)."""
    escalation_record(ticket, tell=False)
    ticket.status, ticket.closed_at = PendingCall.Status.CANCELLED, timezone.now()
    ticket.save(update_fields=["status", "closed_at", "updated_at"])
    detail = None
    if ticket.required_approvals > 1:
        counted = sorted(approvers(ticket, ticket.args_hash).values())
        detail = {"counted": counted}
        line += f" It had {len(counted)} of the {ticket.required_approvals} approvals it needed; they decided nothing."
    TicketActivity.objects.create(ticket=ticket, kind=TicketActivity.Kind.CANCELLED, message=line, detail=detail)
    _announce(ticket)


def aborted_response(event: Any, response: dict | None) -> bool:
    """Whether this function response of the event says its invocation was aborted."""
    return event.error_code == ABORTED or ABORTED in str((response or {}).get("error", ""))


def tickets_cancel_archived(*, session: AdkSession, by: str) -> int:
    """A deleted (archived) conversation's open tickets: cancelled, with the reason in their
    history; nobody will answer them. Nothing is deleted."""
    who = f" by {by}" if by else ""
    count = 0
    for ticket in PendingCall.objects.select_for_update(of=("self",)).filter(
        session=session, status__in=PendingCall.OPEN_STATUSES
    ):
        _cancel(ticket, f"Cancelled: its conversation was deleted{who} (archived; kept for the audit trail).")
        count += 1
    return count


def _announce(ticket: PendingCall, *, opened: bool = False, inbox: bool = True) -> None:
    events.after_commit_ticket_changed(ticket, opened=opened, inbox=inbox)


def response_submit(
    *,
    ticket: PendingCall,
    actor: Any,
    payload: dict,
    final: bool,
    comment: str = "",
    action: str = Response.Action.CUSTOM,
    args_hash: str | None = None,
) -> Response:
    """Record one response to a ticket and queue the turn that carries it to the agent."""
    answer = Answer(ticket, payload, final, comment, action, seen_hash=args_hash)
    with log_ids(ticket=ticket.pk):
        return answers_submit(session=ticket.session, answers=[answer], actor=actor, wake_early=True)[1][0]


def ticket_approve(
    *,
    ticket: PendingCall,
    actor: Any,
    comment: str = "",
    payload: dict | None = None,
    args_hash: str | None = None,
    edited_args: dict | None = None,
    grant: GrantSpec | None = None,
) -> Response:
    """Approve (one of the approvals it needs, or the decision); optionally with edited arguments
    and a standing grant for what follows."""
    answer = Answer(
        ticket, {}, True, comment, Response.Action.APPROVE, None, args_hash, edited_args, grant, approve_extra=payload
    )
    return answers_submit(session=ticket.session, answers=[answer], actor=actor, wake_early=True)[1][0]


def ticket_reject(*, ticket: PendingCall, actor: Any, reason: str = "", args_hash: str | None = None) -> Response:
    """Reject: one rejection closes a ticket, however many approvals it needed."""
    payload = reject_payload(ticket, reason)
    return response_submit(
        ticket=ticket, actor=actor, payload=payload, final=True, comment=reason, action="reject", args_hash=args_hash
    )


def ticket_update(
    *, ticket: PendingCall, actor: Any, message: str, progress: float | None = None, extra: dict | None = None
) -> Response:
    """An intermediate update: the agent hears it, the ticket stays open."""
    return response_submit(
        ticket=ticket,
        actor=actor,
        payload=update_payload(message, progress, extra),
        final=False,
        comment=message,
        action=Response.Action.UPDATE,
    )


@transaction.atomic
def ticket_assign(*, ticket: PendingCall, actor: Any, assignee: Any | None) -> PendingCall:
    """Take an open ticket (assignee = the actor) or give it back (None): those who may decide it. A take
    locks the person's row first and reads their rights afresh: a change of them that would give the
    ticket back waits for it, or refuses it (approvals.assignees)."""
    if assignee is not None and getattr(actor, "pk", None) is not None:
        actor = assignees.taker_locked(actor)
    ticket = PendingCall.objects.select_for_update(of=("self",)).select_related("closed_by").get(pk=ticket.pk)
    refusal = decide_refusal(actor, ticket)
    if refusal:
        raise NotAllowed(f"You may not take ticket #{ticket.pk}: {refusal}")
    if assignee is not None and assignee.pk != actor.pk:
        raise InvalidResponse("You can assign a ticket to yourself only.")
    if ticket.is_closed:
        raise TicketClosed(ticket)
    if assignee is not None and ticket.past_due:  # it takes no decision: nobody's to take (the page offers none)
        raise PastDue(ticket).ending("Nothing was changed.")
    refusal = take_refusal(ticket, actor) if assignee else None
    if refusal:
        raise Conflict(f"You may not take ticket #{ticket.pk}: {refusal} Nothing was changed.")
    ticket.assigned_to = assignee
    ticket.save(update_fields=["assigned_to", "updated_at"])
    _announce(ticket)
    return ticket


def take_refusal(ticket: PendingCall, actor: Any, counted: list[Response] | None = None) -> str | None:
    """Why this person may not take the open ticket ("Assign to me"), or None: their approval counts on it
    (selectors.own_approval_counts; `counted`: its approvals, already read), so only another approver
    moves it (it was given back then)."""
    mine = selectors.own_approval_counts(actor, ticket, counted)
    if mine is None:
        return None
    return (
        f"your approval counts ({mine.counted} of {mine.required}); another approver gives the next one, so it is "
        "theirs to take."
    )


def message_submit(
    *, session: AdkSession, content: types.Content, actor: Any, state_delta: dict | None = None, streaming: bool = False
) -> Turn | None:
    """A user message (text → new turn) or function responses (→ answers to open tickets). None:
    the answers were approvals recorded toward a quorum, and nothing reached the agent yet."""
    responses = [p.function_response for p in content.parts or [] if p.function_response]
    if not responses:
        return turn_create(session=session, content=content, actor=actor, state_delta=state_delta, streaming=streaming)
    answers = run_answers.answers_of(session, actor, responses)
    turn, _ = answers_submit(
        session=session, answers=answers, actor=actor, streaming=streaming, state_delta=state_delta, message=content
    )
    return turn
