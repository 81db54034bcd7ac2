"""Writes on the agent side: sessions and turns (the per-session inbox). A turn's wake-up for a worker is
agents_app.enqueue's."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast

from django.conf import settings
from django.db import transaction
from google.genai import types

from adkweb.errors import Conflict

from . import agents
from . import enqueue as queueing
from .app_state import refused_keys
from .content import InvalidMessage, content_json, text_content
from .models import AdkSession, Turn
from .session_ids import ids_check
from .session_service import DjangoSessionService, SessionBusy, session_archive
from .session_status import row_lock_held
from .turn_insert import TurnFields, TurnRiding, session_gone, turn_insert, turn_insert_riding, turn_insert_sqlite
from .turn_quota import TooManyTurns, _too_many, turn_quota_check

logger = logging.getLogger(__name__)
# The store's, used from here by pages and the admin; the cap's (agents_app.turn_quota), by the API and tests.
__all__ = ["SessionBusy", "TooManyTurns", "session_archive", "turn_quota_check"]


class TurnNotRetryable(Conflict):
    """Only a failed turn that stored nothing can run again (HTTP 409)."""


def session_create(
    *, app_name: str, user_id: str, session_id: str | None = None, state: dict | None = None
) -> AdkSession:
    """Create an ADK session for an enabled app (raises AgentNotFound, AlreadyExistsError)."""
    if app_name not in agents.app_names():
        raise agents.AgentNotFound(f"No enabled agent named {app_name!r}.")
    ids_check(user_id=user_id, session_id=session_id)
    session = DjangoSessionService().create_session_sync(
        app_name=app_name, user_id=user_id, state=state, session_id=session_id
    )
    return AdkSession.objects.get(app_name=app_name, user_id=user_id, session_id=session.id)


@transaction.atomic
def conversation_start(*, app_name: str, user: Any, text: str) -> AdkSession:
    """A new session for the user (ADK user id = username) with its first message queued."""
    session = session_create(app_name=app_name, user_id=user.get_username())
    message_send(session=session, text=text, actor=user)
    return session


# What must be done before a new turn's transaction may commit, run by turn_add once the turn's row
# is written: until the commit no worker can claim the turn (the claim waits on the session row),
# so work started earlier goes on meanwhile (agents_app.api.run: its follower's join of the
# session's group, which overlaps the message's checks and the turn's insert).
_before_turn_commit: contextvars.ContextVar[Callable[[], object] | None] = contextvars.ContextVar(
    "adkweb_before_turn_commit", default=None
)


@contextmanager
def before_turn_commit(wait: Callable[[], object]) -> Iterator[None]:
    """Inside the block, `wait()` is called by each turn_add once its turn is written, before the
    transaction can commit (it may raise: the transaction then rolls back, nothing queued)."""
    token = _before_turn_commit.set(wait)
    try:
        yield
    finally:
        _before_turn_commit.reset(token)


@transaction.atomic
def turn_create(
    *,
    session: AdkSession,
    content: types.Content | None,
    actor: Any = None,
    state_delta: dict | None = None,
    streaming: bool = False,
    invocation_id: str = "",
) -> Turn:
    """Queue work for a session; the worker is told to look after commit. No content: the agent
    runs again on the session's history (ADK's run without a new message), or, with an
    invocation id, continues that invocation (ADK's resume)."""
    return turn_add(
        session=session,
        content=content,
        actor=actor,
        state_delta=state_delta,
        streaming=streaming,
        invocation_id=invocation_id,
        ends=len(transaction.get_connection().atomic_blocks) == 1,  # this block is the transaction
    )


def turn_add(
    *,
    session: AdkSession,
    content: types.Content | None,
    actor: Any = None,
    state_delta: dict | None = None,
    streaming: bool = False,
    invocation_id: str = "",
    enqueue: bool = True,
    ends: bool = False,
) -> Turn:
    """turn_create inside the caller's transaction (no savepoint of its own: an error here rolls
    the caller's transaction back). Must run in an atomic block: the enqueue waits for its commit, or
    leaves just before it where `wake_before_commit` says so (`enqueue=False`: the caller enqueues,
    e.g. approvals.decisions before its commit). `ends`: the caller's transaction is this turn's writes
    and nothing more (turn_create's outermost block): on PostgreSQL its COMMIT may leave with them."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("turn_add runs inside a transaction (use turn_create otherwise).")
    fields = _turn_fields(session, content, actor, state_delta, streaming, invocation_id)
    person = fields["created_by"]
    capped = fields["kind"] == Turn.Kind.MESSAGE and person is not None  # answers to tickets are never capped
    if transaction.get_connection().vendor == "postgresql":  # the writes in one round trip
        cap = settings.ADKWEB_MAX_QUEUED_TURNS_PER_USER if capped else 0
        # Its wake-up leaves as soon as the row is written, before the Turn is built (the queue stage).
        ends = ends and _before_turn_commit.get() is None  # a wait may still roll the transaction back
        found = turn_insert(**fields, cap=max(cap, 0), written=lambda: _turn_written(session.pk, enqueue), ends=ends)
        if found is None:
            _too_many(person, cap)
        return cast(Turn, found)
    if capped:
        turn_quota_check(person)  # new agent work a person asks for
    if transaction.get_connection().vendor == "sqlite":
        turn = turn_insert_sqlite(**fields)
    elif session_lock(session.pk):  # the live row, as turn_insert's status write takes it
        turn = Turn.objects.create(**fields)
    else:
        raise session_gone(session)
    _turn_written(session.pk, enqueue)
    return turn


def _turn_written(session_pk: int, enqueue: bool) -> None:
    """What follows a new turn's write in its transaction: the caller's wait (before_turn_commit), then,
    unless the caller sends it, its wake-up."""
    wait = _before_turn_commit.get()
    if wait is not None:
        wait()
    if enqueue:
        queueing.turn_enqueue(session_pk)  # the row is locked (the insert's status write): see wake_before_commit


def turn_add_riding(
    *,
    session: AdkSession,
    content: types.Content,
    actor: Any = None,
    state_delta: dict | None = None,
    streaming: bool = False,
) -> TurnRiding | None:
    """turn_add's writes for an answer's turn (function responses: never capped) as CTEs for the caller's
    own statement on PostgreSQL (approvals.record: a decision's record), one round trip fewer; the caller
    holds the session row (its insert's status write would take it) and sends the wake-up itself
    (turn_add(enqueue=False)'s case). None: not an answer, or not PostgreSQL (call turn_add)."""
    db = transaction.get_connection()
    if not db.in_atomic_block:
        raise RuntimeError("turn_add_riding runs inside a transaction.")
    if db.vendor != "postgresql":
        return None
    fields = _turn_fields(session, content, actor, state_delta, streaming, "")
    if fields["kind"] != Turn.Kind.FUNCTION_RESPONSE:
        return None
    return turn_insert_riding(wait=_before_turn_commit.get(), **fields)


def _turn_fields(
    session: AdkSession,
    content: types.Content | None,
    actor: Any,
    state_delta: dict | None,
    streaming: bool,
    invocation_id: str,
) -> TurnFields:
    """A new turn's own fields: an answer's (a function response among its parts) or a message's; its
    creator a signed-in person or nobody; an invocation to continue only without new content."""
    parts = content.parts or [] if content is not None else []
    kind = Turn.Kind.FUNCTION_RESPONSE if any(p.function_response for p in parts) else Turn.Kind.MESSAGE
    return {
        "session": session,
        "kind": kind,
        "content": content_json(content) if content is not None else {},
        "state_delta": state_delta or None,
        "streaming": streaming,
        "created_by": actor if actor is not None and actor.is_authenticated else None,
        "invocation_id": invocation_id if content is None else "",
    }


def session_lock(session_pk: int) -> bool:
    """Lock a session row for the rest of the transaction (FOR NO KEY UPDATE: rows that reference it
    may still be inserted). Writers that touch a session's tickets or turns and its row take the
    row first (agents_app.session_status). False: no such (live) session, nothing locked."""
    return bool(list(AdkSession.objects.select_for_update(no_key=True).filter(pk=session_pk).values_list("pk")))


@contextmanager
def session_locked(session_pk: int) -> Iterator[None]:
    """`session_lock`, and inside the block the saves of the session's turns and tickets keep its
    stored status in one statement (`session_status.row_lock_held`) instead of taking the lock
    again in a savepoint and computing the status in another statement. Inside a transaction."""
    if not session_lock(session_pk):
        yield  # nothing locked: the saves take the lock themselves, as without this
        return
    with row_lock_held(session_pk):
        yield


def message_send(*, session: AdkSession, text: str, actor: Any = None, streaming: bool = True) -> Turn:
    """A user's chat message to the agent."""
    text = (text or "").strip()
    if not text:
        raise InvalidMessage("The message is empty.")
    return turn_create(session=session, content=text_content(text), actor=actor, streaming=streaming)


@transaction.atomic
def turn_retry(*, turn: Turn) -> Turn:
    """Queue a failed turn again. Only if it stored no event: then the agent never saw its message
    or answer (e.g. the agent was misconfigured), and running it again loses and repeats nothing."""
    from .events import notify_session_status, notify_turn_retried

    # The session's row first, as every writer of its turns takes it; archived since the page read it
    # (its delete committed meanwhile): refused, where the turn was queued in it, never to run.
    if not session_lock(turn.session_id):
        raise session_gone(turn.session)
    with row_lock_held(turn.session_id):
        turn = Turn.objects.select_for_update().get(pk=turn.pk)
        if turn.status != Turn.Status.FAILED:
            raise TurnNotRetryable(f"Turn {turn.pk} is {turn.status}; only a failed turn can be retried.")
        if turn.events.exists():
            raise TurnNotRetryable(
                "This turn reached the agent (its events are stored), so running it again would repeat it; "
                "send a new message instead."
            )
        if named := refused_keys(turn.created_by, turn.state_delta):  # stored before ad99096 checked it
            raise TurnNotRetryable(
                f"This turn carries app-wide state its sender may not set ({named}); send a new message instead."
            )
        turn.status, turn.error, turn.attempts = Turn.Status.QUEUED, "", 0
        turn.started_at = turn.finished_at = None
        turn.save(update_fields=["status", "error", "attempts", "started_at", "finished_at"])
    session_pk, turn_id = turn.session_id, turn.pk
    transaction.on_commit(lambda: queueing.session_enqueue(session_pk=session_pk), robust=True)
    transaction.on_commit(lambda: notify_turn_retried(session_pk=session_pk, turn_id=turn_id), robust=True)
    transaction.on_commit(lambda: notify_session_status(session_pk=session_pk), robust=True)
    return turn


def agent_config_check(*, config: Any) -> None:
    """Build the agent once so configuration errors (unknown tools, cycles) surface at save time."""
    if config.enabled:
        agents.build_agent(config.name)
