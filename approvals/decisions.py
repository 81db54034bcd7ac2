"""Answering tickets under their rules: each answer is a `Response` row, and the answers that reach
the agent travel in one `Turn`. An approval of a ticket that needs M approvals is recorded and held
(not sent) until the M-th distinct approver; one rejection closes it. A decision may carry the hash
of the arguments its decider saw (stale: 409) and edited arguments (the agent gets the new values).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from django.db import transaction
from django.db.models import Field
from django.utils import timezone
from google.genai import types

from adkweb.errors import Conflict, Forbidden
from adkweb.notify import TICKET_DECIDED, notify
from agents_app import enqueue as agent_enqueue
from agents_app import services as agent_services
from agents_app.agents import remote_app
from agents_app.models import AdkSession, Turn
from agents_app.services import TurnRiding, row_lock_held, session_locked, turn_add
from agents_app.timeline import readable

from . import chain, edits, events, grants, payloads, ticket_locks
from .hashing import args_hash
from .models import PendingCall, Response, StandingGrant, TicketActivity
from .payloads import InvalidResponse
from .permissions import decide_refusal
from .record import response_append, response_append_with


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


# Waking before the commit. A page's or the API's decision that queues a turn sends its wake-up
# (agents_app.enqueue.session_enqueue) once the turn is inserted, before the record's statements
# (the response, the ticket, the outbox row, the chain's) and its COMMIT, not after the commit: the
# worker's pop, hand-over and drain set-up then overlap those and the commit's WAL flush, and its
# claim (agents_app.turn_sql.start) is already waiting when the commit lands. Not while the chain's
# head is locked: a wake-up that waits on an unreachable Redis (its connect timeout) then holds only
# this session's rows, not every other decision. Why that is safe:
# - The claim's first statement locks the session row (FOR NO KEY UPDATE), which this transaction
#   holds from its start (`ticket_locks.session_and_ticket_locked`), so it waits for our COMMIT or ROLLBACK; its
#   next statement takes its snapshot after the lock is granted and sees whatever we committed (the
#   rule the drain already relies on, agents_app.turn_sql).
# - Committed: the claim finds the queued turn and runs it, as if woken after the commit. One
#   wake-up only (turn_add(enqueue=False)), so no second drain.
# - Rolled back (an error after the wake-up, the COMMIT failing, the web process dying before or
#   during it: PostgreSQL rolls back a transaction whose connection is gone), or not committed yet
#   when a worker looks: the turn does not exist for anyone else. The claim finds no queued or running
#   turn, takes no lease, and the drain ends having done nothing (runner._drain_pg: `not leased`);
#   a session with other owed work drains that work, which it owed anyway.
# - The wake-up lost (Redis down, a worker killed after popping it): as after a commit,
#   session_enqueue's relay and the sweeper deliver it; the Turn row stays the truth.
# - Only where the claim does wait: PostgreSQL, the session row locked here, the outermost atomic
#   block (`_early`). Elsewhere, and for /run (agents_app.eager may run that drain in the web
#   process after the commit), the enqueue stays after the commit.
# The cost: a worker's drain thread may wait on the lock for the commit's duration (a few ms).


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
        duplicate = grants.duplicate_refusal(ticket, answer.grant.scope)  # before anything is written
        if duplicate:
            raise duplicate
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


def _record(
    plan: _Plan,
    turn: Turn | None,
    actor: Any,
    source: str,
    grant: StandingGrant | None,
    riding: TurnRiding | None = None,
) -> Response:
    """The decision's row, its ticket's write and its notice; `riding`: its turn's writes too (PostgreSQL),
    in the record's statement, the row's turn the one written there."""
    answer, ticket = plan.answer, plan.answer.ticket
    person = actor if actor is not None and actor.is_authenticated else None
    final = answer.final and not plan.held
    row = {
        "pending_call": ticket,
        "action": answer.action,
        "payload": answer.payload,
        "final": final,
        "comment": answer.comment,
        "actor": person,
        "turn": None if plan.held else turn,
        "source": source,
        "grant": grant,
        "args_hash": plan.hash,
        "edited_args": answer.edited_args,
    }
    if final:
        ticket.status, ticket.closed_at, ticket.closed_by = plan.outcome, timezone.now(), person
    elif not plan.held:
        ticket.status = PendingCall.Status.IN_PROGRESS
    notice = None
    if final and source != Response.Source.EXPIRY:  # an expiry is told as ticket.expired
        by = person.get_username() if person else None
        notice = (TICKET_DECIDED, ticket, {"status": ticket.status, "by": by, "comment": answer.comment})
    # What a decision changes (the row is locked: the other columns are as read); not every column
    fields = _DECIDED_FIELDS + (_EDITED_FIELDS if answer.edited_args is not None else [])
    if riding is not None:  # the turn, the row, the ticket, the notice and the chain's head in one round trip
        response = response_append_with(_ticket_update(ticket, fields), notice=notice, riding=riding, **row)
    elif turn is not None and transaction.get_connection().vendor == "postgresql":
        # the row, the ticket, the notice and the chain's head in one round trip; then its link
        response = response_append_with(_ticket_update(ticket, fields), notice=notice, **row)
    else:
        response = response_append(link=False, **row)  # answers_submit chains its rows last
        if turn is not None:
            _ticket_write(ticket, fields)
        else:
            ticket.save(update_fields=fields)
        if notice is not None:
            notify(notice[0], ticket=ticket, data=notice[2])
    if answer.grant is not None and final:
        grants.grant_give(ticket=ticket, actor=actor, spec=answer.grant)
    events.after_commit_ticket_changed(ticket)
    return response


def _ticket_update(ticket: PendingCall, fields: list[str]) -> tuple[str, list[Any]]:
    """`_ticket_write`'s UPDATE as SQL and parameters (the fields' own database values), to go in the
    decision row's INSERT statement (approvals.record.response_append_with)."""
    ticket.updated_at = timezone.now()  # auto_now, as save() would
    db = transaction.get_connection()
    columns = [cast(Field, PendingCall._meta.get_field(name)) for name in fields]
    sets = ", ".join(f"{db.ops.quote_name(f.column)} = %s" for f in columns)
    params = [f.get_db_prep_save(getattr(ticket, f.attname), db) for f in columns]
    ticket._loaded_status = ticket.status  # as the save's sync leaves it
    return f"UPDATE {PendingCall._meta.db_table} SET {sets} WHERE id = %s", [*params, ticket.pk]


def _ticket_write(ticket: PendingCall, fields: list[str]) -> None:
    """`ticket.save(update_fields=fields)` without the save's status sync (agents_app.session_status),
    when this transaction queued a turn of the ticket's session: that turn keeps the session's stored
    status `running` whatever the ticket's status, and whoever finishes it recomputes the status under
    the session row's lock after this commit. One UPDATE instead of two: `_ticket_update`'s, in plain SQL
    (the ORM's `update` compiled it per decision)."""
    sql, params = _ticket_update(ticket, fields)
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(sql, params)


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
    wake_early: bool = False,
) -> tuple[Turn | None, list[Response]]:
    """Record answers to open tickets of one session and queue the turn that carries those that
    reach the agent now (None when every answer is an approval still waiting for others).
    `wake_early`: wake a worker for that turn just before the commit rather than after it, where
    that is safe (`_early`; see "Waking before the commit" above)."""
    if not answers:
        raise InvalidResponse("No responses given.")
    # The session row first, then its tickets: the order the session store's append (which may
    # touch a ticket) takes them, and the stored status (agents_app.session_status) needs it. With
    # the row held, the status follows the new turn and the closed tickets in one UPDATE each.
    pks = [a.ticket.pk for a in answers]
    if len(pks) == 1:  # every click, almost every /run: both locks in one round trip
        held, locked = ticket_locks.session_and_ticket_locked(session.pk, pks[0])
        if not held:  # no live session row (archived): nothing held, as session_locked does
            return _submit(session, answers, actor, streaming, state_delta, source, grant, locked, False, False)
        with row_lock_held(session.pk):
            early = wake_early and _early()
            return _submit(session, answers, actor, streaming, state_delta, source, grant, locked, early, True)
    with session_locked(session.pk):
        locked = ticket_locks.tickets_locked(pks)
        return _submit(session, answers, actor, streaming, state_delta, source, grant, locked, False, True)


def _early() -> bool:
    """Whether this decision may wake its worker before its commit: on PostgreSQL (the worker's claim
    waits on the session row this transaction locked) and in the outermost atomic block (the commit
    is the next thing; nested, the row would be held to an outer commit we do not see)."""
    db = transaction.get_connection()
    return db.vendor == "postgresql" and len(db.atomic_blocks) == 1


def _submit(  # noqa: PLR0913
    session: AdkSession,
    answers: list[Answer],
    actor: Any,
    streaming: bool,
    state_delta: dict | None,
    source: str,
    grant: StandingGrant | None,
    locked: dict[int, PendingCall],
    early: bool,
    held: bool,
) -> tuple[Turn | None, list[Response]]:
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
        riding = None
        if held and len(plans) == 1:  # the turn's writes in the record's statement (one round trip fewer)
            riding = agent_services.turn_add_riding(
                session=session, content=content, actor=who, state_delta=state_delta, streaming=streaming
            )
        if riding is not None:
            # The session row is held since the locks: the wake-up may leave before the turn's row is
            # written, in the record's statement next. See "Waking before the commit" above.
            if early:
                agent_enqueue.session_enqueue_before_commit(session_pk=session.pk)
            else:  # as turn_add's (a /run answer's: before the commit where wake_before_commit says so)
                agent_enqueue.turn_enqueue(session.pk)
            response = _record(plans[0], None, actor, source, grant, riding=riding)
            chain.link([response])
            return response.turn, [response]
        turn = turn_add(
            session=session, content=content, actor=who, state_delta=state_delta, streaming=streaming, enqueue=not early
        )
        if early:  # the record's statements and the COMMIT are next. See "Waking before the commit" above.
            agent_enqueue.session_enqueue_before_commit(session_pk=session.pk)
    responses = [_record(plan, turn, actor, source, grant) for plan in plans]
    chain.link(responses)  # those not linked yet; the chain's lock is held to commit, and waits for nothing else
    return turn, responses
