"""Live conversation pages: consumers join a group, read through selectors, render the partials the
views use (socket-only fragments: agents_app/partials/live.html), and send htmx ws-extension
fragments (every top-level element is swapped out of band). Read-only."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.template.loader import render_to_string

from adkweb import live
from adkweb.roles import can_retry_turns, can_view_session

from . import selectors, timeline
from .events import SESSIONS_GROUP, session_group
from .models import Turn

DETAIL = "agents_app/session_detail.html"
EVENT = "agents_app/partials/event.html"
LIVE = "agents_app/partials/live.html"
REFUSED = 4403


def _query(scope: dict) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(scope.get("query_string", b"").decode()).items()}


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


class SessionListConsumer(AsyncWebsocketConsumer):
    """/ws/sessions/?agent=&status=&page=: status changes of the rows this user may see."""

    async def connect(self) -> None:
        self.user = self.scope.get("user")
        if not self.user or not self.user.is_authenticated:
            await self.close(code=REFUSED)
            return
        q = _query(self.scope)
        self.filters = {"app_name": q.get("agent", ""), "status": q.get("status", "")}
        self.page = _int(q.get("page"), 1)
        self.shown: set[int] = await database_sync_to_async(self._page_pks)()
        if not await live.join(self, SESSIONS_GROUP):
            return

    async def disconnect(self, code: int) -> None:
        await live.leave(self, SESSIONS_GROUP)

    def _page_pks(self) -> set[int]:
        page = selectors.session_page(user=self.user, page=self.page, **self.filters)
        self.page = page.number
        return {s.pk for s in page}

    def _row_html(self, session_pk: int) -> str | None:
        row = selectors.session_row(user=self.user, session_pk=session_pk)
        if row is None:
            return None  # not this user's to see
        matches = all(
            not want or want == have
            for want, have in ((self.filters["app_name"], row.app_name), (self.filters["status"], row.status))
        )
        if row.pk in self.shown:
            if not matches:
                self.shown.discard(row.pk)
                return render_to_string(LIVE + "#row-gone", {"pk": row.pk})
            return render_to_string("agents_app/session_list.html#session-row", {"s": row, "oob": "true"})
        if matches and self.page == 1:
            self.shown.add(row.pk)
            return render_to_string(LIVE + "#row-added", {"s": row})
        return None

    async def session_status(self, message: dict) -> None:
        html = await database_sync_to_async(self._row_html)(message["session_pk"])
        if html:
            await self.send(text_data=html)


class SessionConsumer(AsyncWebsocketConsumer):
    """/ws/sessions/<pk>/?after=<last event pk on the page>: the conversation, live."""

    async def connect(self) -> None:
        self.user = self.scope.get("user")
        self.session_pk = _int(self.scope["url_route"]["kwargs"].get("pk"), 0)
        if not self.user or not self.user.is_authenticated or not await database_sync_to_async(self._may_view)():
            await self.close(code=REFUSED)
            return
        self.last_pk = _int(_query(self.scope).get("after"), 0)
        self.streams: dict[str, int] = {}  # event id -> turn id of streaming cards this socket created
        self.finals: set[str] = set()
        self.group = session_group(self.session_pk)
        if not await live.join(self, self.group):
            return
        await self.send(text_data=await database_sync_to_async(self._catch_up)())

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await live.leave(self, self.group)

    def _may_view(self) -> bool:
        session = selectors.session_get(session_pk=self.session_pk)
        if session is None or not can_view_session(self.user, session):
            return False
        self.session = session
        self.can_retry = can_retry_turns(self.user, session)
        return True

    def _status_html(self) -> str:
        return render_to_string(
            DETAIL + "#status", {"status": selectors.session_status(session_pk=self.session_pk), "oob": "true"}
        )

    def _catch_up(self) -> str:
        """The status now, and the whole event list again if events were stored after the page
        was rendered (or before a reconnect): replacing the list is idempotent."""
        self.tickets = selectors.session_ticket_pks(session_pk=self.session_pk)
        html = self._status_html()
        newest = selectors.last_event_pk(session_pk=self.session_pk)
        if newest and newest > self.last_pk:
            ctx = {"timeline": selectors.session_timeline(self.session), "oob": "true", "can_retry": self.can_retry}
            html += render_to_string(DETAIL + "#events", ctx)
            self.last_pk = newest
        return html

    def _event_html(self, event_pk: int) -> str | None:
        view = selectors.session_event_view(session_pk=self.session_pk, event_pk=event_pk)
        if view is None:
            return None
        self.tickets.update(i.ticket.pk for i in view.items if i.ticket is not None)
        self.finals.add(view.event_id)
        if self.streams.pop(view.event_id, None) is not None:
            html = render_to_string(EVENT, {"event": view, "oob": "true"})  # replaces its streaming card
        else:
            html = render_to_string(LIVE + "#appended", {"event": view})
        return html + self._artifacts_html(view)

    def _artifacts_html(self, view: Any) -> str:
        """An event that saved artifacts (ADK's artifact_delta) refreshes the page's artifact list."""
        if not ((view.raw_data or {}).get("actions") or {}).get("artifact_delta"):
            return ""
        ctx = {"session": self.session, "artifacts": selectors.session_artifacts(session=self.session), "oob": "true"}
        return render_to_string(DETAIL + "#artifacts", ctx)

    async def session_event(self, message: dict) -> None:
        if message["event_pk"] <= self.last_pk:
            return  # already on the page
        self.last_pk = message["event_pk"]
        html = await database_sync_to_async(self._event_html)(message["event_pk"])
        if html:
            await self.send(text_data=html)

    async def session_partial(self, message: dict) -> None:
        event_id = message["event_id"]
        if event_id in self.finals or not message.get("text"):
            return
        if event_id in self.streams:
            view = timeline.streaming_view(event_id=event_id, author=message["author"], text="")
            html = render_to_string(
                "agents_app/partials/stream_chunk.html", {"dom_id": view.dom_id, "text": message["text"]}
            )
        else:
            self.streams[event_id] = message.get("turn_id") or 0
            view = timeline.streaming_view(
                event_id=event_id, author=message["author"], text=message["text"], event=message.get("event")
            )
            html = render_to_string(LIVE + "#appended", {"event": view})
        await self.send(text_data=html)

    async def session_status(self, message: dict) -> None:
        await self.send(text_data=await database_sync_to_async(self._status_html)())

    def _turn_error_html(self, turn_id: int) -> str | None:
        error = selectors.failed_turn_view(turn_id=turn_id, session_pk=self.session_pk)
        if error is None:
            return None
        return render_to_string(LIVE + "#appended", {"event": error, "can_retry": self.can_retry})

    async def turn_retried(self, message: dict) -> None:
        """The failed turn runs again: its error line goes."""
        dom_id = timeline.turn_error_dom_id(int(message["turn_id"]))
        await self.send(text_data=render_to_string(LIVE + "#gone", {"dom_id": dom_id}))

    async def turn_finished(self, message: dict) -> None:
        # Streaming cards whose final event never came (the turn failed mid-stream) go away.
        stale = [eid for eid, turn_id in self.streams.items() if turn_id == message["turn_id"]]
        html = "".join(render_to_string(LIVE + "#gone", {"dom_id": timeline.event_dom_id(eid)}) for eid in stale)
        for eid in stale:
            del self.streams[eid]
        if message.get("status") == Turn.Status.FAILED:
            html += await database_sync_to_async(self._turn_error_html)(message["turn_id"]) or ""
        if html:
            await self.send(text_data=html)

    def _ticket_html(self, ticket_id: int) -> str | None:
        ticket = selectors.session_ticket_get(session_pk=self.session_pk, ticket_id=ticket_id)
        if ticket is None:
            return None
        return render_to_string("agents_app/partials/ticket_card.html", {"ticket": ticket, "oob": "true"})

    async def ticket_changed(self, message: dict) -> None:
        # A ticket not yet on the page arrives inside its event's card (same transaction).
        if message["ticket_id"] in self.tickets:
            html = await database_sync_to_async(self._ticket_html)(message["ticket_id"])
            if html:
                await self.send(text_data=html)
