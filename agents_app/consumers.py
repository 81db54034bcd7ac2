"""Live conversation pages: the conversation socket forwards the fragments agents_app.fanout rendered
once per event per audience; the list socket reads through selectors and renders the partials the
views use (socket-only fragments: agents_app/partials/live.html). They send htmx ws-extension
fragments (every top-level element is swapped out of band). Read-only."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, ClassVar

from channels.db import database_sync_to_async
from django.template.loader import render_to_string

from adkweb import live_socket
from adkweb.storable import socket_query

from . import fanout, selectors, timeline, visibility

DETAIL = "agents_app/session_detail.html"
LIVE = "agents_app/partials/live.html"
REFUSED = 4403
RUNNING_HOLD = 1.0  # seconds a "running" status waits for the turn's next frame (SessionConsumer._status)
NEEDS_DATABASE = object()  # a live.* message SessionConsumer cannot handle without awaiting the database


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


class SessionConsumer(live_socket.LiveConsumer):
    """/ws/sessions/<pk>/?after=<last event pk on the page>: the conversation, live.

    It joins its viewer's audience group (agents_app.fanout) and forwards the fragments rendered
    there once per event: after the connect, it never touches the database."""

    async def connect(self) -> None:
        self.user = self.scope.get("user")
        self.session_pk = _int(self.scope["url_route"]["kwargs"].get("pk"), 0)
        q = socket_query(self.scope)
        if (
            q is None
            or not self.user
            or not self.user.is_authenticated
            or not await database_sync_to_async(self._may_view)()
        ):
            await self.close(code=REFUSED)
            return
        self.last_pk = _int(q.get("after"), 0)
        self.streams: dict[str, int] = {}  # event id -> turn id of streaming cards this socket created
        self.finals: set[str] = set()
        self.status_sent = ""
        self.held: str | None = None  # a "running" status waiting for the next frame (live_status)
        self.hold_timer: asyncio.TimerHandle | None = None
        self.group = fanout.audience_group(self.session_pk, self.audience)
        if not await live_socket.join(self, self.group):
            return
        await self.send(text_data=await database_sync_to_async(self._catch_up)())

    async def disconnect(self, code: int) -> None:
        self._unhold()
        if hasattr(self, "group"):
            await live_socket.leave(self, self.group)

    def _may_view(self) -> bool:
        session = selectors.session_get(session_pk=self.session_pk)
        audience = None if session is None else fanout.audience_of(self.user, session)
        if session is None or audience is None:
            return False
        self.session, self.audience, self.granted = session, audience, audience
        self.can_retry = fanout.AUDIENCES[audience]["can_retry"]
        return True

    def rights(self, user: Any) -> str | None:
        """The audience this person watches as now (None: the conversation is no longer theirs to see,
        or was deleted); re-checked while the socket is open (adkweb.live_socket)."""
        session = selectors.session_get(session_pk=self.session_pk)
        return None if session is None else fanout.audience_of(user, session)

    def rights_key(self) -> tuple:
        return (self.session_pk,)

    async def _still_visible(self) -> bool:
        """Asked when an event brings a ticket this page has not seen (no query otherwise): a ticket
        routed to groups this person is not in hides the conversation from them (the socket closes
        before the event's card, with the ticket's arguments, is sent)."""
        if getattr(self, "hidden", False):
            return False
        if await database_sync_to_async(visibility.session_visible)(self.user, self.session):
            return True
        self.hidden = True
        self._unhold()
        await live_socket.leave(self, self.group)
        await self.close(code=REFUSED)
        return False

    def _catch_up(self) -> str:
        """The status now, and the whole event list again if events were stored after the page
        was rendered (or before a reconnect): replacing the list is idempotent."""
        self.tickets = selectors.session_ticket_pks(session_pk=self.session_pk)
        html = self.status_sent = fanout.status_html(selectors.session_status(session_pk=self.session_pk))
        newest = selectors.last_event_pk(session_pk=self.session_pk)
        if newest and newest > self.last_pk:
            ctx = {"timeline": selectors.session_timeline(self.session), "oob": "true", "can_retry": self.can_retry}
            html += render_to_string(DETAIL + "#events", ctx)
            self.last_pk = newest
        return html

    # Each live.* message's handling without awaiting anything: the frame it sends (None: nothing),
    # or NEEDS_DATABASE (having changed nothing). Used by the async handlers and by `frames_now`
    # (adkweb.live_socket.LiveConsumer: the layer's direct delivery, no task per message).
    def _event(self, message: dict, checked: bool = False) -> str | None | object:
        if message["event_pk"] <= self.last_pk or getattr(self, "hidden", False):
            return None  # already on the page
        if not checked and set(message["ticket_ids"]) - self.tickets:
            return NEEDS_DATABASE  # a ticket the page has not seen: may this person still watch?
        self.last_pk = message["event_pk"]
        self.tickets.update(message["ticket_ids"])
        self.finals.add(message["event_id"])
        streamed = self.streams.pop(message["event_id"], None) is not None
        return message["replace"] if streamed and message["replace"] else message["append"]

    def _partial(self, message: dict) -> str | None:
        if getattr(self, "hidden", False):
            return None
        event_id = message["event_id"]
        if event_id in self.finals:
            return None  # a late chunk of a stored event
        if event_id in self.streams:
            return message["chunk"]
        self.streams[event_id] = message.get("turn_id") or 0
        return message["card"]

    def _status(self, message: dict) -> str | None:
        """A "running" status is held until the turn's next frame (its first event, as a rule) and
        sent with it, or after RUNNING_HOLD seconds: the event is not queued behind a frame of its
        own at every socket. Any other status goes at once (and replaces a held one)."""
        if getattr(self, "hidden", False):
            return None
        html = message["html"]
        if html == (self.held or self.status_sent):
            return None  # the same status again says nothing new
        self._unhold()
        if html == self.status_sent:
            return None  # back to what the page shows: the held one is dropped
        if message.get("status") == "running":
            self.held = html
            self.hold_timer = asyncio.get_running_loop().call_later(RUNNING_HOLD, self._hold_expired)
            return None
        self.status_sent = html
        return html

    def _turn_retried(self, message: dict) -> str | None:
        return None if getattr(self, "hidden", False) else message["html"]

    def _turn_finished(self, message: dict) -> str | None:
        if getattr(self, "hidden", False):
            return None
        # Streaming cards whose final event never came (the turn failed mid-stream) go away.
        stale = [eid for eid, turn_id in self.streams.items() if turn_id == message["turn_id"]]
        html = "".join(render_to_string(LIVE + "#gone", {"dom_id": timeline.event_dom_id(eid)}) for eid in stale)
        for eid in stale:
            del self.streams[eid]
        html += message["error"]
        return html or None

    def _ticket(self, message: dict) -> str | None:
        if getattr(self, "hidden", False):
            return None
        # A ticket not yet on the page arrives inside its event's card (same transaction).
        return message["html"] if message["ticket_id"] in self.tickets else None

    HANDLING: ClassVar[dict[str, Callable[..., Any]]] = {
        "live.event": _event,
        "live.partial": _partial,
        "live.status": _status,
        "live.turn_retried": _turn_retried,
        "live.turn_finished": _turn_finished,
        "live.ticket": _ticket,
    }

    def frames_now(self, message: dict) -> list[str] | None:
        handling = self.HANDLING.get(message["type"])
        if handling is None:
            return None
        html = handling(self, message)
        if html is NEEDS_DATABASE:
            return None
        frame = "" if html is None else self._with_held(html)
        return [frame] if frame else []

    async def live_event(self, message: dict) -> None:
        html = self._event(message)
        if html is NEEDS_DATABASE:
            if not await self._still_visible():
                return
            html = self._event(message, checked=True)
        await self._send(html)

    async def live_partial(self, message: dict) -> None:
        await self._send(self._partial(message))

    async def live_status(self, message: dict) -> None:
        await self._send(self._status(message))

    def _hold_expired(self) -> None:
        self.hold_timer = None
        if self.held is not None:
            self.hold_task = asyncio.ensure_future(self._send(""))

    def _unhold(self) -> None:
        self.held = None
        timer, self.hold_timer = getattr(self, "hold_timer", None), None
        if timer is not None:
            timer.cancel()

    def _with_held(self, html: str) -> str:
        """The frame, with the held status after it (one frame)."""
        if self.held is not None:
            html, self.status_sent = html + self.held, self.held
            self._unhold()
        return html

    async def _send(self, html: Any) -> None:
        """A frame (None: none; "": the held status alone, if any)."""
        if html is not None:
            html = self._with_held(html)
            if html:
                await self.send_frame(html)

    async def live_turn_retried(self, message: dict) -> None:
        await self._send(self._turn_retried(message))

    async def live_turn_finished(self, message: dict) -> None:
        await self._send(self._turn_finished(message))

    async def live_ticket(self, message: dict) -> None:
        await self._send(self._ticket(message))
