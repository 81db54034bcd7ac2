"""Live updates for conversations: group names and typed payloads.

Each notify_* sends the ids-only message to `session-<pk>` (the API's turn watchers and the ticket
page read the database on it) and has agents_app.fanout render the conversation page's fragment
once per audience and send it to the audience groups (pages forward it as it is)."""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Literal, NotRequired, TypedDict

from asgiref.sync import sync_to_async

from adkweb.live import abatched, agroup_send, agroups_watched, batched, group_send, seen_watched

logger = logging.getLogger(__name__)

# agents_app.fanout, registered by AgentsAppConfig.ready (it reads through selectors, which import the
# session store, which imports this module: a registration rather than an import cycle).
_fanout: Any = None


def register_fanout(module: Any) -> None:
    global _fanout
    _fanout = module


SESSIONS_GROUP = "sessions"  # every conversation list (status and last activity)


def session_group(session_pk: int) -> str:
    return f"session-{session_pk}"


class SessionEventMessage(TypedDict, total=False):
    type: Literal["session.event"]  # always there, as session_pk and event_pk
    session_pk: int
    event_pk: int
    # What an API follower (agents_app.api.watch) needs to answer without reading the database: the
    # session's revision after this event (one more than before it: a gap means a missed message),
    # the event's turn and author, and the stored event itself when it is small (EVENT_DATA_MAX).
    revision: int
    turn_id: int | None
    author: str
    data: dict


class SessionPartialMessage(TypedDict):
    type: Literal["session.partial"]
    session_pk: int
    event_id: str
    author: str
    text: str
    turn_id: int
    event: dict  # the partial ADK event as REST JSON (invocationId, nodeInfo.path, ...)


class SessionStatusMessage(TypedDict):
    type: Literal["session.status"]
    session_pk: int


class TurnFinishedMessage(TypedDict):
    type: Literal["turn.finished"]
    session_pk: int
    turn_id: int
    status: str
    # A turn that ended DONE through the drain's statement (agents_app.turn_sql.done_next): the
    # session's revision after its last event, so that a follower that accounted for every revision
    # up to it answers without reading the database (agents_app.api.watch).
    revision: NotRequired[int]


class TurnRetriedMessage(TypedDict):
    type: Literal["turn.retried"]
    session_pk: int
    turn_id: int


EVENT_DATA_MAX = 32_768  # characters of JSON: a bigger event is read from the database by its followers


@batched()
def notify_session_event(
    *,
    session_pk: int,
    event_pk: int,
    revision: int | None = None,
    turn_id: int | None = None,
    author: str = "",
    data: dict | None = None,
    timestamp: float | None = None,
) -> None:
    """A stored event: every open page of that conversation appends it; API followers of its turn
    take it from the message (`revision`, `turn_id`, `author`, `data`) when it carries them. With
    `data` and `timestamp` (what was stored), the pages' fragment is rendered without reading the
    row back."""
    group_send(session_group(session_pk), _event_message(session_pk, event_pk, revision, turn_id, author, data))
    stored = _stored(session_pk, event_pk, data, timestamp)
    _quietly("publish_event", session_pk=session_pk, event_pk=event_pk, stored=stored)


def _event_message(
    session_pk: int, event_pk: int, revision: int | None, turn_id: int | None, author: str, data: dict | None
) -> SessionEventMessage:
    message = SessionEventMessage(type="session.event", session_pk=session_pk, event_pk=event_pk)
    if revision is not None:
        message["revision"], message["turn_id"], message["author"] = revision, turn_id, author
        if data is not None and turn_id is not None and author != "user" and _small(data):
            message["data"] = data
    return message


def _stored(session_pk: int, event_pk: int, data: dict | None, timestamp: float | None) -> Any:
    """The stored row as its writer has it in memory (unsaved: the view's fields only), or None."""
    if data is None or timestamp is None:
        return None
    from .models import StoredEvent

    return StoredEvent(pk=event_pk, session_id=session_pk, timestamp=timestamp, data=data)


def _small(data: dict) -> bool:
    try:
        return len(json.dumps(data, ensure_ascii=False)) <= EVENT_DATA_MAX
    except (TypeError, ValueError):
        return False


@abatched()
async def anotify_session_event(
    *,
    session_pk: int,
    event_pk: int,
    revision: int | None = None,
    turn_id: int | None = None,
    author: str = "",
    data: dict | None = None,
    timestamp: float | None = None,
) -> None:
    """notify_session_event from async code, once the event is committed (the session store's
    appends): the message leaves from the event loop, and the thread hop to render the fragments
    (agents_app.fanout.publish_event) happens only when a page of the conversation is open. Where
    this process last heard that one is (adkweb.live.seen_watched: the turn's "running" status a
    moment ago, or its previous event), it renders without asking first, for every audience, and
    the ids-only message leaves with the fragments: one round trip instead of two before the frame."""
    await agroup_send(session_group(session_pk), _event_message(session_pk, event_pk, revision, turn_id, author, data))
    if _fanout is None:
        return
    groups = [_fanout.audience_group(session_pk, a) for a in _fanout.AUDIENCES]
    watched = set(groups) if seen_watched(groups) else await agroups_watched(groups)
    if watched:
        stored = _stored(session_pk, event_pk, data, timestamp)  # rendered as stored, not read back
        publish = sync_to_async(_quietly)
        await publish("publish_event", session_pk=session_pk, event_pk=event_pk, watched=watched, stored=stored)


def _quietly(publish: str, **kwargs: Any) -> None:
    """Rendering a live fragment must not fail the caller (it runs after commit): logged instead."""
    if _fanout is None:
        return
    try:
        getattr(_fanout, publish)(**kwargs)
    except Exception:
        logger.warning("Could not render the live fragment of %s %s.", publish, kwargs, exc_info=True)


@abatched()
async def anotify_partial(*, session_pk: int, event: dict, turn_id: int) -> None:
    """A streaming chunk (never stored): pages append it to the event with that id; API streams
    send the event as ADK gave it."""
    parts = (event.get("content") or {}).get("parts") or []
    message = SessionPartialMessage(
        type="session.partial",
        session_pk=session_pk,
        event_id=event.get("id", ""),
        author=event.get("author", ""),
        text="".join(p.get("text") or "" for p in parts if not p.get("thought")),
        turn_id=turn_id,
        event=event,
    )
    await agroup_send(session_group(session_pk), message)
    try:
        if _fanout is not None:
            await _fanout.apublish_partial(
                session_pk=session_pk,
                event_id=message["event_id"],
                author=message["author"],
                text=message["text"],
                turn_id=turn_id,
                event=event,
            )
    except Exception:
        logger.warning("Could not render a streaming chunk of session %s.", session_pk, exc_info=True)


@batched()
def notify_session_status(*, session_pk: int) -> None:
    """The conversation's status changed (running, waiting, idle, failed)."""
    msg = SessionStatusMessage(type="session.status", session_pk=session_pk)
    group_send(session_group(session_pk), msg)
    group_send(SESSIONS_GROUP, msg)
    _quietly("publish_status", session_pk=session_pk)


@abatched()
async def anotify_session_status(*, session_pk: int, status: str) -> None:
    """notify_session_status from async code (the drain's loop), with the status the caller just
    wrote: the messages leave from the loop, and the page fragment needs no read."""
    msg = SessionStatusMessage(type="session.status", session_pk=session_pk)
    await agroup_send(session_group(session_pk), msg)
    await agroup_send(SESSIONS_GROUP, msg)
    if _fanout is not None:
        try:
            await _fanout.apublish_status(session_pk=session_pk, status=status)
        except Exception:
            logger.warning("Could not render the live status of session %s.", session_pk, exc_info=True)


class TurnPublisher:
    """A turn's publishes (its stored events, its streaming chunks), sent in order by one task on the
    loop while the turn goes on: ADK's next step no longer waits for the previous event's round trip
    to the channel layer (~0.4 ms quiet, more at load, for each of a turn's 4-5 events). What must
    come after them waits for `flush()` first: the turn's end (agents_app.turn_exec.turn_run flushes
    before it returns, so every end, the drain's `turn.finished` and status included, is published
    after), and the session store's thread path (a ticket hook's publishes are sent from there,
    synchronously: they would overtake what is queued here). A publish never raises (logged)."""

    def __init__(self) -> None:
        self._pending: deque[tuple[Callable[..., Awaitable[None]], dict[str, Any]]] = deque()
        self._task: asyncio.Future[None] | None = None
        self.lead: _Lead | None = None  # rides in the batch of the next publish (`_Lead`)

    def put(self, publish: Callable[..., Awaitable[None]], kwargs: dict[str, Any]) -> None:
        self._pending.append((publish, kwargs))
        if self._task is None or self._task.done():  # the task ends only once nothing is pending
            self._task = asyncio.ensure_future(self._send())

    async def _send(self) -> None:
        while self._pending:
            publish, kwargs = self._pending.popleft()
            lead, self.lead = self.lead, None
            if lead is not None and not lead.take():
                lead = None  # on its way alone already
            try:
                if lead is None:
                    await publish(**kwargs)
                else:
                    async with abatched():  # one round trip for both, the lead's messages first
                        await lead.publish_quietly()
                        await publish(**kwargs)
            except Exception:
                logger.warning("Could not publish %s for session %s.", publish.__name__, kwargs.get("session_pk"))
            finally:
                if lead is not None:
                    lead.done()

    async def flush(self) -> None:
        """Until everything put so far has been published (a cancelled caller leaves it going on)."""
        if self._task is not None and not self._task.done():
            await asyncio.shield(self._task)


# The publisher of the turn running in this context (agents_app.turn_exec.turn_run sets it).
turn_publisher: contextvars.ContextVar[TurnPublisher | None] = contextvars.ContextVar(
    "adkweb_turn_publisher", default=None
)


async def apublish_in_order(publish: Callable[..., Awaitable[None]], **kwargs: Any) -> None:
    """`await publish(**kwargs)`, or queued behind the running turn's earlier publishes (not awaited)."""
    publisher = turn_publisher.get()
    if publisher is None:
        await publish(**kwargs)
    else:
        publisher.put(publish, kwargs)


async def publishes_sent() -> None:
    """Wait until the running turn's queued publishes have left (before a synchronous publisher)."""
    publisher = turn_publisher.get()
    if publisher is not None:
        await publisher.flush()


# The drain's "running" status on its way (anotify_session_status_soon) while its turn starts.
_status_on_its_way: contextvars.ContextVar[_Lead | None] = contextvars.ContextVar(
    "adkweb_status_on_its_way", default=None
)
LEAD_WAIT = 0.05  # seconds a lead waits for a publish to ride with (a turn's first event: a few ms), then leaves alone


class _Lead:
    """A publish that leaves in the batch of its turn publisher's next one (one round trip where it
    made two of its own), alone once LEAD_WAIT passes without one, or when `sent()` is awaited first."""

    def __init__(self, publish: Callable[..., Awaitable[None]], kwargs: dict[str, Any]) -> None:
        self.publish, self.kwargs, self.taken = publish, kwargs, False
        self.sent: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._timer = asyncio.get_running_loop().call_later(LEAD_WAIT, self._alone)

    def take(self) -> bool:
        """Whether the caller sends it now (it was not sent yet)."""
        if self.taken:
            return False
        self.taken = True
        self._timer.cancel()
        return True

    async def publish_quietly(self) -> None:
        try:
            await self.publish(**self.kwargs)
        except Exception:
            logger.warning("The turn's running status was not published.", exc_info=True)

    def done(self) -> None:
        if not self.sent.done():
            self.sent.set_result(None)

    async def _send_alone(self) -> None:
        try:
            await self.publish_quietly()
        finally:
            self.done()

    def _alone(self) -> None:
        if self.take():
            asyncio.ensure_future(self._send_alone())

    async def wait_sent(self) -> None:
        if self.take():
            await self._send_alone()
        else:
            await asyncio.shield(self.sent)


def anotify_session_status_soon(*, session_pk: int, status: str) -> None:
    """anotify_session_status without waiting for it (the drain's "running" at a claim: the turn
    starts while it is on its way). The status is already stored (a queued turn made it "running");
    what must hold is its order before the turn's end, so whatever publishes that end first awaits
    `status_sent()` (agents_app.turn_exec, runner). With the drain's publisher, it rides in the batch
    of the turn's first event (its message stored at once): one round trip for both (`_Lead`)."""
    publisher = turn_publisher.get()
    kwargs: dict[str, Any] = {"session_pk": session_pk, "status": status}
    lead = _Lead(anotify_session_status, kwargs)
    if publisher is not None:
        publisher.lead = lead
    else:
        lead.take()
        asyncio.ensure_future(lead._send_alone())
    _status_on_its_way.set(lead)


async def status_sent() -> None:
    """Wait for the status `anotify_session_status_soon` sent in this context, if any, sent alone now
    if nothing took it yet (it never raises: a failed publish is logged, as every publish)."""
    pending = _status_on_its_way.get()
    if pending is None:
        return
    _status_on_its_way.set(None)
    await pending.wait_sent()


@abatched()
async def anotify_turn_finished(*, session_pk: int, turn_id: int, status: str, revision: int | None = None) -> None:
    """notify_turn_finished from async code (the drain's loop)."""
    msg = TurnFinishedMessage(type="turn.finished", session_pk=session_pk, turn_id=turn_id, status=status)
    if revision is not None:
        msg["revision"] = revision
    await agroup_send(session_group(session_pk), msg)
    if _fanout is None:
        return
    if status != "done":  # a failed turn's error line is read and rendered on a thread
        await sync_to_async(_quietly)("publish_turn_finished", session_pk=session_pk, turn_id=turn_id, status=status)
        return
    try:
        await _fanout.apublish_turn_done(session_pk=session_pk, turn_id=turn_id)
    except Exception:
        logger.warning("Could not publish the end of turn %s.", turn_id, exc_info=True)


async def anotify_turn_done(*, session_pk: int, turn_id: int, status: str, revision: int | None = None) -> None:
    """A turn that ended DONE (the drain's loop): `turn.finished` and the conversation's new status
    in one batch: one round trip on the Redis layer (their page fragments need no question "who
    watches" first: agents_app.fanout.apublish_turn_done, apublish_status), where two batches that
    each asked first made four."""
    async with abatched():
        await anotify_turn_finished(session_pk=session_pk, turn_id=turn_id, status="done", revision=revision)
        await anotify_session_status(session_pk=session_pk, status=status)


@batched()
def notify_turn_finished(*, session_pk: int, turn_id: int, status: str) -> None:
    group_send(
        session_group(session_pk),
        TurnFinishedMessage(type="turn.finished", session_pk=session_pk, turn_id=turn_id, status=status),
    )
    _quietly("publish_turn_finished", session_pk=session_pk, turn_id=turn_id, status=status)


@batched()
def notify_turn_retried(*, session_pk: int, turn_id: int) -> None:
    """A failed turn was queued again: pages drop its error line."""
    group_send(
        session_group(session_pk), TurnRetriedMessage(type="turn.retried", session_pk=session_pk, turn_id=turn_id)
    )
    _quietly("publish_turn_retried", session_pk=session_pk, turn_id=turn_id)


def ticket_card_groups(session_pk: int) -> list[str]:
    """The groups `notify_ticket_card` publishes to (to ask the layer about them ahead, in one go)."""
    if _fanout is None:
        return []
    return [_fanout.audience_group(session_pk, a) for a in _fanout.AUDIENCES]


def notify_ticket_card(*, session_pk: int, ticket_id: int) -> None:
    """A ticket of this conversation changed (approvals.events sends the ids): its card on the pages."""
    _quietly("publish_ticket", session_pk=session_pk, ticket_id=ticket_id)
