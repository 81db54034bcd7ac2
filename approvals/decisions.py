"""Answering tickets under their rules: each answer is a `Response` row, and the answers that reach
the agent travel in one `Turn`. An approval of a ticket that needs M approvals is recorded and held
(not sent) until the M-th distinct approver; one rejection closes it. A decision may carry the hash
of the arguments its decider saw (stale: 409) and edited arguments (the agent gets the new values).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from google.genai import types

from adkweb.compiled import rows
from adkweb.errors import Conflict, Forbidden
from adkweb.notify import TICKET_DECIDED, notify
from agents_app.agents import remote_app
from agents_app.models import AdkSession, Turn
from agents_app.services import session_locked, turn_add
from agents_app.timeline import readable

from . import chain, edits, events, grants, payloads
from .hashing import args_hash
from .models import PendingCall, Response, StandingGrant, TicketActivity
from .payloads import InvalidResponse
from .permissions import decide_refusal
from .record import response_append


class TicketClosed(Conflict):
    """The ticket already has its final response (HTTP 409)."""

    def __init__(self, ticket: PendingCall) -> None:
        who = f" by {ticket.closed_by.get_username()}" if ticket.closed_by_id and ticket.closed_by else ""
        status = ticket.get_status_display()
        super().__init__(f"Ticket #{ticket.pk} is already closed ({status}{who}); nothing was sent.")
        self.ticket = ticket


class NotAllowed(Forbidden):
    """The actor may not answer this ticket (HTTP 403)."""


class StaleArguments(Conflict):
    """The decider saw other arguments than the ticket's current ones (HTTP 409)."""

    def __init__(self, ticket: PendingCall) -> None:
        by = f" by {ticket.edited_by.get_username()}" if ticket.edited_by else ""
        super().__init__(
            f"The arguments of ticket #{ticket.pk} changed since you saw them (edited{by}); "
            "reload it and decide on what it says now. Nothing was sent."
        )


class AlreadyCounted(Forbidden):
    """A person's approval counts once toward a ticket's required approvals (HTTP 403)."""


@dataclass
class Answer:
    ticket: PendingCall
    payload: dict[str, Any]
    final: bool
    comment: str = ""
    action: str = Response.Action.CUSTOM
    sent: types.FunctionResponse | None = None  # a client's own FunctionResponse, passed on as is
    seen_hash: str | None = None  # the argsHash the decider saw, when given
    edited_args: dict[str, Any] | None = None  # approve these arguments instead
    grant: grants.GrantSpec | None = None  # and allow the tool for a while
    approve_extra: dict[str, Any] | None = None  # a confirmation's payload given with "approve"


@dataclass
class _Plan:
    answer: Answer
    outcome: str  # the ticket status a final answer gives, or "update"
    held: bool = False  # an approval that waits for more
    hash: str = ""


def approvers(ticket: PendingCall, hash_: str) -> set[int]:
    """Who has approved these exact arguments so far (held approvals of a quorum ticket)."""
    rows = Response.objects.filter(
        pending_call=ticket, action=Response.Action.APPROVE, final=False, args_hash=hash_, actor__isnull=False
    )
    return set(rows.values_list("actor_id", flat=True))


def _plan(answer: Answer, actor: Any, source: str) -> _Plan:
    ticket = answer.ticket
    if source == Response.Source.PERSON:
        refusal = decide_refusal(actor, ticket)
        if refusal:
            raise NotAllowed(f"You may not answer ticket #{ticket.pk}: {refusal}")
    if ticket.is_closed:
        raise TicketClosed(ticket)
    if answer.seen_hash is not None and answer.seen_hash != ticket.args_hash:
        raise StaleArguments(ticket)
    outcome = payloads.decision_of(answer.action, ticket, answer.payload) if answer.final else "update"
    if answer.edited_args is not None:
        if outcome != PendingCall.Status.APPROVED:
            raise InvalidResponse("Edited arguments go with an approval only.")
        edited = edits.check(ticket, answer.edited_args)
        answer.edited_args = None if edited == ticket.current_args else edited
    if answer.action == Response.Action.APPROVE:
        answer.payload = payloads.approve_payload(ticket, answer.comment, answer.approve_extra, answer.edited_args)
    payloads.validate(ticket, answer.payload, answer.final)
    plan = _Plan(answer, outcome, hash=args_hash(answer.edited_args or ticket.current_args))
    if ticket.required_approvals > 1 and answer.final:
        if outcome == PendingCall.Status.ANSWERED:
            raise InvalidResponse(
                f"Ticket #{ticket.pk} needs {ticket.required_approvals} approvals: approve or reject it."
            )
        if outcome == PendingCall.Status.APPROVED:
            given = approvers(ticket, plan.hash)
            if actor is not None and actor.pk in given:
                raise AlreadyCounted(
                    f"Your approval of ticket #{ticket.pk} already counts ({len(given)} of "
                    f"{ticket.required_approvals}); another approver must give the next one."
                )
            plan.held = len(given) + 1 < ticket.required_approvals
    if answer.grant is not None:
        if outcome != PendingCall.Status.APPROVED:
            raise InvalidResponse("A standing grant goes with an approval only.")
        refusal = grants.grant_refusal(ticket)
        if refusal:
            raise Conflict(refusal)
    return plan


def _function_response(plan: _Plan) -> types.FunctionResponse:
    """What reaches the agent: a client's response exactly as sent (with an approver's edits merged
    in); one built here has no `will_continue` when final (ADK's own client sends none, and Vertex
    AI refuses the field) and `will_continue=True` when intermediate (dropped again for backends
    that refuse it, see agents_app.plugins)."""
    answer, ticket = plan.answer, plan.answer.ticket
    if answer.sent is not None:
        changed = payloads.changes(ticket) if plan.outcome == PendingCall.Status.APPROVED else {}
        if not changed or ticket.kind == PendingCall.Kind.CONFIRMATION:
            return answer.sent
        return answer.sent.model_copy(update={"response": {**(answer.sent.response or {}), **changed}})
    # A remote app's model backend is not ours to know (its server cannot drop the field for Vertex AI):
    # send it what ADK's own client sends, no `will_continue` at all.
    quiet = answer.final or remote_app(ticket.app_name) is not None
    return types.FunctionResponse(
        id=ticket.call_id, name=ticket.call_name, response=answer.payload, will_continue=None if quiet else True
    )


def _apply_edit(ticket: PendingCall, edited: dict[str, Any], actor: Any) -> None:
    before = ticket.current_args
    ticket.edited_args, ticket.edited_by, ticket.edited_at = edited, actor, timezone.now()
    changed = {k: {"from": a, "to": b} for k, a, b in edits.diff(before, edited)}
    TicketActivity.objects.create(
        ticket=ticket,
        kind=TicketActivity.Kind.EDITED,
        actor=actor,
        message="Arguments edited: "
        + ", ".join(f"{k} {readable(v['from'], k)} → {readable(v['to'], k)}" for k, v in changed.items()),
        detail={"before": before, "after": edited},
    )


_DECIDED_FIELDS = ["status", "closed_at", "closed_by", "updated_at"]
_EDITED_FIELDS = ["edited_args", "edited_by", "edited_at"]  # _apply_edit's


def _record(plan: _Plan, turn: Turn | None, actor: Any, source: str, grant: StandingGrant | None) -> Response:
    answer, ticket = plan.answer, plan.answer.ticket
    person = actor if actor is not None and actor.is_authenticated else None
    final = answer.final and not plan.held
    response = response_append(
        link=False,  # answers_submit chains its rows last
        pending_call=ticket,
        action=answer.action,
        payload=answer.payload,
        final=final,
        comment=answer.comment,
        actor=person,
        turn=None if plan.held else turn,
        source=source,
        grant=grant,
        args_hash=plan.hash,
        edited_args=answer.edited_args,
    )
    if final:
        ticket.status, ticket.closed_at, ticket.closed_by = plan.outcome, timezone.now(), person
    elif not plan.held:
        ticket.status = PendingCall.Status.IN_PROGRESS
    # What a decision changes (the row is locked: the other columns are as read); not every column
    ticket.save(update_fields=_DECIDED_FIELDS + (_EDITED_FIELDS if answer.edited_args is not None else []))
    if final and source != Response.Source.EXPIRY:  # an expiry is told as ticket.expired
        by = person.get_username() if person else None
        notify(TICKET_DECIDED, ticket=ticket, data={"status": ticket.status, "by": by, "comment": answer.comment})
    if answer.grant is not None and final:
        grants.grant_give(ticket=ticket, actor=actor, spec=answer.grant)
    events.after_commit_ticket_changed(ticket)
    return response


@transaction.atomic
def answers_submit(
    *,
    session: AdkSession,
    answers: list[Answer],
    actor: Any,
    streaming: bool = False,
    state_delta: dict | None = None,
    source: str = Response.Source.PERSON,
    grant: StandingGrant | None = None,
) -> tuple[Turn | None, list[Response]]:
    """Record answers to open tickets of one session and queue the turn that carries those that
    reach the agent now (None when every answer is an approval still waiting for others)."""
    if not answers:
        raise InvalidResponse("No responses given.")
    # The session row first, then its tickets: the order the session store's append (which may
    # touch a ticket) takes them, and the stored status (agents_app.session_status) needs it. With
    # the row held, the status follows the new turn and the closed tickets in one UPDATE each.
    with session_locked(session.pk):
        return _submit(session, answers, actor, streaming, state_delta, source, grant)


def _ticket_fields() -> list[str]:
    return [f.attname for f in PendingCall._meta.concrete_fields]


def _ticket_locking(pk: int) -> QuerySet:
    return PendingCall.objects.select_for_update(of=("self",)).filter(pk=pk).order_by().values_list(*_ticket_fields())


def _tickets_locked(pks: list[int]) -> dict[int, PendingCall]:
    """The tickets, locked (FOR UPDATE) to the end of the transaction, as they are now. One ticket
    (every click, almost every /run) in a statement compiled once per process; who closed or edited
    it is read only when a refusal names them."""
    if len(pks) == 1:
        db = transaction.get_connection()
        found = [
            PendingCall.from_db(db.alias, _ticket_fields(), row)
            for row in rows("decision_ticket_lock", (), _ticket_locking, pks[0])
        ]
        return {t.pk: t for t in found}
    return {t.pk: t for t in PendingCall.objects.select_for_update(of=("self",)).filter(pk__in=pks)}


def _submit(  # noqa: PLR0913
    session: AdkSession,
    answers: list[Answer],
    actor: Any,
    streaming: bool,
    state_delta: dict | None,
    source: str,
    grant: StandingGrant | None,
) -> tuple[Turn | None, list[Response]]:
    locked = _tickets_locked([a.ticket.pk for a in answers])
    plans = []
    for answer in answers:
        answer.ticket = locked[answer.ticket.pk]
        if answer.ticket.session_id != session.pk:
            raise InvalidResponse(f"Ticket #{answer.ticket.pk} belongs to another conversation.")
        plans.append(_plan(answer, actor, source))
    for plan in plans:
        if plan.answer.edited_args is not None:
            _apply_edit(plan.answer.ticket, plan.answer.edited_args, actor)
    parts = [types.Part(function_response=_function_response(p)) for p in plans if not p.held]
    turn = None
    if parts:
        content = types.Content(role="user", parts=parts)
        who = actor if source == Response.Source.PERSON else None
        turn = turn_add(session=session, content=content, actor=who, state_delta=state_delta, streaming=streaming)
    responses = [_record(plan, turn, actor, source, grant) for plan in plans]
    chain.link(responses)  # last: the chain's lock is held to commit, and waits for nothing else
    return turn, responses
