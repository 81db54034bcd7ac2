"""The session store's writes of an event (DjangoSessionService's, through EventWrites): the event
stored with what it changes and its hooks' work, by one statement from the event loop
(`_store_event_async`: PostgreSQL, session_async) or on the database thread (`_store_event`: one
statement on PostgreSQL, plain SQL on SQLite for an event that changes no state, else the ORM's
checked path, agents_app.session_orm, which says which check failed). agents_app.session_service
decides which path an append takes and publishes what was stored."""

from __future__ import annotations

import contextvars
from contextlib import nullcontext
from typing import Any

from django.db import connection, transaction
from google.adk.events.event import Event
from google.adk.sessions.session import Session

from . import session_async, session_orm, session_sql, session_sqlite
from .events import notify_session_event
from .leases import Lease
from .session_hooks import EventHook, hooks_for, riders_for
from .session_orm import NewEvent, parse_marker, update_marker
from .session_status import row_lock_held

# The Turn whose run is storing events (set by the turn runner), recorded on each event row.
current_turn_id: contextvars.ContextVar[int | None] = contextvars.ContextVar("current_turn_id", default=None)
# The invocation ids already recorded on that Turn (a set the runner sets per turn): each is written
# once, with the turn's first event of it, rather than tried again with every event.
current_turn_invocations: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar(
    "current_turn_invocations", default=None
)


def _on_postgresql() -> bool:
    return connection.vendor == "postgresql"


class EventWrites:
    """An event's writes, DjangoSessionService's (a mixin: tests and benches patch them on it)."""

    def _store_event(
        self,
        session: Session,
        event: Event,
        turn_id: int | None,
        lease: Lease | None = None,
        *,
        publish_committed: bool = True,
    ) -> dict[str, Any] | None:
        """Store the event and what it changes (one transaction), check and renew the lease, run
        the event hooks that want it inside that transaction; then (after commit) publish it.
        `publish_committed=False`: once committed, the message to publish is returned
        rather than published here (inside a caller's transaction it is published on its commit)."""
        new = NewEvent.of(event, turn_id, current_turn_invocations.get())
        session_pk, event_pk, revision = self._write(session, event, new, hooks_for(event, session), lease)
        message = new.message(session_pk, event_pk, revision)
        if not publish_committed and not connection.in_atomic_block:
            return message
        transaction.on_commit(lambda: notify_session_event(**message), robust=True)
        return None

    async def _store_event_async(
        self, session: Session, event: Event, turn_id: int | None, lease: Lease | None, riders: list[session_sql.Rider]
    ) -> tuple[dict[str, Any], session_sql.Appended] | None:
        """An event stored by the append's one statement from the event loop (session_async; no thread
        hop), with its hooks' `riders` (their writes in the statement), committed: the message to
        publish and what was stored (the riders' values, to announce after it). None when nothing
        was stored (a stale copy, a lost lease, a deleted session, a rider's guard: the thread path's
        checked path says which, or runs the hooks; or no loop connection free): the caller takes the
        thread path. Nothing here may touch Django's connection (the loop's thread must not make one)."""
        copy_of = parse_marker(session._storage_update_marker)
        if copy_of is None:
            return None
        recorded = current_turn_invocations.get()
        new = NewEvent.of(event, turn_id, recorded)
        try:
            done = await session_async.append(
                app_name=session.app_name,
                user_id=session.user_id,
                session_id=session.id,
                copy_of=copy_of,
                lease=lease,
                columns=new.columns(),
                riders=riders,
            )
        except session_async.Busy:
            return None
        if done is None:
            return None
        if new.record_invocation and recorded is not None:  # committed: autocommit
            recorded.add(new.invocation_id)
        session.last_update_time = done.update_time
        session._storage_update_marker = update_marker(done.session_pk, done.revision)
        return new.message(done.session_pk, done.event_pk, done.revision), done

    def _write(
        self, session: Session, event: Event, new: NewEvent, hooks: list[EventHook], lease: Lease | None
    ) -> tuple[int, int, int]:
        copy_of = parse_marker(session._storage_update_marker)  # (pk, revision) it was read at
        if _on_postgresql() and copy_of is not None:
            riders = riders_for(hooks, event, session) if hooks else None
            # The hooks' work rides in the statement (no transaction around it), or they run in one.
            in_transaction = [] if riders is not None else hooks
            with transaction.atomic() if in_transaction else nullcontext():
                done = session_sql.append(
                    app_name=session.app_name,
                    user_id=session.user_id,
                    session_id=session.id,
                    session_pk=copy_of[0],
                    revision=copy_of[1],
                    lease=(lease.owner, lease.expiry()) if lease is not None else None,
                    whole_row=bool(in_transaction),
                    riders=riders,
                    **new.columns(),
                )
                if done is not None:
                    return self._appended(session, event, new, in_transaction, done)
        if copy_of is not None and not (new.deltas and any(new.deltas.values())) and not _on_postgresql():
            # SQLite, an event that changes no state: plain SQL, the row's checks in its WHERE, and the
            # hooks that want it in the same transaction (given the row as the UPDATE saved it).
            with transaction.atomic():
                appended = session_sqlite.append(
                    app_name=session.app_name,
                    user_id=session.user_id,
                    session_id=session.id,
                    session_pk=copy_of[0],
                    revision=copy_of[1],
                    lease=(lease.owner, lease.expiry()) if lease is not None else None,
                    whole_row=bool(hooks),
                    **{k: v for k, v in new.columns().items() if k != "deltas"},
                )
                if appended is not None:
                    return self._appended(session, event, new, hooks, appended)
        # A state change on SQLite, a copy without a revision marker, or the one statement stored
        # nothing: say why (or, when a rider's guard said no, store it here with the hooks).
        with transaction.atomic():
            row, stored = session_orm.store_locked(session, new, lease)
            with row_lock_held(row.pk):  # store_locked took it
                for hook in hooks:
                    hook(row, stored, event)
            self._stored(session, new, row.pk, row.revision, row.update_time)
            return row.pk, stored.pk, row.revision

    def _appended(
        self, session: Session, event: Event, new: NewEvent, hooks: list[EventHook], done: session_sql.Appended
    ) -> tuple[int, int, int]:
        """After one statement's append (either database) stored the event: the hooks given the row as
        saved, in the append's transaction, then this copy brought up to date."""
        if hooks:
            assert done.row is not None
            stored = new.row(done.event_pk, done.row)
            # PostgreSQL's UPDATE took the row lock; on SQLite the append's transaction holds the file.
            with row_lock_held(done.session_pk):
                for hook in hooks:
                    hook(done.row, stored, event)
        self._stored(session, new, done.session_pk, done.revision, done.update_time)
        return done.session_pk, done.event_pk, done.revision

    @staticmethod
    def _stored(session: Session, new: NewEvent, pk: int, revision: int, ts: float) -> None:
        recorded = current_turn_invocations.get()
        if new.record_invocation and recorded is not None:
            invocation_id = new.invocation_id
            transaction.on_commit(lambda: recorded.add(invocation_id))
        session.last_update_time = ts
        session._storage_update_marker = update_marker(pk, revision)
