"""Answering tickets under their rules: each answer is a `Response` row, and the answers that reach
the agent travel in one `Turn`. An approval of a ticket that needs M approvals is recorded and held
(not sent) until the M-th distinct approver; one rejection closes it. A decision may carry the hash
of the arguments its decider saw (stale: 409) and edited arguments (the agent gets the new values).
Here: the locks, the turn and the wake-up; each answer is checked by approvals.decision_plan, written
by approvals.decision_write and carried to the agent as approvals.answer_turn makes its parts.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from google.genai import types

from agents_app import enqueue as agent_enqueue
from agents_app import services as agent_services
from agents_app.models import AdkSession, Turn
from agents_app.services import row_lock_held, session_locked, turn_add

from . import answer_turn, assignees, chain, decider, decision_plan, decision_write, ticket_locks
from .decision_plan import AlreadyCounted, Answer, NotAllowed, StaleArguments, TicketClosed, refused_unsent
from .escalations import escalation_record
from .models import PendingCall, Response, StandingGrant
from .payloads import InvalidResponse

# The callers' names: an answer, and the refusals it may meet (approvals.decision_plan).
__all__ = ["AlreadyCounted", "Answer", "NotAllowed", "StaleArguments", "TicketClosed", "answers_submit"]


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


@refused_unsent()
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
    message: types.Content | None = None,
) -> tuple[Turn | None, list[Response]]:
    """Record answers to open tickets of one session and queue the turn that carries those that
    reach the agent now (None when every answer is an approval still waiting for others).
    `wake_early`: wake a worker for that turn just before the commit rather than after it, where
    that is safe (`_early`; see "Waking before the commit" above). `message`: the client's message the
    answers came in (/run), which the turn carries whole (answer_turn.turn_parts)."""
    if not answers:
        raise InvalidResponse("No responses given.")
    # The people first: the decider's row and those of the givers whose held approvals count, locked so
    # their rights hold to the commit (approvals.decider, approvals.assignees.givers_locked). Then the
    # session row, then its tickets: the order the session store's append (which may touch a ticket)
    # takes them, and the stored status (agents_app.session_status) needs it. With the row held, the
    # status follows the new turn and the closed tickets in one UPDATE each.
    person = actor if source == Response.Source.PERSON else None
    assignees.givers_locked([a.ticket for a in answers], person)
    pks = [a.ticket.pk for a in answers]
    if len(pks) == 1:  # every click, almost every /run: the decider's rights and both locks in one round trip
        held, locked, fresh = ticket_locks.session_and_ticket_locked(session.pk, pks[0], person)
        actor = actor if person is None else fresh
        if not held:  # no live session row (archived): nothing held, as session_locked does
            return _submit(
                session, answers, actor, streaming, state_delta, source, grant, locked, False, False, message
            )
        with row_lock_held(session.pk):
            early = wake_early and _early()
            return _submit(session, answers, actor, streaming, state_delta, source, grant, locked, early, True, message)
    actor = decider.decider_read(person) if person is not None else actor
    with session_locked(session.pk):
        locked = ticket_locks.tickets_locked(pks)
        return _submit(session, answers, actor, streaming, state_delta, source, grant, locked, False, True, message)


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
    message: types.Content | None,
) -> tuple[Turn | None, list[Response]]:
    plans = []
    for answer in answers:
        answer.ticket = locked[answer.ticket.pk]
        if answer.ticket.session_id != session.pk:
            raise InvalidResponse(f"Ticket #{answer.ticket.pk} belongs to another conversation.")
        plans.append(decision_plan.answer_plan(answer, actor, source))
    for plan in plans:
        # Its escalation, if its time came and the sweep has not recorded it: in this transaction, before
        # the decision (its decider may be one the escalation let in). Told only if it stays open.
        escalation_record(plan.answer.ticket, tell=not plan.answer.final or plan.held)
        if plan.answer.edited_args is not None:
            decision_write.apply_edit(plan.answer.ticket, plan.answer.edited_args, actor)
    parts = answer_turn.turn_parts(plans, message)
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
            response = decision_write.record(plans[0], None, actor, source, grant, riding=riding)
            chain.link([response])
            return response.turn, [response]
        turn = turn_add(
            session=session, content=content, actor=who, state_delta=state_delta, streaming=streaming, enqueue=not early
        )
        if early:  # the record's statements and the COMMIT are next. See "Waking before the commit" above.
            agent_enqueue.session_enqueue_before_commit(session_pk=session.pk)
    responses = [decision_write.record(plan, turn, actor, source, grant) for plan in plans]
    chain.link(responses)  # those not linked yet; the chain's lock is held to commit, and waits for nothing else
    return turn, responses
