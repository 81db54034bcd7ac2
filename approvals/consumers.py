"""Live approvals: the inbox socket (rows + open-ticket count); the ticket page's socket is
approvals.ticket_consumer. Read-only: actions are ordinary POSTs to views. They read through
selectors and render templates (socket-only fragments: approvals/partials/live.html)."""

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

from . import fanout, selectors
from .fanout import APPROVALS_GROUP
from .forms import InboxFilterForm
from .inbox_due import pushed_row, row_due, rows_at_due
from .permissions import works_inbox
from .socket_due import DueWatching
from .ticket_page import microseconds

LIVE = "approvals/partials/live.html"
REFUSED = 4003  # not one of the codes the htmx ws extension reconnects on
# A row changed this long before its inbox page was rendered is pushed again when the page's socket connects:
# its change may have been committed after the page read it, or written by a process whose clock is ahead.
CHANGED_SLACK_US = 5_000_000


@functools.lru_cache(maxsize=8)
def _fragment(name: str) -> str:
    """A fragment of approvals/partials/live.html that renders without context, once per process."""
    return render_to_string(f"{LIVE}#{name}")


@functools.lru_cache(maxsize=1024)
def _counts(open_count: int, total: int, line: str) -> str:
    """The inbox's counts frame: one string per distinct frame, shared by the sockets that send it."""
    return fanout.nav_count_html(open_count) + fanout.total_html(total) + line


class InboxConsumer(DueWatching):
    """`/ws/approvals/?<inbox filters>`: pushes new, changed and decided rows and the nav count.
    With `?nav=1` only the count (every other page of an approver). It forwards the rows
    approvals.fanout rendered once per change and places them from the facts carried with them;
    the database is read when it connects, and for a search or a change whose previous facts are
    unknown. A row's due time turns it "past due" on the page (approvals.inbox_due)."""

    refused = REFUSED
    due_message = "inbox.due"
    due: dict[int, float]  # the rows on the page that count down to a due time: id, due time (time.time())
    _due_next: float | None = None  # the due time the timer is set for

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
        said = (number(query.get("open", "")), number(query.get("total", "")))
        changed = await self._read_state(number(query.get("changed", "")), said)
        self._arm()
        for frame in changed:  # the page's rows changed since it was rendered, then its counts as they are
            await self.send_frame(frame)

    async def disconnect(self, code: int) -> None:
        self.arm_due(None)
        await live_socket.leave(self, APPROVALS_GROUP)

    def rights(self, user: Any) -> fanout.Viewer | None:
        """Whose tickets this person sees, if they work the inbox (re-checked while the socket is open)."""
        return fanout.Viewer.of(user) if works_inbox(user) else None

    @database_sync_to_async
    def _read_state(self, rendered: int | None, said: tuple[int | None, int | None] = (None, None)) -> list[str]:
        """Who the viewer is, the ids on the client's page, where a new matching ticket goes (or
        None: not this page), and the counts. `rendered`: when the page was (views.inbox, microseconds);
        `said`: the open-ticket count and the total it shows. The frames that bring it up to date: see
        `_catch_up`; the counts when they are not the page's."""
        self.viewer = self.granted
        self.shown: set[int] = set()
        self.due = {}
        self.at_edge: str | None = None
        self._recount()
        if self.nav_only:
            stale = said[0] is not None and said[0] != self.open_count
            return [fanout.nav_count_html(self.open_count)] if stale else []
        page = selectors.inbox_page(filters=self.filters, user=self.user)
        if self.filters.sort == "newest":
            self.at_edge = "afterbegin" if page.number == 1 else None
        else:
            self.at_edge = "beforeend" if not page.has_next() else None
        self.shown = {c.pk for c in page}
        self.due = {c.pk: at for c in page if (at := row_due(c)) is not None}
        if rendered is None:
            return []
        rows, line = self._catch_up(list(page), rendered, said[1])
        stale = any(s is not None and s != now for s, now in zip(said, (self.open_count, self.total), strict=True))
        return [*rows, _counts(self.open_count, self.total or 0, line)] if rows or line or stale else []

    def _catch_up(self, page: list[Any], rendered: int, said_total: int | None) -> tuple[list[str], str]:
        """The rows of this page that changed since the page was rendered (a decision in another tab while
        it loaded, or while its socket was away), and the line that changes with them. A ticket opened in
        that time is one of them, and the page does not show it: on a page new tickets reach (its edge),
        each is sent as a new row (static/js/app.js puts one the page shows already in place of its own);
        elsewhere in place, with "New tickets arrived on another page" if more match than the page said."""
        since = rendered - CHANGED_SLACK_US
        changed = [c for c in page if microseconds(c.updated_at) > since]
        if self.at_edge is None or said_total is None:  # (a page that does not say: its JS may not place them)
            more = said_total is not None and (self.total or 0) > said_total
            return [pushed_row(c) for c in changed], _fragment("notice-elsewhere") if more else ""
        if self.at_edge == "afterbegin":
            changed.reverse()  # the newest last: on top
        added: list[str] = [
            render_to_string(f"{LIVE}#rows-added", {"ticket": c, "edge": self.at_edge}) for c in changed
        ]
        return added, _fragment("empty-gone") if added else ""

    def _arm(self) -> None:
        """The timer for the nearest due time of the rows on the page (one per socket), if it changed."""
        at = min(self.due.values(), default=None)
        if at != self._due_next:
            self._due_next = at
            self.arm_due(at)

    def _row_due(self, ticket_id: int, at: float | None) -> None:
        """A row pushed to the page: the due time it counts down to now (None: none)."""
        if at is None:
            self.due.pop(ticket_id, None)
        else:
            self.due[ticket_id] = at
        self._arm()  # set again only if the nearest due time changed

    async def inbox_due(self, message: dict[str, Any]) -> None:
        """The nearest due time of the page's rows: those rows, read now, say "past due"."""
        now = time.time()
        reached = {pk: at for pk, at in self.due.items() if at <= now}
        for pk in reached:
            del self.due[pk]
        self._due_next = None
        self._arm()
        for row in await database_sync_to_async(rows_at_due)(reached) if reached else ():
            await self.send_frame(row)

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
            self._row_due(ticket_id, message.get("due"))
        elif matches and self.at_edge:
            self.shown.add(ticket_id)
            frames.append(message["added"][self.at_edge])
            self._row_due(ticket_id, message.get("due"))
            line = _fragment("empty-gone")
        elif matches:
            line = _fragment("notice-elsewhere")
        frames.append(_counts(self.open_count, self.total or 0, line))
        return frames
