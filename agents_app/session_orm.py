"""The session store's checked path, on the ORM (SQLite, and PostgreSQL whenever the one-statement
path of agents_app.session_sql stored nothing): lock the session row, say which check failed (a
stale copy, a lost lease, a deleted session), store the event and save the row. Also the pieces
the service shares on both databases: what an event row holds, state splitting and merging."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import QuerySet
from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions import _session_util
from google.adk.sessions.session import Session
from google.adk.sessions.state import State

from adkweb import compiled, compiled_insert

from .event_json import event_interrupt_ids, event_json_text, event_response_ids
from .events import EVENT_DATA_MAX
from .leases import Lease, LeaseLost
from .models import AdkSession, AppState, StoredEvent, Turn, UserState

STALE_MESSAGE = "The session in storage has changed since this copy was read (stale session). Reload it and retry."


def update_marker(pk: int, revision: int) -> str:
    """A copy's `_storage_update_marker`: the row it was read from and its revision then. The row's
    pk matters: a session deleted (archived) and created again with the same id starts again at
    revision 0, and a copy of the old one must not write into the new one."""
    return f"{pk}:{revision}"


def parse_marker(marker: str | None) -> tuple[int, int] | None:
    """(pk, revision) of a marker made by update_marker; None for anything else."""
    pk, sep, revision = (marker or "").partition(":")
    if not sep or not pk.isdigit() or not revision.isdigit():
        return None
    return int(pk), int(revision)


def split_state(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return _session_util.extract_json_safe_state_delta(state or {})


def merge(app: dict[str, Any], user: dict[str, Any], session: dict[str, Any]) -> dict[str, Any]:
    merged = dict(session)
    merged.update({State.APP_PREFIX + k: v for k, v in app.items()})
    merged.update({State.USER_PREFIX + k: v for k, v in user.items()})
    return merged


@dataclass
class NewEvent:
    """An event row to store, serialised once, and what storing it changes."""

    event_id: str
    invocation_id: str
    author: str
    ts: float
    data: str  # JSON text (event_json_text)
    interrupt_ids: list[str]
    response_ids: list[str]
    turn_id: int | None
    record_invocation: bool  # the turn's invocation id is to be written with this event
    deltas: dict[str, dict[str, Any]] | None

    @classmethod
    def of(cls, event: Event, turn_id: int | None, recorded: set[str] | None) -> NewEvent:
        invocation_id = event.invocation_id or ""
        delta = event.actions.state_delta if event.actions else None
        return cls(
            event_id=event.id,
            invocation_id=invocation_id,
            author=event.author or "",
            ts=event.timestamp,
            data=event_json_text(event),
            interrupt_ids=event_interrupt_ids(event),
            response_ids=event_response_ids(event),
            turn_id=turn_id,
            record_invocation=bool(turn_id is not None and invocation_id and invocation_id not in (recorded or ())),
            deltas=split_state(delta) if delta else None,
        )

    def columns(self) -> dict[str, Any]:
        """The keyword arguments of session_sql.append."""
        return {
            "ts": self.ts,
            "event_id": self.event_id,
            "invocation_id": self.invocation_id,
            "author": self.author,
            "data": self.data,
            "interrupt_ids": self.interrupt_ids,
            "response_ids": self.response_ids,
            "turn_id": self.turn_id,
            "record_invocation": self.record_invocation,
            "deltas": self.deltas,
        }

    def message(self, session_pk: int, event_pk: int, revision: int) -> dict[str, Any]:
        """What API followers of the turn take from the published message (agents_app.events.
        SessionEventMessage), and what a page's fragment is rendered from without reading the row back
        (the user's too). The event as stored, JSON text: parsed only by those who read it (a follower,
        a page's fragment), not by the worker for every event of every turn."""
        small = self.turn_id is not None and len(self.data) <= EVENT_DATA_MAX
        return {
            "session_pk": session_pk,
            "event_pk": event_pk,
            "revision": revision,
            "turn_id": self.turn_id,
            "author": self.author,
            "data_json": self.data if small else None,
            "timestamp": self.ts,
        }

    def row(self, pk: int, session: AdkSession) -> StoredEvent:
        """The stored row as a model instance (for event hooks), without reading it back."""
        stored = StoredEvent(
            pk=pk,
            session=session,
            event_id=self.event_id,
            invocation_id=self.invocation_id,
            author=self.author,
            timestamp=self.ts,
            data=json.loads(self.data),
            interrupt_ids=self.interrupt_ids,
            response_ids=self.response_ids,
            turn_id=self.turn_id,
        )
        stored._state.adding = False
        stored._state.db = session._state.db
        return stored


def to_session(
    app_name: str,
    user_id: str,
    session_id: str,
    state: dict[str, Any],
    events: list[Event],
    update_time: float,
    pk: int,
    revision: int,
) -> Session:
    session = Session(
        app_name=app_name, user_id=user_id, id=session_id, state=state, events=events, last_update_time=update_time
    )
    session._storage_update_marker = update_marker(pk, revision)
    return session


def loaded_session(app_name: str, user_id: str, session_id: str, loaded: Any) -> Session | None:
    """The ADK session from session_sql's Loaded (None: not there)."""
    if loaded is None:
        return None
    events = [Event.model_validate_json(text) for text in loaded.events]
    merged = merge(loaded.app_state, loaded.user_state, loaded.state)
    return to_session(app_name, user_id, session_id, merged, events, loaded.update_time, loaded.pk, loaded.revision)


# The reads every session's creation makes, compiled once per process (the ORM compiled each per call).
def app_state(app_name: str) -> dict[str, Any]:
    found = compiled.rows("session_app_state", (), _app_state, app_name)
    return (found[0][0] if found else None) or {}


def _app_state(app_name: str) -> QuerySet:
    return AppState.objects.filter(app_name=app_name).order_by().values_list("state")[:1]


def user_state(app_name: str, user_id: str) -> dict[str, Any]:
    found = compiled.rows("session_user_state", (), _user_state, app_name, user_id)
    return (found[0][0] if found else None) or {}


def _user_state(app_name: str, user_id: str) -> QuerySet:
    return UserState.objects.filter(app_name=app_name, user_id=user_id).order_by().values_list("state")[:1]


def _live(app_name: str, user_id: str, session_id: str) -> QuerySet:
    found = AdkSession.objects.filter(app_name=app_name, user_id=user_id, session_id=session_id)
    return found.order_by().values_list("pk")[:1]


def _upsert_app_state(app_name: str, delta: dict[str, Any], ts: float) -> None:
    row, _ = AppState.objects.select_for_update().get_or_create(app_name=app_name)
    row.state = {**row.state, **delta}
    row.update_time = ts
    row.save()


def _upsert_user_state(app_name: str, user_id: str, delta: dict[str, Any], ts: float) -> None:
    row, _ = UserState.objects.select_for_update().get_or_create(app_name=app_name, user_id=user_id)
    row.state = {**row.state, **delta}
    row.update_time = ts
    row.save()


@transaction.atomic
def create(
    app_name: str, user_id: str, session_id: str, deltas: dict[str, dict[str, Any]], now: float
) -> tuple[int, int, dict[str, Any], dict[str, Any]]:
    """Create a session (AlreadyExistsError if a live one has this identity): (pk, revision, app
    state, user state)."""
    if compiled.rows("session_live", (), _live, app_name, user_id, session_id):
        raise AlreadyExistsError(f"Session with id {session_id} already exists.")
    if deltas["app"]:
        _upsert_app_state(app_name, deltas["app"], now)
    if deltas["user"]:
        _upsert_user_state(app_name, user_id, deltas["user"], now)
    try:
        with transaction.atomic():
            row = AdkSession(
                app_name=app_name,
                user_id=user_id,
                session_id=session_id,
                state=deltas["session"],
                create_time=now,
                update_time=now,
            )
            if connection.vendor == "sqlite":
                compiled_insert.inserted(row)  # the ORM's INSERT, written once per process (no signal listens to it)
            else:
                row.save(force_insert=True)  # as objects.create
    except IntegrityError as exc:
        raise AlreadyExistsError(f"Session with id {session_id} already exists.") from exc
    return row.pk, row.revision, app_state(app_name), user_state(app_name, user_id)


def store_locked(session: Session, new: NewEvent, lease: Lease | None) -> tuple[AdkSession, StoredEvent]:
    """Store an event in the caller's transaction after the checks on the locked session row (which
    raise: StaleSessionError, LeaseLost, SessionNotFoundError): (the saved row, the event row)."""
    row = _locked_row(session, lease)
    deltas = new.deltas
    if deltas:
        if deltas["app"]:
            _upsert_app_state(session.app_name, deltas["app"], new.ts)
        if deltas["user"]:
            _upsert_user_state(session.app_name, session.user_id, deltas["user"], new.ts)
    stored = StoredEvent.objects.create(
        session=row,
        event_id=new.event_id,
        invocation_id=new.invocation_id,
        author=new.author,
        timestamp=new.ts,
        data=json.loads(new.data),
        interrupt_ids=new.interrupt_ids,
        response_ids=new.response_ids,
        turn_id=new.turn_id,
    )
    if new.record_invocation:
        # The turn's invocation, recorded with its first event: a crashed run is resumed, not re-run.
        Turn.objects.filter(pk=new.turn_id or 0, invocation_id="").update(invocation_id=new.invocation_id)
    if deltas and deltas["session"]:
        row.state = {**row.state, **deltas["session"]}
    row.revision += 1
    row.update_time = max(row.update_time, new.ts)
    row.save(update_fields=["state", "revision", "update_time", "lease_expires_at"])
    return row, stored


def _locked_row(session: Session, lease: Lease | None) -> AdkSession:
    """The session row, locked, after the stale-writer and lease checks (which raise). The
    caller stores the event and saves the row (revision, update time, state)."""
    row = (
        AdkSession.objects.select_for_update()
        .filter(app_name=session.app_name, user_id=session.user_id, session_id=session.id)
        .first()
    )
    if row is None:
        raise SessionNotFoundError(f"Session {session.id} not found.")
    marker = session._storage_update_marker
    if marker is not None and parse_marker(marker) != (row.pk, row.revision):
        raise StaleSessionError(STALE_MESSAGE)
    if marker is None and row.update_time > session.last_update_time:
        raise StaleSessionError(STALE_MESSAGE)
    if lease is not None:  # a worker's run: only the lease owner stores, and storing renews the lease
        if row.lease_owner != lease.owner:
            lease.lost = True
            raise LeaseLost(f"Session {session.id}: another worker owns this run now; nothing stored.")
        row.lease_expires_at = lease.expiry()
    return row
