"""Writes on the human side: tickets opened from agent events, and responses sent to them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone
from google.genai import types

from adkweb.errors import Conflict, Forbidden, Invalid
from adkweb.notify import TICKET_DECIDED, TICKET_OPENED, notify
from adkweb.roles import is_approver
from agents_app.models import AdkSession, StoredEvent, Turn
from agents_app.services import InvalidMessage, turn_create

from . import events
from .models import PendingCall, Response
from .permissions import can_decide_ticket

KIND_BY_CALL_NAME = {
    "adk_request_confirmation": PendingCall.Kind.CONFIRMATION,
    "adk_request_input": PendingCall.Kind.INPUT,
    "get_user_choice": PendingCall.Kind.CHOICE,
    "adk_request_credential": PendingCall.Kind.CREDENTIAL,
}
APPROVED_WORDS = {"approved", "approve", "accepted", "ok", "yes"}
REJECTED_WORDS = {"rejected", "reject", "denied", "declined", "no"}
ABORTED = "INVOCATION_ABORTED"


class TicketClosed(Conflict):
    """The ticket already has its final response (HTTP 409)."""

    def __init__(self, ticket: PendingCall) -> None:
        who = f" by {ticket.closed_by.get_username()}" if ticket.closed_by_id and ticket.closed_by else ""
        status = ticket.get_status_display()
        super().__init__(f"Ticket #{ticket.pk} is already closed ({status}{who}); nothing was sent.")
        self.ticket = ticket


class InvalidResponse(Invalid):
    """A response body that does not fit the ticket's kind (HTTP 400)."""


class NotAllowed(Forbidden):
    """The actor may not answer this ticket (HTTP 403)."""


@dataclass
class Answer:
    ticket: PendingCall
    payload: dict[str, Any]
    final: bool
    comment: str = ""
    action: str = Response.Action.CUSTOM
    sent: types.FunctionResponse | None = None  # a client's own FunctionResponse, passed on as is


# -- tickets from events (runs inside the session service's append transaction) ---------------
def tickets_record_event(session: AdkSession, stored: StoredEvent, event: Any) -> None:
    """Open a ticket for each new interrupt; attach a tool's initial response; cancel aborted ones."""
    interrupts = set(event.long_running_tool_ids or ())
    for fc in event.get_function_calls():
        if fc.id not in interrupts:
            continue
        args = dict(fc.args or {})
        kind = KIND_BY_CALL_NAME.get(fc.name or "", PendingCall.Kind.LONG_RUNNING)
        tool_name = (args.get("originalFunctionCall") or {}).get("name", fc.name) if kind == "confirmation" else fc.name
        ticket, created = PendingCall.objects.get_or_create(
            session=session,
            call_id=fc.id,
            defaults=dict(
                event=stored,
                app_name=session.app_name,
                requester=session.user_id,
                invocation_id=event.invocation_id,
                kind=kind,
                call_name=fc.name,
                tool_name=tool_name or "",
                args=args,
            ),
        )
        if created:
            _announce(ticket)
            _notify(TICKET_OPENED, ticket)
    if event.author == "user":
        return  # user-authored answers are recorded by answers_submit
    for fr in event.get_function_responses():
        answered = PendingCall.objects.filter(session=session, call_id=fr.id).first()
        if answered is None or not answered.is_open:
            continue
        ticket = answered
        response = dict(fr.response or {})
        if event.error_code == ABORTED or ABORTED in str(response.get("error", "")):
            ticket.status = PendingCall.Status.CANCELLED
            ticket.closed_at = timezone.now()
        elif ticket.initial_response is None:
            ticket.initial_response = response
        ticket.save()
        _announce(ticket)


def _announce(ticket: PendingCall) -> None:
    ticket_id, session_pk = ticket.pk, ticket.session_id
    transaction.on_commit(lambda: events.notify_ticket_changed(ticket_id=ticket_id, session_pk=session_pk), robust=True)


def _notify(event: str, ticket: PendingCall, **data: Any) -> None:
    """Email and webhook notifications: recorded in this transaction, sent by Celery after commit."""
    notify(event, ticket=ticket, data=data)


# -- response bodies per kind --------------------------------------------------------------------
def approve_payload(ticket: PendingCall, comment: str = "", payload: dict | None = None) -> dict[str, Any]:
    if ticket.kind == PendingCall.Kind.CONFIRMATION:
        body: dict[str, Any] = {"confirmed": True}
        if payload:
            body["payload"] = payload
        return body
    body = {"status": "approved"}
    if comment:
        body["comment"] = comment
    return body


def reject_payload(ticket: PendingCall, reason: str = "") -> dict[str, Any]:
    if ticket.kind == PendingCall.Kind.CONFIRMATION:
        return {"confirmed": False, "payload": {"reason": reason}} if reason else {"confirmed": False}
    body: dict[str, Any] = {"status": "rejected"}
    if reason:
        body["reason"] = reason
    return body


def update_payload(message: str, progress: float | None = None, extra: dict | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"status": "in_progress", **(extra or {})}
    if message:
        body["message"] = message
    if progress is not None:
        body["progress"] = progress
    return body


def _validate(answer: Answer) -> None:
    ticket, payload = answer.ticket, answer.payload
    if not isinstance(payload, dict):
        raise InvalidResponse("The response must be a JSON object.")
    if ticket.kind == PendingCall.Kind.CONFIRMATION:
        if not answer.final:
            raise InvalidResponse("A confirmation takes one final answer (confirmed true or false), not updates.")
        extra = set(payload) - {"confirmed", "payload", "hint"}
        if extra or not isinstance(payload.get("confirmed"), bool):
            raise InvalidResponse(
                'A confirmation response is {"confirmed": true|false, "payload": {...}}'
                + (
                    f"; unexpected keys: {', '.join(sorted(extra))}."
                    if extra
                    else "; 'confirmed' must be true or false."
                )
            )
    schema = ticket.response_schema
    if isinstance(schema, dict) and schema.get("type") == "object":
        # ADK validates the answer against the schema after storing it and then fails the run:
        # refuse it here, before anything is stored or sent.
        import jsonschema

        try:
            jsonschema.validate(payload, schema)
        except jsonschema.ValidationError as exc:
            raise InvalidResponse(
                f"This ticket asks for input matching its schema: {exc.message}. Send a response that fits it."
            ) from exc
        except jsonschema.SchemaError:
            pass  # the model wrote an invalid schema; let ADK be the judge


def _closed_status(answer: Answer) -> str:
    if answer.action == Response.Action.APPROVE:
        return PendingCall.Status.APPROVED
    if answer.action == Response.Action.REJECT:
        return PendingCall.Status.REJECTED
    if answer.ticket.kind == PendingCall.Kind.CONFIRMATION:
        return PendingCall.Status.APPROVED if answer.payload.get("confirmed") else PendingCall.Status.REJECTED
    word = str(answer.payload.get("status", "")).lower()
    if word in APPROVED_WORDS:
        return PendingCall.Status.APPROVED
    if word in REJECTED_WORDS:
        return PendingCall.Status.REJECTED
    return PendingCall.Status.ANSWERED


def _function_response(answer: Answer) -> types.FunctionResponse:
    """What reaches the agent: a client's response exactly as sent; one built here has no
    `will_continue` when final (ADK's own client sends none, and Vertex AI refuses the field) and
    `will_continue=True` when intermediate (dropped again for backends that refuse it, see
    agents_app.plugins)."""
    if answer.sent is not None:
        return answer.sent
    ticket = answer.ticket
    return types.FunctionResponse(
        id=ticket.call_id, name=ticket.call_name, response=answer.payload, will_continue=None if answer.final else True
    )


# -- submitting ---------------------------------------------------------------------------------
@transaction.atomic
def answers_submit(
    *, session: AdkSession, answers: list[Answer], actor: Any, streaming: bool = False, state_delta: dict | None = None
) -> Turn:
    """Record responses to open tickets of one session and queue the turn that carries them."""
    if not answers:
        raise InvalidResponse("No responses given.")
    locked = {
        c.pk: c
        for c in PendingCall.objects.select_for_update(of=("self",))
        .select_related("closed_by")
        .filter(pk__in=[a.ticket.pk for a in answers])
    }
    parts = []
    for answer in answers:
        answer.ticket = ticket = locked[answer.ticket.pk]
        if ticket.session_id != session.pk:
            raise InvalidResponse(f"Ticket #{ticket.pk} belongs to another conversation.")
        if not can_decide_ticket(actor, ticket):
            raise NotAllowed(f"You may not answer ticket #{ticket.pk}: only approvers answer this kind of ticket.")
        if ticket.is_closed:
            raise TicketClosed(ticket)
        _validate(answer)
        parts.append(types.Part(function_response=_function_response(answer)))
    turn = turn_create(
        session=session,
        content=types.Content(role="user", parts=parts),
        actor=actor,
        state_delta=state_delta,
        streaming=streaming,
    )
    now = timezone.now()
    for answer in answers:
        ticket = answer.ticket
        Response.objects.create(
            pending_call=ticket,
            action=answer.action,
            payload=answer.payload,
            final=answer.final,
            comment=answer.comment,
            actor=actor if actor and actor.is_authenticated else None,
            turn=turn,
        )
        if answer.final:
            ticket.status, ticket.closed_at = _closed_status(answer), now
            ticket.closed_by = actor if actor and actor.is_authenticated else None
        else:
            ticket.status = PendingCall.Status.IN_PROGRESS
        ticket.save()
        _announce(ticket)
        if answer.final:
            by = ticket.closed_by.get_username() if ticket.closed_by else None
            _notify(TICKET_DECIDED, ticket, status=ticket.status, by=by, comment=answer.comment)
    return turn


def response_submit(
    *,
    ticket: PendingCall,
    actor: Any,
    payload: dict,
    final: bool,
    comment: str = "",
    action: str = Response.Action.CUSTOM,
) -> Response:
    """Record one response to a ticket and queue the turn that carries it to the agent."""
    answer = Answer(ticket=ticket, payload=payload, final=final, comment=comment, action=action)
    turn = answers_submit(session=ticket.session, answers=[answer], actor=actor)
    return Response.objects.filter(turn=turn, pending_call_id=ticket.pk).get()


def ticket_approve(*, ticket: PendingCall, actor: Any, comment: str = "", payload: dict | None = None) -> Response:
    return response_submit(
        ticket=ticket,
        actor=actor,
        payload=approve_payload(ticket, comment, payload),
        final=True,
        comment=comment,
        action=Response.Action.APPROVE,
    )


def ticket_reject(*, ticket: PendingCall, actor: Any, reason: str = "") -> Response:
    return response_submit(
        ticket=ticket,
        actor=actor,
        payload=reject_payload(ticket, reason),
        final=True,
        comment=reason,
        action=Response.Action.REJECT,
    )


def ticket_update(
    *, ticket: PendingCall, actor: Any, message: str, progress: float | None = None, extra: dict | None = None
) -> Response:
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
    """Take an open ticket (assignee = the actor) or give it back (None): approvers only."""
    ticket = PendingCall.objects.select_for_update(of=("self",)).select_related("closed_by").get(pk=ticket.pk)
    if not is_approver(actor):
        raise NotAllowed("Only approvers take tickets.")
    if assignee is not None and assignee.pk != actor.pk:
        raise InvalidResponse("You can assign a ticket to yourself only.")
    if ticket.is_closed:
        raise TicketClosed(ticket)
    ticket.assigned_to = assignee
    ticket.save(update_fields=["assigned_to", "updated_at"])
    _announce(ticket)
    return ticket


def message_submit(
    *, session: AdkSession, content: types.Content, actor: Any, state_delta: dict | None = None, streaming: bool = False
) -> Turn:
    """A user message (text → new turn) or function responses (→ answers to open tickets)."""
    responses = [p.function_response for p in content.parts or [] if p.function_response]
    if not responses:
        return turn_create(session=session, content=content, actor=actor, state_delta=state_delta, streaming=streaming)
    tickets = {
        c.call_id: c for c in PendingCall.objects.filter(session=session, call_id__in=[fr.id for fr in responses])
    }
    missing = sorted({fr.id or "" for fr in responses} - set(tickets))
    if missing:
        raise InvalidMessage(f"Function call not found for function response ids: {', '.join(missing)}.")
    if len(responses) != len({fr.id for fr in responses}):
        raise InvalidMessage("A message answers each function call at most once.")
    if len({tickets[fr.id or ""].invocation_id for fr in responses}) > 1:
        # ADK refuses these at run time (after the answers would be recorded): refuse them here.
        raise InvalidMessage(
            "Function responses in one message must answer calls of one invocation; send them separately."
        )
    answers = []
    for fr in responses:
        final = fr.will_continue is not True
        answers.append(Answer(ticket=tickets[fr.id or ""], payload=dict(fr.response or {}), final=final, sent=fr))
    return answers_submit(session=session, answers=answers, actor=actor, streaming=streaming, state_delta=state_delta)
