"""One turn of a remote app: the remote ADK server runs the agent; adkweb stores and publishes its events.

**Sessions.** A local session (app, user id, session id) has one twin on the remote server: the
same user id and the same session id, in the remote app, created there (with the session's state)
on the session's first turn. Nothing else is kept remotely for adkweb.

**Events.** Each event streamed by `/run_sse` is stored through `DjangoSessionService` exactly as
the remote sent it (same event id, invocation id, timestamp), so tickets open from
`longRunningToolIds` and requested confirmations and pages update live as for a local agent.
Partial events are published, never stored. The remote server does not stream the user's own
event: adkweb stores its copy (the content exactly as sent, the run's invocation id, an event id
of its own) just before the run's first event.

**Exactly once.** Before a request is sent, the session's link records the turn as unsettled
(committed); a stream that ends cleanly with every event stored settles it. While a turn is
unsettled the remote may hold events adkweb has not stored (a worker died mid-stream, a timeout,
an error frame): the next run of the session first reads the remote session and stores every
event it lacks (user events are matched by invocation id), attributed to the unsettled turn. A
turn that has any stored event reached the remote and is never sent again: it is closed if its
invocation finished there, or resumed by invocation id (no message) if the remote's run was cut
short. A turn with no stored event after that reading never reached the remote: sending it (again)
repeats nothing.
"""

from __future__ import annotations

import time
from typing import Any

from asgiref.sync import sync_to_async
from django.db.models import F
from django.utils import timezone
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from .. import events
from ..leases import Lease, LeaseLost, current_lease
from ..models import AdkSession, StoredEvent, Turn
from ..remote_models import RemoteApp, RemoteSession
from ..session_service import DjangoSessionService, current_turn_id
from .client import RemoteClient, RemoteError, RemoteRefused, RemoteRunError

NOT_TWICE = "adkweb does not send a message twice: send a new one to go on."
ABORTED = "INVOCATION_ABORTED"  # what ADK seals a run with when its client goes away


class RemoteSessionLost(RemoteError):
    """The remote server no longer has the session whose history adkweb keeps."""


async def remote_turn_run(turn: Turn, *, session: AdkSession, app: RemoteApp, lease: Lease | None) -> None:
    """Run (or finish) one turn on the remote server, storing and publishing what it streams."""
    link = await sync_to_async(_link)(session)
    tokens = current_turn_id.set(turn.pk), current_lease.set(lease)
    try:
        async with RemoteClient(app) as client:
            await RemoteTurn(client, turn, session, link, lease).run()
    finally:
        current_turn_id.reset(tokens[0])
        current_lease.reset(tokens[1])


class RemoteTurn:
    def __init__(self, client: RemoteClient, turn: Turn, row: AdkSession, link: RemoteSession, lease: Lease | None):
        self.client, self.turn, self.row, self.link, self.lease = client, turn, row, link, lease
        self.service = DjangoSessionService()
        self.session: Any = None
        self.stored_ids: set[str] = set()
        self.streamed = 0  # events the run streamed (partial ones left out)

    async def run(self) -> None:
        self.session = await self.service.get_session(
            app_name=self.row.app_name,
            user_id=self.row.user_id,
            session_id=self.row.session_id,
            config=GetSessionConfig(num_recent_events=0),
        )
        if self.link.unsettled_turn_id is not None:
            await self.reconcile()
        outcome, invocation_id, error = await sync_to_async(_outcome)(self.turn.pk)
        if outcome in ("finished", "failed"):
            await sync_to_async(_settle)(self.link, self.turn.pk)
            if error:
                raise RemoteRunError(f"{self.client.label}: the agent run failed: {error}")
            return  # the remote finished this turn before an earlier attempt could say so
        resuming = outcome == "open"  # it reached the remote, whose run stopped short: never send it again
        if resuming and not invocation_id:
            raise RemoteError(f"{self.client.label} received this turn but names no invocation to resume; {NOT_TWICE}")
        if not resuming and not self.turn.content and self.turn.invocation_id:
            invocation_id = self.turn.invocation_id  # a client asked to continue that invocation (no message)
        body = self._body(invocation_id if resuming or not self.turn.content else "")
        await self.ensure_remote_session()
        await sync_to_async(_unsettle)(self.link, self.turn.pk, self.lease)
        try:
            complete = await self.stream(body, message=None if resuming else self._message())
        except RemoteRefused as exc:
            await self.reconcile_quietly()
            if exc.status == 404 and "session" in str(exc).lower():
                raise self._lost() from exc
            if resuming:
                why = "It had received this turn and stopped before it finished"
                raise RemoteError(f"{exc}. {why}; {NOT_TWICE}") from exc
            raise
        except RemoteError:
            await self.reconcile_quietly()  # what the remote kept is stored: a retry never sends it twice
            raise
        if resuming and not self.streamed:
            raise RemoteError(
                f"{self.client.label} had received this turn, but its run stopped when adkweb's worker did "
                f"and resuming it produced nothing; {NOT_TWICE}"
            )
        if not complete:
            await self.reconcile()  # no event told us the invocation: read what the remote stored
        await sync_to_async(_settle)(self.link, self.turn.pk)

    # -- the request -------------------------------------------------------------------------
    def _message(self) -> types.Content | None:
        return types.Content.model_validate(self.turn.content) if self.turn.content else None

    def _body(self, invocation_id: str) -> dict[str, Any]:
        body: dict[str, Any] = {"userId": self.row.user_id, "sessionId": self.link.remote_session_id}
        if invocation_id:
            body["invocationId"] = invocation_id  # ADK resumes that invocation; no message is sent
        elif self.turn.content:
            body["newMessage"] = self.turn.content  # exactly as stored: function responses as sent
        if self.turn.state_delta and not invocation_id:
            body["stateDelta"] = self.turn.state_delta
        if self.turn.streaming:
            body["streaming"] = True
        return body

    async def ensure_remote_session(self) -> None:
        if self.link.created_remotely_at is not None:
            return
        state = {k: v for k, v in (self.session.state or {}).items() if not k.startswith("temp:")}
        await self.client.create_session(self.row.user_id, self.link.remote_session_id, state)
        await sync_to_async(_created)(self.link)

    # -- the stream --------------------------------------------------------------------------
    async def stream(self, body: dict[str, Any], *, message: types.Content | None) -> bool:
        """Store and publish every event of one `/run_sse`; True if that is all the run stored (the
        user's event included), False if the remote session must be read to know (no event came)."""
        sent_at, user_stored = time.time(), message is None and "invocationId" in body
        async for frame in self.client.run_sse(body):
            if self.lease is not None:
                self.lease.check()
            if not user_stored and message is not None:
                await self._store_user_event(message, str(frame.get("invocationId") or ""), sent_at)
                user_stored = True
            if frame.get("partial"):
                # Behind the stored events still on their way (events.TurnPublisher), as a local turn's.
                await events.apublish_in_order(
                    events.anotify_partial, session_pk=self.row.pk, event=frame, turn_id=self.turn.pk
                )
                continue
            self.streamed += 1
            await self._store(_event(frame, self.client.label))
        return user_stored

    async def _store_user_event(self, message: types.Content, invocation_id: str, sent_at: float) -> None:
        actions = EventActions(state_delta=dict(self.turn.state_delta or {}))
        event = Event(invocation_id=invocation_id, author="user", content=message, actions=actions, timestamp=sent_at)
        await self._store(event)

    async def _store(self, event: Event) -> None:
        if event.id in self.stored_ids:
            return  # ADK streams an event with artifacts twice under one id (content, then the delta)
        self.stored_ids.add(event.id)
        await self.service.append_event(self.session, event)

    # -- catching up with the remote session -------------------------------------------------
    async def reconcile(self) -> None:
        """Store every event the remote session has and adkweb lacks, for the unsettled turn."""
        remote = await self.client.get_session(self.row.user_id, self.link.remote_session_id)
        known_ids, user_invocations, has_history = await sync_to_async(_known)(self.row.pk)
        if remote is None:
            if has_history and self.link.created_remotely_at is not None:
                raise self._lost()
            return
        self.stored_ids |= known_ids
        token = current_turn_id.set(self.link.unsettled_turn_id)
        try:
            for data in remote.get("events") or []:
                if data.get("id") in known_ids or data.get("partial"):
                    continue
                if data.get("author") == "user" and data.get("invocationId") in user_invocations:
                    continue  # adkweb stored its own copy of this user event
                await self._store(_event(data, self.client.label))
        finally:
            current_turn_id.reset(token)
        if self.link.created_remotely_at is None:
            await sync_to_async(_created)(self.link)

    async def reconcile_quietly(self) -> None:
        try:
            await self.reconcile()
        except RemoteError:
            pass  # still unsettled: the next run of this session reads the remote session first

    def _lost(self) -> RemoteSessionLost:
        return RemoteSessionLost(
            f"{self.client.label} has no session {self.link.remote_session_id!r} any more (was it restarted "
            "without persistent sessions?). Its history is kept in adkweb; start a new conversation to go on."
        )


# -- database work (sync, each in its own transaction) ---------------------------------------
def _link(session: AdkSession) -> RemoteSession:
    link, _ = RemoteSession.objects.get_or_create(session=session, defaults={"remote_session_id": session.session_id})
    return link


def _unsettle(link: RemoteSession, turn_id: int, lease: Lease | None) -> None:
    """Record (committed) that a request for this turn is about to be sent, if the lease is still ours:
    a worker that lost its session to another must not send anything."""
    rows = RemoteSession.objects.filter(pk=link.pk)
    if lease is not None:
        rows = rows.filter(session__lease_owner=lease.owner)
    if rows.update(unsettled_turn_id=turn_id, sends=F("sends") + 1) != 1:
        if lease is not None:
            lease.lost = True
        raise LeaseLost(f"Session {link.pk}: another worker owns this run now; nothing sent.")
    link.unsettled_turn_id = turn_id


def _settle(link: RemoteSession, turn_id: int) -> None:
    RemoteSession.objects.filter(pk=link.pk, unsettled_turn_id=turn_id).update(unsettled_turn=None)
    link.unsettled_turn_id = None


def _created(link: RemoteSession) -> None:
    link.created_remotely_at = timezone.now()
    RemoteSession.objects.filter(pk=link.pk).update(created_remotely_at=link.created_remotely_at)


def _known(session_pk: int) -> tuple[set[str], set[str], bool]:
    """Event ids stored for the session, invocation ids of its user events, and whether it has events."""
    rows = list(StoredEvent.objects.filter(session_id=session_pk).values_list("event_id", "author", "invocation_id"))
    return {r[0] for r in rows}, {r[2] for r in rows if r[1] == "user" and r[2]}, bool(rows)


def _outcome(turn_id: int) -> tuple[str, str, str]:
    """What the turn's stored events say: ("none", "", "") nothing stored (it never reached the remote);
    ("finished" | "failed", invocation id, error) its invocation ended; ("open", invocation id, "")."""
    last = StoredEvent.objects.filter(turn_id=turn_id).order_by("-id").values_list("author", "data").first()
    if last is None:
        return "none", "", ""
    event = Event.model_validate(last[1])
    if event.error_code == ABORTED:
        return "open", event.invocation_id, ""  # the remote stopped its run when our stream broke: resume it
    if last[0] != "user" and event.error_code and not event.content:
        return "failed", event.invocation_id, f"{event.error_code}: {event.error_message or ''}".strip()
    if last[0] != "user" and (event.actions.end_of_agent or event.is_final_response()):
        return "finished", event.invocation_id, ""
    return "open", event.invocation_id, ""


def _event(data: dict[str, Any], label: str) -> Event:
    from pydantic import ValidationError

    try:
        return Event.model_validate(data)
    except ValidationError as exc:
        raise RemoteError(f"{label} sent an event adkweb cannot read: {exc.errors()[0]['msg']}.") from exc
