"""The ticket page's socket: the ticket's status, actions, history and the conversation's next events
(split out of approvals.consumers, the inbox's socket). Read-only: actions are ordinary POSTs to views."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from channels.db import database_sync_to_async
from django.template.loader import render_to_string
from django.utils import timezone

from adkweb import live_socket
from adkweb.http import number
from adkweb.storable import socket_query
from agents_app import selectors as conversations
from agents_app import visibility
from agents_app.events import session_group

from . import fanout, selectors
from .consumers import LIVE, REFUSED
from .permissions import can_view_ticket, works_inbox
from .socket_due import DueWatching
from .ticket_page import ACTIONS_SHOWN, changed_stamp, page_key, ticket_context

TICKET_CARD = "agents_app/partials/ticket_card.html"


class TicketConsumer(DueWatching):
    """`/ws/tickets/<id>/`: joins the ticket's conversation group (`session-<pk>`)."""

    refused = REFUSED
    due_message = "ticket.due"
    _due_at: datetime | None = None  # the due time the last push of the ticket read (None: none, or closed)

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
        # The actions card's state on the page (ticket_page.actions_shown): the card is pushed when it changes.
        # Not said (or no state the card has): the ticket's state for this viewer now, as a page that is
        # current shows it; not the card at the first push, which would wipe the forms being filled in.
        shows = query.get("shows")
        self.actions_shown = shows if shows in ACTIONS_SHOWN else await self._actions_now(ticket)
        self.page = page_key(self.user, query.get("page"))  # its htmx requests' answers (events.on_page)
        self.group = session_group(ticket.session_id)
        if not await live_socket.join(self, self.group):
            return
        self._watch_due(ticket.due_at if ticket.is_open else None)
        if await self._changed_since(ticket, number(query.get("changed", ""))):
            # Changed since its page read it: while the page loaded, or while its socket was away (a restart, a
            # lost connection). Its parts now, not at the ticket's next change (if any); the card too if its
            # state is not the page's (closed, or the viewer's approval given in another tab counts).
            await self.ticket_changed({"ticket_id": self.ticket_id})
        elif (said := query.get("activity")) is not None and said != await self._activity_now():
            # The conversation's activity changed since (the agent ran while the socket was away): not the ticket.
            await self.send(text_data=await self._render_activity())
        if self.last_pk is not None and await self._conversation_visible():
            catch_up = await self._render_events_after(self.last_pk)
            if catch_up:
                await self.send(text_data=catch_up)

    async def _changed_since(self, ticket: Any, changed: int | None) -> bool:
        """Whether the ticket changed since the page read it (`changed`: the stamp it says, ticket_page.
        changed_stamp), read again now that the socket hears its changes: none is missed in between. A page
        that does not say (rendered before pages said): only whether it closed (38fe7ba's rule)."""
        if changed is None:
            return not ticket.is_open and self.actions_shown != "closed"
        now = await database_sync_to_async(selectors.ticket_get)(ticket_id=self.ticket_id)
        return now is not None and changed_stamp(now) > changed

    async def disconnect(self, code: int) -> None:
        self._watch_due(None)
        if hasattr(self, "group"):
            await live_socket.leave(self, self.group)

    def _watch_due(self, due_at: datetime | None) -> None:
        """At the open ticket's due time, its parts again: from then it takes no decision (PastDue, by the
        clock), so Approve and Reject give way to "past due" then, not at the deadline sweep or a reload.
        Set again at each push of the ticket (its due time as read; None once it is closed)."""
        if due_at is not None and due_at <= timezone.now() and self.actions_shown in ("refused", "closed"):
            due_at = None  # past due, and the page shows it
        self.arm_due(due_at.timestamp() if due_at is not None else None)

    async def ticket_due(self, event: dict[str, Any]) -> None:
        await self.ticket_changed({"ticket_id": self.ticket_id})

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
        mine = self.page is not None and event.get("page") == self.page
        html = await self._render_ticket(event["ticket_id"], answered_here=mine)
        if event["ticket_id"] == self.ticket_id:
            self._watch_due(self._due_at)  # as the render read it
        if html:
            await self.send(text_data=html)

    async def ticket_shown(self, event: dict[str, Any]) -> None:
        """This page's own request was answered with the actions card in state `shows` and changed nothing
        (approvals.events.notify_page_shows): what the page shows now. A change made since that answer
        read the ticket pushes the card, as any change does."""
        if self.page is None or event.get("page") != self.page or event["ticket_id"] != self.ticket_id:
            return
        self.actions_shown = event["shows"]
        ticket = await database_sync_to_async(selectors.ticket_get)(ticket_id=self.ticket_id)
        if ticket is not None and await self._actions_now(ticket) != self.actions_shown:
            await self.ticket_changed({"ticket_id": self.ticket_id})

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
    def _activity_now(self) -> str:
        return conversations.session_status(session_pk=self.session_pk)

    @database_sync_to_async
    def _actions_now(self, ticket: Any) -> str:
        return ticket_context(ticket, self.user)["actions_shown"]

    @database_sync_to_async
    def _render_ticket(self, ticket_id: int, answered_here: bool = False) -> str:
        """The ticket's parts that change; `answered_here`: a change the page's own request made, whose
        answer swapped its actions card in already (events.on_page): not pushed again."""
        ticket = selectors.ticket_get(ticket_id=ticket_id)
        if ticket_id == self.ticket_id:
            self._due_at = None  # unless it is read below: nothing to watch
        if ticket is None or ticket.session_id != self.session_pk:
            return ""
        html = ""
        if ticket_id == self.ticket_id:
            if not can_view_ticket(self.user, ticket):
                return ""
            ctx = {**ticket_context(ticket, self.user), "oob": True}
            self._due_at = ticket.due_at if ticket.is_open else None
            parts = ["status", "history", "activity", "args"]
            if ctx["actions_shown"] != self.actions_shown:
                # Closed, or what this viewer may do changed (their approval, given elsewhere, counts): the card.
                # Once (a closed ticket's later changes, its notices' delivery status, leave the card as it is).
                if not answered_here:
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
            html += fanout.nav_count_html(selectors.open_ticket_count(user=self.user))
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
