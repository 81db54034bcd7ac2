"""DjangoSessionService: ADK's BaseSessionService on Django models.

Each operation is one sync function run through one `sync_to_async` (Django's async ORM has no
transactions), except, on PostgreSQL outside a transaction, create, get and the append of an event
no hook wants or whose hooks' work all rides in its statement (approvals' ticket rider): their one
statement is sent from the event loop (agents_app.session_async: no thread hop), and the riders'
after-commit work is awaited there, after the event's own message. Events are stored as
`Event.model_dump_json(exclude_none=True)` and read back with `Event.model_validate(_json)`, so every
field ADK has survives the round trip.

On PostgreSQL each operation is one statement (agents_app.session_sql): an append is one round trip,
its hooks' work riding in it, unless a hook that wants the event cannot ride (approvals: a policy
applies, an abort...), and then that statement and the hooks share one transaction. On SQLite
(embedded mode) an event that changes no state is stored in plain SQL (agents_app.session_sqlite),
the hooks that want it in its transaction. Otherwise, and whenever either finds something wrong (a
stale copy, a lost lease, a deleted session), the ORM path below locks the row, checks it all and
says which check failed.
"""

from __future__ import annotations

import contextvars
import time
import uuid
from typing import Any

from asgiref.sync import sync_to_async
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session

from adkweb.live import abatched, ask_also

from . import session_async, session_orm, session_sql, session_sqlite, session_sqlite_loop
from .event_json import (  # noqa: F401  (the store's serialisation, imported from here by the API, pages, benches)
    event_from_json,
    event_interrupt_ids,
    event_json_text,
    event_response_ids,
    event_to_json,
)
from .events import anotify_session_event, apublish_in_order, publishes_sent, turn_stored
from .leases import current_lease
from .session_append import (  # noqa: F401  (current_turn_*: the turn runner sets them)
    EventWrites,
    _on_postgresql,
    current_turn_id,
    current_turn_invocations,
)
from .session_archive import SessionBusy, asession_delete, session_archive, session_delete  # noqa: F401  (SessionBusy: services)
from .session_hooks import loop_riders, register_event_hook  # noqa: F401  (register_event_hook: approvals)
from .session_orm import (  # noqa: F401  (STALE_MESSAGE: tests; parse_marker: approvals)
    STALE_MESSAGE,
    loaded_session,
    merge,
    parse_marker,
    split_state,
    to_session,
)
from .session_sql import Rider  # noqa: F401  (event hooks' riders: approvals.ticket_rider)

# A session read ahead by the turn runner (the drain's claim read it in its own statement,
# agents_app.turn_sql): the Runner's first get_session of it (no config) takes it instead of a read of
# its own, once. [(app_name, user_id, session_id, session_sql.Loaded)]; emptied when taken.
read_ahead: contextvars.ContextVar[list[tuple[str, str, str, Any]] | None] = contextvars.ContextVar(
    "adkweb_session_read_ahead", default=None
)


def _taken_ahead(app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None) -> Any:
    """The session `read_ahead` holds for this get_session (taken: the next one reads), else None."""
    ahead = read_ahead.get()
    if not ahead or config is not None or ahead[0][:3] != (app_name, user_id, session_id):
        return None
    return ahead.pop()[3]


async def _publish_with_riders(
    *, message: dict[str, Any], riders: list[session_sql.Rider], done: session_sql.Appended
) -> None:
    """An event stored from the loop with its hooks' riders, committed: its message, then what the
    riders announce (a ticket opened or answered by it: never before its event), in one batch; the
    groups the riders will ask about are asked with the event's question (one round trip for both)."""
    async with abatched():
        ask_also([group for rider in riders for group in rider.asks])
        await anotify_session_event(**message)
        await session_async.announce(riders, done)


def _listed(app_name: str, rows: list[session_sql.Listed]) -> ListSessionsResponse:
    return ListSessionsResponse(
        sessions=[
            to_session(app_name, user, sid, merge(app_state, user_state, state), [], update_time, pk, revision)
            for user, sid, update_time, pk, revision, state, app_state, user_state in rows
        ]
    )


def _get_params(*, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None) -> list[Any]:
    """session_sql.GET's parameters. Events in append order (row id), as the runner and
    InMemorySessionService see them: ADK appends some events out of timestamp order (a
    confirmation request before the older placeholder response)."""
    with_events = not (config and config.num_recent_events == 0)
    after = config.after_timestamp if config else None
    limit = config.num_recent_events if config else None
    return session_sql.get_params(app_name, user_id, session_id, with_events, after, limit)


class DjangoSessionService(EventWrites, BaseSessionService):
    """ADK sessions, events and app/user state in the Django database."""

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        if session_async.usable():  # one statement from the loop: no thread hop
            session_id = (session_id or "").strip() or str(uuid.uuid4())
            deltas, now = split_state(state or {}), time.time()
            try:
                made = await session_async.create(
                    app_name=app_name, user_id=user_id, session_id=session_id, deltas=deltas, now=now
                )
            except session_async.Busy:
                pass
            else:
                if made is None:
                    raise AlreadyExistsError(f"Session with id {session_id} already exists.")
                return self._created(app_name, user_id, session_id, deltas, now, made)
        return await sync_to_async(self.create_session_sync)(
            app_name=app_name, user_id=user_id, state=state, session_id=session_id
        )

    # Sync twins of the async contract, for Django code that is not async (views, services, the API).
    def create_session_sync(
        self, *, app_name: str, user_id: str, state: dict[str, Any] | None = None, session_id: str | None = None
    ) -> Session:
        session_id = (session_id or "").strip() or str(uuid.uuid4())
        deltas = split_state(state or {})
        now = time.time()
        if _on_postgresql():
            made = session_sql.create(app_name=app_name, user_id=user_id, session_id=session_id, deltas=deltas, now=now)
            if made is None:
                raise AlreadyExistsError(f"Session with id {session_id} already exists.")
        else:
            made = session_orm.create(app_name, user_id, session_id, deltas, now)
        return self._created(app_name, user_id, session_id, deltas, now, made)

    @staticmethod
    def _created(
        app_name: str, user_id: str, session_id: str, deltas: dict, now: float, made: tuple[int, int, dict, dict]
    ) -> Session:
        pk, revision, app_state, user_state = made
        merged = merge(app_state, user_state, deltas["session"])
        return to_session(app_name, user_id, session_id, merged, [], now, pk, revision)

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        if (ahead := _taken_ahead(app_name, user_id, session_id, config)) is not None:
            return loaded_session(app_name, user_id, session_id, ahead)
        if session_async.usable():  # one statement from the loop: no thread hop
            params = _get_params(app_name=app_name, user_id=user_id, session_id=session_id, config=config)
            try:
                return loaded_session(app_name, user_id, session_id, await session_async.get(params))
            except session_async.Busy:
                pass
        return await sync_to_async(self.get_session_sync)(
            app_name=app_name, user_id=user_id, session_id=session_id, config=config
        )

    def get_session_sync(
        self, *, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None = None
    ) -> Session | None:
        with_events = not (config and config.num_recent_events == 0)
        after = config.after_timestamp if config else None
        limit = config.num_recent_events if config else None
        if _on_postgresql():
            loaded = session_sql.get(
                app_name=app_name, user_id=user_id, session_id=session_id, events=with_events, after=after, limit=limit
            )
            return loaded_session(app_name, user_id, session_id, loaded)
        got = session_sqlite.get(
            app_name=app_name, user_id=user_id, session_id=session_id, events=with_events, after=after, limit=limit
        )
        if got is None:
            return None
        pk, revision, update_time, state, app_state, user_state, texts = got
        events = [Event.model_validate_json(text) for text in texts]
        merged = merge(app_state, user_state, state)
        return to_session(app_name, user_id, session_id, merged, events, update_time, pk, revision)

    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        if session_async.usable():  # one statement from the loop: no thread hop
            try:
                return _listed(app_name, await session_async.listed(app_name=app_name, user_id=user_id))
            except session_async.Busy:
                pass
        return await sync_to_async(self.list_sessions_sync)(app_name=app_name, user_id=user_id)

    def list_sessions_sync(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        return _listed(app_name, session_sql.listed(app_name=app_name, user_id=user_id))

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        if session_async.usable():  # a session that owes nothing: one statement from the loop
            await asession_delete(app_name=app_name, user_id=user_id, session_id=session_id)
            return
        await sync_to_async(self.delete_session_sync)(app_name=app_name, user_id=user_id, session_id=session_id)

    def delete_session_sync(self, *, app_name: str, user_id: str, session_id: str, actor: Any = None) -> None:
        """ADK's delete: the session is archived (gone from every read here), never erased."""
        session_delete(app_name=app_name, user_id=user_id, session_id=session_id, actor=actor)

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        return await sync_to_async(session_orm.user_state)(app_name, user_id)

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        turn_id = current_turn_id.get()
        riders = loop_riders(event, session) if session_async.usable() else None
        if riders is not None:  # one statement from the loop, the hooks' work riding in it
            stored = await self._store_event_async(session, event, turn_id, current_lease.get(), riders)
            if stored is not None:  # published from here (in a turn: in order, while it goes on)
                message, done = stored
                turn_stored(message["revision"])  # the drain's end sent ahead (agents_app.runner)
                if riders:
                    session_async.committed(riders, done)  # what needs no order with the publish: now
                    await apublish_in_order(_publish_with_riders, message=message, riders=riders, done=done)
                else:
                    await apublish_in_order(anotify_session_event, **message)
                return self._commit_event_to_session(session, event)
        elif session_sqlite_loop.usable():  # SQLite: an event no hook wants, stored from the loop
            recorded = current_turn_invocations.get()
            sent = session_sqlite_loop.store(session, event, turn_id, current_lease.get(), recorded)
            if sent is not None:
                turn_stored(sent["revision"])
                await apublish_in_order(anotify_session_event, **sent)
                return self._commit_event_to_session(session, event)
        await publishes_sent()  # the thread path may publish (a ticket hook): not before what is queued
        committed = await sync_to_async(self._store_event)(
            session, event, turn_id, current_lease.get(), publish_committed=False
        )
        turn_stored(committed["revision"] if committed is not None else None)
        if committed is not None:  # published from here (in a turn: in order, while it goes on)
            await apublish_in_order(anotify_session_event, **committed)
        return self._commit_event_to_session(session, event)
