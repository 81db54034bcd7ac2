"""Live approvals: the inbox socket (rows + open-ticket count) and the ticket page socket
(its status, actions, history and the conversation's next events). Read-only: actions are
ordinary POSTs to views. They read through selectors and render templates (socket-only fragments:
approvals/partials/live.html)."""

from __future__ import annotations

import functools
import time
from typing import Any

from channels.db import database_sync_to_async
from django.template.loader import render_to_string

from adkweb import live_socket
from adkweb.http import number
from adkweb.paging import COUNT_CAP
from adkweb.storable import socket_query
from agents_app import selectors as conversations
from agents_app import visibility
from agents_app.events import session_group

from . import fanout, selectors
from .fanout import APPROVALS_GROUP
from .forms import InboxFilterForm
from .permissions import can_view_ticket, works_inbox

TICKET_CARD = "agents_app/partials/ticket_card.html"
LIVE = "approvals/partials/live.html"
REFUSED = 4003  # not one of the codes the htmx ws extension reconnects on


def _nav_count_html(count: int) -> str:
    return render_to_string(LIVE + "#nav-count", {"count": count, "oob": True})


@functools.lru_cache(maxsize=8)
def _fragment(name: str) -> str:
    """A fragment of approvals/partials/live.html that renders without context, once per process."""
    return render_to_string(f"{LIVE}#{name}")


@functools.lru_cache(maxsize=1024)
def _counts(open_count: int, total: int, line: str) -> str:
    """The inbox's counts frame: one string per distinct frame, shared by the sockets that send it."""
    return fanout.nav_count_html(open_count) + fanout.total_html(total) + line


class InboxConsumer(live_socket.LiveConsumer):
    """`/ws/approvals/?<inbox filters>`: pushes new, changed and decided rows and the nav count.
    With `?nav=1` only the count (every other page of an approver). It forwards the rows
    approvals.fanout rendered once per change and places them from the facts carried with them;
    the database is read when it connects, and for a search or a change whose previous facts are
    unknown."""

    refused = REFUSED

    async def connect(self) -> None:
        user = self.scope.get("user")
        query = socket_query(self.scope)
        if query is None or (granted := await database_sync_to_async(self.rights)(user)) is None:
            await self.close(code=REFUSED)
            return
        self.user, self.granted = user, granted
        self.nav_only = query.get("nav") == "1"
        self.filters = InboxFilterForm(query).filters()
        # Joined first, counted next: a change published meanwhile is not lost.
        if not await live_socket.join(self, APPROVALS_GROUP):
            return
        await self._read_state()

    async def disconnect(self, code: int) -> None:
        await live_socket.leave(self, APPROVALS_GROUP)

    def rights(self, user: Any) -> fanout.Viewer | None:
        """Whose tickets this person sees, if they work the inbox (re-checked while the socket is open)."""
        return fanout.Viewer.of(user) if works_inbox(user) else None

    @database_sync_to_async
    def _read_state(self) -> None:
        """Who the viewer is, the ids on the client's page, where a new matching ticket goes (or
        None: not this page), and the counts."""
        self.viewer = self.granted
        self.shown: set[int] = set()
        self.at_edge: str | None = None
        self._recount()
        if self.nav_only:
            return
        page = selectors.inbox_page(filters=self.filters, user=self.user)
        if self.filters.sort == "newest":
            self.at_edge = "afterbegin" if page.number == 1 else None
        else:
            self.at_edge = "beforeend" if not page.has_next() else None
        self.shown = {c.pk for c in page}

    def _recount(self) -> None:
        self.counted_at = time.monotonic()
        self.open_count = selectors.open_ticket_count(user=self.user)
        self.total = None if self.nav_only else selectors.inbox_count(filters=self.filters, user=self.user)

    @database_sync_to_async
    def _recount_async(self) -> None:
        self._recount()

    @database_sync_to_async
    def _db_matches(self, ticket_id: int) -> tuple[bool, int]:
        matches = selectors.ticket_matches(ticket_id=ticket_id, filters=self.filters, user=self.user)
        return matches, selectors.inbox_count(filters=self.filters, user=self.user)

    def _moved(self, facts: dict, before: dict | None) -> bool:
        """Move the counts by what this change did to them; False when only the database can tell:
        the previous facts are unknown, the first count may include the change already, or a
        count shown as "1,000+" (capped) goes down."""
        if before is None or time.monotonic() - self.counted_at < fanout.RECOUNT_SECONDS:
            return False
        viewer = self.viewer
        opened = fanout.counts_open(facts, viewer) - fanout.counts_open(before, viewer)
        added = 0
        if self.total is not None and not self.filters.q:
            added = bool(fanout.matches(facts, self.filters, viewer)) - bool(
                fanout.matches(before, self.filters, viewer)
            )
        if (opened < 0 and self.open_count > COUNT_CAP) or (added < 0 and (self.total or 0) > COUNT_CAP):
            return False
        self.open_count = min(self.open_count + opened, COUNT_CAP + 1)
        if self.total is not None:
            self.total = min(self.total + added, COUNT_CAP + 1)
        return True

    def frames_now(self, message: dict) -> list[str] | None:
        """A ticket change this socket can place and count from its facts alone (adkweb.live_socket: the
        layer's direct delivery); None, having changed nothing, when the database must answer."""
        if message["type"] != "inbox.ticket":
            return None
        facts = message["facts"]
        matches = None if self.nav_only else fanout.matches(facts, self.filters, self.viewer)
        if (matches is None and not self.nav_only) or not self._moved(facts, message["before"]):
            return None  # a search, or counts only the database can tell
        return self._frames(message, bool(matches))

    async def inbox_ticket(self, message: dict[str, Any]) -> None:
        facts = message["facts"]
        if not self._moved(facts, message["before"]):
            await self._recount_async()
        matches = None if self.nav_only else fanout.matches(facts, self.filters, self.viewer)
        if matches is None and not self.nav_only:  # a search: the database matches it
            matches, self.total = await self._db_matches(message["ticket_id"])
        for frame in self._frames(message, bool(matches)):
            await self.send_frame(frame)

    def _frames(self, message: dict[str, Any], matches: bool) -> list[str]:
        """At most two frames: the ticket's row, then the counts (and the line that changes with the
        rows). Table rows travel alone in their frame: an HTML fragment that starts with another
        element is parsed in body mode, where <tr>/<tbody> tags are dropped. Every fragment is one
        string per process (rendered by the publisher, or cached here), so sockets that send the same
        frame share its framing (adkweb.wsframes)."""
        if self.nav_only:
            return [fanout.nav_count_html(self.open_count)]
        facts, ticket_id = message["facts"], message["ticket_id"]
        frames, line = [], ""
        if not self.viewer.sees(facts):
            pass  # not this person's to see: their counts only
        elif ticket_id in self.shown:
            # A decided ticket changes in place (greyed, "approved by …") rather than vanishing under the cursor.
            frames.append(message["row"])
        elif matches and self.at_edge:
            self.shown.add(ticket_id)
            frames.append(message["added"][self.at_edge])
            line = _fragment("empty-gone")
        elif matches:
            line = _fragment("notice-elsewhere")
        frames.append(_counts(self.open_count, self.total or 0, line))
        return frames


class TicketConsumer(live_socket.LiveConsumer):
    """`/ws/tickets/<id>/`: joins the ticket's conversation group (`session-<pk>`)."""

    refused = REFUSED

    async def connect(self) -> None:
        self.user = self.scope.get("user")
        query = socket_query(self.scope)
        if query is None:
            await self.close(code=REFUSED)
            return
        ticket_id = int(self.scope["url_route"]["kwargs"]["ticket_id"])
        ticket = await database_sync_to_async(selectors.ticket_get)(ticket_id=ticket_id)
        if ticket is None or not await database_sync_to_async(can_view_ticket)(self.user, ticket):
            await self.close(code=REFUSED)
            return
        self.ticket_id, self.session_pk = ticket.pk, ticket.session_id
        self.last_pk = number(query.get("after", ""))
        # The actions card's state on the page (ticket_page.actions_shown); unknown: re-rendered at the first push.
        self.actions_shown = query.get("shows")
        self.group = session_group(ticket.session_id)
        if not await live_socket.join(self, self.group):
            return
        if self.last_pk is not None and await self._conversation_visible():
            catch_up = await self._render_events_after(self.last_pk)
            if catch_up:
                await self.send(text_data=catch_up)

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await live_socket.leave(self, self.group)

    def rights(self, user: Any) -> bool | None:
        """Whether this person may still see the ticket (re-checked while the socket is open)."""
        ticket = selectors.ticket_get(ticket_id=self.ticket_id)
        return True if ticket is not None and can_view_ticket(user, ticket) else None

    def rights_key(self) -> tuple:
        return (self.ticket_id,)

    @database_sync_to_async
    def _conversation_visible(self) -> bool:
        """The page shows the conversation only to someone who may see every ticket in it (a ticket
        routed to other groups hides it: agents_app.visibility.session_visible), checked per push."""
        session = conversations.session_get(session_pk=self.session_pk)
        return session is not None and visibility.session_visible(self.user, session)

    async def ticket_changed(self, event: dict[str, Any]) -> None:
        html = await self._render_ticket(event["ticket_id"])
        if html:
            await self.send(text_data=html)

    async def session_event(self, event: dict[str, Any]) -> None:
        if self.last_pk is not None and event["event_pk"] <= self.last_pk:
            return  # already on the page
        if not await self._conversation_visible():
            return
        self.last_pk = event["event_pk"]
        html = await self._render_event(event["event_pk"])
        if html:
            await self.send(text_data=html)

    async def session_status(self, event: dict[str, Any]) -> None:
        await self.send(text_data=await self._render_activity())

    async def turn_finished(self, event: dict[str, Any]) -> None:
        if event.get("ahead"):  # for API followers (agents_app.events.anotify_turn_ended): the DONE's follows
            return
        await self.send(
            text_data=await self._render_activity(
                failed_turn=event["turn_id"] if event.get("status") == "failed" else None
            )
        )

    async def turn_retried(self, event: dict[str, Any]) -> None:
        """Not shown on the ticket page (its conversation shows events, not turn errors)."""

    async def session_partial(self, event: dict[str, Any]) -> None:
        """Streaming text is shown on the conversation page; here the stored event follows."""

    @database_sync_to_async
    def _render_ticket(self, ticket_id: int) -> str:
        from .views import ticket_context

        ticket = selectors.ticket_get(ticket_id=ticket_id)
        if ticket is None or ticket.session_id != self.session_pk:
            return ""
        html = ""
        if ticket_id == self.ticket_id:
            if not can_view_ticket(self.user, ticket):
                return ""
            ctx = {**ticket_context(ticket, self.user), "oob": True}
            parts = ["status", "history", "activity", "args"]
            if not ticket.is_open or ctx["actions_shown"] != self.actions_shown:
                # Closed, or what this viewer may do changed (their approval, given elsewhere, counts): the card.
                parts.append("actions")
                self.actions_shown = ctx["actions_shown"]
            elif ctx["can_answer"] and ticket.required_approvals > 1:
                # Another approver's approval: "Approve (2 of 2)" on the button, or the count in
                # "Your approval counts (2 of 3)", without touching a form being filled in.
                parts.append("counted-count" if ctx["approved_by_me"] else "approve-count")
            html += "".join(render_to_string(f"approvals/ticket.html#{p}", ctx) for p in parts)
            shown = ctx["conversation_visible"]
        else:  # another ticket of the conversation: only where the conversation is shown
            shown = visibility.session_visible(self.user, ticket.session)
        if shown:  # its card in the conversation, wherever it is shown on this page
            html = render_to_string(TICKET_CARD, {"ticket": ticket, "oob": "true"}) + html
        if works_inbox(self.user):
            html += _nav_count_html(selectors.open_ticket_count(user=self.user))
        return html

    @database_sync_to_async
    def _render_event(self, event_pk: int) -> str:
        event = conversations.session_event_view(session_pk=self.session_pk, event_pk=event_pk)
        if event is None:
            return ""
        return render_to_string(LIVE + "#events-appended", {"events": [event]})

    @database_sync_to_async
    def _render_events_after(self, after_pk: int) -> str:
        """Events stored between the page's render and this connection (or a reconnect)."""
        events = conversations.session_event_views_after(session_pk=self.session_pk, after_pk=after_pk)
        if not events:
            return ""
        self.last_pk = events[-1].pk
        return render_to_string(LIVE + "#events-appended", {"events": events})

    @database_sync_to_async
    def _render_activity(self, failed_turn: int | None = None) -> str:
        ctx = {"activity": conversations.session_status(session_pk=self.session_pk), "oob": True}
        html = render_to_string("approvals/ticket.html#activity", ctx)
        error = conversations.failed_turn_view(turn_id=failed_turn, session_pk=self.session_pk) if failed_turn else None
        session = conversations.session_get(session_pk=self.session_pk) if error is not None else None
        if error is not None and session is not None and visibility.session_visible(self.user, session):
            html += render_to_string(LIVE + "#events-appended", {"events": [error]})
        return html
