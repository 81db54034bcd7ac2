"""`/run`'s function responses as answers to the session's tickets (approvals.services.message_submit):
the tickets they answer, read with the decider's permissions, and what ADK would refuse at run time (after
the answers were recorded), refused here before anything is."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.models import QuerySet
from google.genai import types

from adkweb import roles
from adkweb.compiled import rows_after
from agents_app.content import InvalidMessage
from agents_app.models import AdkSession

from .decision_plan import refused_unsent
from .decisions import Answer
from .models import PendingCall
from .ticket_locks import ticket_fields


def _ticket_by_call(session_pk: int, call_id: str) -> QuerySet:
    return PendingCall.objects.filter(session_id=session_pk, call_id=call_id).order_by().values_list(*ticket_fields())


def _answered_tickets(session: AdkSession, actor: Any, call_ids: list[str | None]) -> dict[str, PendingCall]:
    """The session's tickets that these function responses answer, by call id. One response (every
    `/run` approval): a statement compiled once per process, in the round trip that reads the
    person's permissions, which the decision's check asks next (inside its transaction, after the
    locks: a round trip of its own there), as a click's ticket read does (approvals.views._acted_on)."""
    if len(call_ids) != 1 or not isinstance(call_ids[0], str):
        return {c.call_id: c for c in PendingCall.objects.filter(session=session, call_id__in=call_ids)}
    permissions = roles.permissions_read(actor)
    perms, found = rows_after(permissions, "message_submit_ticket", (), _ticket_by_call, session.pk, call_ids[0])
    if permissions is not None:
        roles.permissions_loaded(actor, perms)
    tickets = [PendingCall.from_db(connection.alias, ticket_fields(), row) for row in found]
    return {t.call_id: t for t in tickets}


@refused_unsent()
def answers_of(session: AdkSession, actor: Any, responses: list[types.FunctionResponse]) -> list[Answer]:
    """The answers these function responses give (each passed on to the agent as sent), or a 400 saying
    why none is recorded (and that nothing was sent, as every refused decision says: `refused_unsent`)."""
    unnamed = [repr(fr.name) if fr.name else "a call" for fr in responses if not fr.id]
    if unnamed:  # no call's answer: ADK would append it to the history and run the model again
        raise InvalidMessage(
            f"A function response carries the id of the call it answers: the response of {', '.join(unnamed)} has none."
        )
    tickets = _answered_tickets(session, actor, [fr.id for fr in responses])
    missing = sorted({fr.id or "" for fr in responses} - set(tickets))
    if missing:
        raise InvalidMessage(f"Function call not found for function response ids: {', '.join(missing)}.")
    misnamed = [_misnamed(fr, tickets[fr.id or ""]) for fr in responses if fr.name != tickets[fr.id or ""].call_name]
    if misnamed:  # ADK would not take it for that call's answer, after the ticket was closed by it
        raise InvalidMessage(f"A function response carries the name of the call it answers: {'; '.join(misnamed)}.")
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
    return answers


def _misnamed(fr: types.FunctionResponse, ticket: PendingCall) -> str:
    sent = f"not {fr.name!r}" if fr.name else "and the response has no name"
    return f"{fr.id} is a call of {ticket.call_name!r}, {sent}"
