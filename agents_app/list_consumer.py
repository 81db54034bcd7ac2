"""The conversation list's socket (`/ws/sessions/`; split out of agents_app.consumers, the conversation's):
status changes of the rows its viewer may see, read through selectors and rendered as the list's view does."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from django.template.loader import render_to_string

from adkweb import live_socket
from adkweb.storable import socket_query

from . import selectors
from .consumers import LIVE, REFUSED, _int
from .events import SESSIONS_GROUP
from .rows import rows_seen

ROW = "agents_app/session_list.html#session-row"


class SessionListConsumer(live_socket.LiveConsumer):
    """/ws/sessions/?agent=&status=&page=&seen=: status changes of the rows this user may see. `seen`: what
    the page's rows were when it was rendered (agents_app.rows.rows_seen); its rows are sent again at connect
    when they are no longer that."""

    async def connect(self) -> None:
        self.user = self.scope.get("user")
        if not self.user or not self.user.is_authenticated:
            await self.close(code=REFUSED)
            return
        q = socket_query(self.scope)
        if q is None:
            await self.close(code=REFUSED)
            return
        self.filters = {"app_name": q.get("agent", ""), "status": q.get("status", "")}
        self.page = _int(q.get("page"), 1)
        # Joined first, the page read next (before the socket is accepted): a change published meanwhile is heard,
        # one before is in the read.
        frames: list[str] = []

        async def read() -> None:
            frames.extend(await database_sync_to_async(self._read_page)(q.get("seen")))

        if not await live_socket.join(self, SESSIONS_GROUP, read):
            return
        for frame in frames:
            await self.send(text_data=frame)

    async def disconnect(self, code: int) -> None:
        await live_socket.leave(self, SESSIONS_GROUP)

    def _read_page(self, seen: str | None) -> list[str]:
        """The ids of the page's rows; and, when the page says what its rows were and they are no longer
        that (a conversation started, ran or ended while it loaded, or while its socket was away), the rows:
        on the first page as new ones on top (static/js/app.js puts a row the page shows in place of its
        own), elsewhere in place."""
        page = selectors.session_page(user=self.user, page=self.page, **self.filters)
        self.page = page.number
        rows = list(page)
        self.shown: set[int] = {s.pk for s in rows}
        if not seen or seen == rows_seen(rows):
            return []
        if self.page == 1:
            return [render_to_string(LIVE + "#row-added", {"s": s}) for s in reversed(rows)]
        return [render_to_string(ROW, {"s": s, "oob": "true"}) for s in rows]

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
            return render_to_string(ROW, {"s": row, "oob": "true"})
        if matches and self.page == 1:
            self.shown.add(row.pk)
            return render_to_string(LIVE + "#row-added", {"s": row})
        return None

    async def session_status(self, message: dict[str, Any]) -> None:
        html = await database_sync_to_async(self._row_html)(message["session_pk"])
        if html:
            await self.send(text_data=html)
