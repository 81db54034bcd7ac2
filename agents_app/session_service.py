"""DjangoSessionService: ADK's BaseSessionService on Django models.

Each transaction lives in a sync function run through `sync_to_async` (Django's async ORM has no
transactions). Events are stored as `Event.model_dump(mode="json", exclude_none=True)` and read
back with `Event.model_validate`, so every field ADK has survives the round trip.
"""

from __future__ import annotations

import contextvars
import time
import uuid
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions import _session_util
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from google.adk.sessions.state import State

from adkweb.errors import Conflict, NotFound

from .events import notify_session_event, notify_session_status
from .leases import Lease, LeaseLost, current_lease
from .models import AdkSession, AppState, StoredEvent, Turn, UserState
from .session_status import session_status_sync

# The Turn whose run is storing events (set by the turn runner), recorded on each event row.
current_turn_id: contextvars.ContextVar[int | None] = contextvars.ContextVar("current_turn_id", default=None)
# The invocation ids already recorded on that Turn (a set the runner sets per turn): each is written
# once, with the turn's first event of it, rather than tried again with every event.
current_turn_invocations: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar(
    "current_turn_invocations", default=None
)

# Called inside the append transaction with (session row, event row, event): approvals uses it to
# open tickets for new interrupts atomically with the event that raised them.
EventHook = Callable[[AdkSession, StoredEvent, Event], None]
_event_hooks: list[EventHook] = []


def register_event_hook(hook: EventHook) -> None:
    if hook not in _event_hooks:
        _event_hooks.append(hook)


STALE_MESSAGE = "The session in storage has changed since this copy was read (stale session). Reload it and retry."


def _split_state(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return _session_util.extract_json_safe_state_delta(state or {})


def _merge(app: dict[str, Any], user: dict[str, Any], session: dict[str, Any]) -> dict[str, Any]:
    merged = dict(session)
    merged.update({State.APP_PREFIX + k: v for k, v in app.items()})
    merged.update({State.USER_PREFIX + k: v for k, v in user.items()})
    return merged


def event_to_json(event: Event) -> dict[str, Any]:
    return event.model_dump(mode="json", exclude_none=True)


def _without_nul(value: Any) -> Any:
    """PostgreSQL's jsonb cannot hold U+0000: store it as U+FFFD (the only lossy character)."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    return value


def event_from_json(data: dict[str, Any]) -> Event:
    return Event.model_validate(data)


def event_interrupt_ids(event: Event) -> list[str]:
    ids = set(event.long_running_tool_ids or ())
    return sorted(fc.id for fc in event.get_function_calls() if fc.id in ids)


def event_response_ids(event: Event) -> list[str]:
    return sorted(fr.id for fr in event.get_function_responses() if fr.id)


def _app_state(app_name: str) -> dict[str, Any]:
    row = AppState.objects.filter(app_name=app_name).values_list("state", flat=True).first()
    return row or {}


def _user_state(app_name: str, user_id: str) -> dict[str, Any]:
    row = UserState.objects.filter(app_name=app_name, user_id=user_id).values_list("state", flat=True).first()
    return row or {}


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


def _to_session(row: AdkSession, state: dict[str, Any], events: list[Event]) -> Session:
    session = Session(
        app_name=row.app_name,
        user_id=row.user_id,
        id=row.session_id,
        state=state,
        events=events,
        last_update_time=row.update_time,
    )
    session._storage_update_marker = str(row.revision)
    return session


def _claim_revision(session: Session, ts: float, lease: Lease | None) -> AdkSession | None:
    """The common append in one statement: bump the revision of this copy's session row (which
    locks it until commit), move its update time and renew the lease, only if the copy is current
    and the lease is ours; the row as it is now, or None when that did not hold (the caller then
    locks and checks the row to say why) or this copy has no revision to compare."""
    marker = session._storage_update_marker
    if marker is None or not marker.isdigit():
        return None
    quote = connection.ops.quote_name
    sets = [
        f"{quote('revision')} = {quote('revision')} + 1",
        f"{quote('update_time')} = CASE WHEN {quote('update_time')} > %s THEN {quote('update_time')} ELSE %s END",
    ]
    params: list[Any] = [ts, ts]
    where = [f"{quote(c)} = %s" for c in ("app_name", "user_id", "session_id", "revision")]
    where_params: list[Any] = [session.app_name, session.user_id, session.id, int(marker)]
    if lease is not None:
        sets.append(f"{quote('lease_expires_at')} = %s")
        params.append(connection.ops.adapt_datetimefield_value(lease.expiry()))
        where.append(f"{quote('lease_owner')} = %s")
        where_params.append(lease.owner)
    sql = f"UPDATE {quote(AdkSession._meta.db_table)} SET {', '.join(sets)} WHERE {' AND '.join(where)} RETURNING *"
    rows = list(AdkSession.objects.raw(sql, params + where_params))
    return rows[0] if rows else None


class DjangoSessionService(BaseSessionService):
    """ADK sessions, events and app/user state in the Django database."""

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        return await sync_to_async(self.create_session_sync)(
            app_name=app_name, user_id=user_id, state=state, session_id=session_id
        )

    # Sync twins of the async contract, for Django code that is not async (views, services, the API).
    @transaction.atomic
    def create_session_sync(
        self, *, app_name: str, user_id: str, state: dict[str, Any] | None = None, session_id: str | None = None
    ) -> Session:
        session_id = (session_id or "").strip() or str(uuid.uuid4())
        if AdkSession.objects.filter(app_name=app_name, user_id=user_id, session_id=session_id).exists():
            raise AlreadyExistsError(f"Session with id {session_id} already exists.")
        deltas = _split_state(state or {})
        now = time.time()
        if deltas["app"]:
            _upsert_app_state(app_name, deltas["app"], now)
        if deltas["user"]:
            _upsert_user_state(app_name, user_id, deltas["user"], now)
        try:
            with transaction.atomic():
                row = AdkSession.objects.create(
                    app_name=app_name,
                    user_id=user_id,
                    session_id=session_id,
                    state=deltas["session"],
                    create_time=now,
                    update_time=now,
                )
        except IntegrityError as exc:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.") from exc
        merged = _merge(_app_state(app_name), _user_state(app_name, user_id), row.state)
        return _to_session(row, merged, [])

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        return await sync_to_async(self.get_session_sync)(
            app_name=app_name, user_id=user_id, session_id=session_id, config=config
        )

    def get_session_sync(
        self, *, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None = None
    ) -> Session | None:
        row = AdkSession.objects.filter(app_name=app_name, user_id=user_id, session_id=session_id).first()
        if row is None:
            return None
        events: list[Event] = []
        if not (config and config.num_recent_events == 0):
            qs = StoredEvent.objects.filter(session=row)
            if config and config.after_timestamp is not None:
                qs = qs.filter(timestamp__gte=config.after_timestamp)
            # Append order (row id), as the runner and InMemorySessionService see it: ADK appends some
            # events out of timestamp order (a confirmation request before the older placeholder response).
            qs = qs.order_by("-id")
            if config and config.num_recent_events is not None:
                qs = qs[: config.num_recent_events]
            events = [event_from_json(data) for data in reversed(list(qs.values_list("data", flat=True)))]
        merged = _merge(_app_state(app_name), _user_state(app_name, user_id), row.state)
        return _to_session(row, merged, events)

    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        return await sync_to_async(self.list_sessions_sync)(app_name=app_name, user_id=user_id)

    def list_sessions_sync(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        rows = AdkSession.objects.filter(app_name=app_name)
        if user_id is not None:
            rows = rows.filter(user_id=user_id)
        rows = rows.order_by("update_time", "user_id", "session_id")
        app_state = _app_state(app_name)
        users = UserState.objects.filter(app_name=app_name)
        if user_id is not None:
            users = users.filter(user_id=user_id)
        user_states = dict(users.values_list("user_id", "state"))
        return ListSessionsResponse(
            sessions=[_to_session(r, _merge(app_state, user_states.get(r.user_id, {}), r.state), []) for r in rows]
        )

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        await sync_to_async(self.delete_session_sync)(app_name=app_name, user_id=user_id, session_id=session_id)

    def delete_session_sync(self, *, app_name: str, user_id: str, session_id: str, actor: Any = None) -> None:
        """ADK's delete: the session is archived (gone from every read here), never erased."""
        row = AdkSession.objects.filter(app_name=app_name, user_id=user_id, session_id=session_id).first()
        if row is not None:
            session_archive(session=row, actor=actor)

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        return await sync_to_async(_user_state)(app_name, user_id)

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        turn_id = current_turn_id.get()
        await sync_to_async(self._store_event)(session, event, turn_id, current_lease.get())
        return self._commit_event_to_session(session, event)

    @transaction.atomic
    def _store_event(self, session: Session, event: Event, turn_id: int | None, lease: Lease | None = None) -> None:
        ts = event.timestamp
        deltas = _split_state(event.actions.state_delta) if event.actions and event.actions.state_delta else None
        fast = None if deltas and deltas["session"] else _claim_revision(session, ts, lease)
        # A session-state change, or the one statement found something wrong: lock, check it all.
        row = fast if fast is not None else self._locked_row(session, lease)
        if deltas:
            if deltas["app"]:
                _upsert_app_state(session.app_name, deltas["app"], ts)
            if deltas["user"]:
                _upsert_user_state(session.app_name, session.user_id, deltas["user"], ts)
        stored = StoredEvent.objects.create(
            session=row,
            event_id=event.id,
            invocation_id=event.invocation_id or "",
            author=event.author or "",
            timestamp=ts,
            data=_without_nul(event_to_json(event)),
            interrupt_ids=event_interrupt_ids(event),
            response_ids=event_response_ids(event),
            turn_id=turn_id,
        )
        recorded = current_turn_invocations.get()
        if turn_id is not None and event.invocation_id and (recorded is None or event.invocation_id not in recorded):
            # The turn's invocation, recorded with its first event: a crashed run is resumed, not re-run.
            Turn.objects.filter(pk=turn_id, invocation_id="").update(invocation_id=event.invocation_id)
            if recorded is not None:
                invocation_id = event.invocation_id
                transaction.on_commit(lambda: recorded.add(invocation_id))
        if fast is None:
            if deltas and deltas["session"]:
                row.state = {**row.state, **deltas["session"]}
            row.revision += 1
            row.update_time = max(row.update_time, ts)
            row.save(update_fields=["state", "revision", "update_time", "lease_expires_at"])
        for hook in _event_hooks:
            hook(row, stored, event)
        session_pk, event_pk, revision, data = row.pk, stored.pk, row.revision, stored.data
        transaction.on_commit(
            lambda: notify_session_event(
                session_pk=session_pk,
                event_pk=event_pk,
                revision=revision,
                turn_id=turn_id,
                author=stored.author,
                data=data,
            ),
            robust=True,
        )
        session.last_update_time = row.update_time
        session._storage_update_marker = str(row.revision)

    def _locked_row(self, session: Session, lease: Lease | None) -> AdkSession:
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
        if marker is not None and marker != str(row.revision):
            raise StaleSessionError(STALE_MESSAGE)
        if marker is None and row.update_time > session.last_update_time:
            raise StaleSessionError(STALE_MESSAGE)
        if lease is not None:  # a worker's run: only the lease owner stores, and storing renews the lease
            if row.lease_owner != lease.owner:
                lease.lost = True
                raise LeaseLost(f"Session {session.id}: another worker owns this run now; nothing stored.")
            row.lease_expires_at = lease.expiry()
        return row


class SessionBusy(Conflict):
    """The agent is working in the session (HTTP 409)."""


@transaction.atomic
def session_archive(*, session: AdkSession, actor: Any = None, what: str = "delete it") -> AdkSession:
    """ "Delete" a session: archive it. ADK's API answers 404 for it from now on and the pages and
    lists no longer show it, but nothing is erased: its events, turns, tickets and responses stay
    for the audit trail. Its open tickets are cancelled (nobody will answer them); refused (409)
    while the agent works in it."""
    from approvals.services import tickets_cancel_archived

    row = AdkSession.objects.select_for_update().filter(pk=session.pk).first()
    if row is None:
        raise NotFound(f"Session not found: {session.session_id}")
    if Turn.objects.filter(session=row, status__in=(Turn.Status.QUEUED, Turn.Status.RUNNING)).exists():
        raise SessionBusy(f"The agent is working in this session; {what} once its turn has finished.")
    by = actor.get_username() if actor is not None and getattr(actor, "is_authenticated", False) else ""
    tickets_cancel_archived(session=row, by=by)
    session_status_sync(row.pk)  # before it leaves every read: its stored status is idle
    row.archived_at, row.archived_by = timezone.now(), by
    row.save(update_fields=["archived_at", "archived_by"])
    session_pk = row.pk
    transaction.on_commit(lambda: _notify_archived(session_pk), robust=True)
    return row


def _notify_archived(session_pk: int) -> None:
    notify_session_status(session_pk=session_pk)
