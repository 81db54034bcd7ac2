"""Live updates for tickets (the approvals inbox group and its typed payload), and a ticket's
deadlines told to the notifications (`adkweb.notify`: ticket.reminder, ticket.escalated, ticket.expired)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal, NotRequired, TypedDict

from asgiref.sync import sync_to_async
from django.db import transaction

from adkweb.live import abatched, agroup_send, agroups_watched, batched, group_send, groups_watched_ahead
from adkweb.notify import TICKET_ESCALATED, TICKET_EXPIRED, TICKET_REMINDER, notify
from agents_app.events import notify_ticket_card, session_group, ticket_card_groups

from . import fanout

logger = logging.getLogger(__name__)
# The deadline events, as the notifications app knows them (adkweb.notify).
TICKET_REMINDED = TICKET_REMINDER
DEADLINE_EVENTS = (TICKET_REMINDER, TICKET_ESCALATED, TICKET_EXPIRED)


class TicketChangedMessage(TypedDict):
    type: Literal["ticket.changed"]
    ticket_id: int
    session_pk: int
    # The ticket page whose own htmx request made the change (`on_page`): its answer swapped the
    # actions card in already, so that page's socket leaves the card alone (approvals.ticket_consumer).
    page: NotRequired[str]


class PageShowsMessage(TypedDict):
    type: Literal["ticket.shown"]
    ticket_id: int
    page: str  # the ticket page (`on_page`'s name) whose request was answered with its actions card
    shows: str  # the card's state (approvals.ticket_page.actions_shown)


def notify_page_shows(*, ticket_id: int, session_pk: int, page: str, shows: str) -> None:
    """A ticket page's own request was answered with its actions card and changed nothing (refused, or a
    form to fix): no `ticket.changed` names the page, so its socket is told the state of the card the
    page shows now (approvals.ticket_consumer), and pushes the card only when it changes from that."""
    msg = PageShowsMessage(type="ticket.shown", ticket_id=ticket_id, page=page, shows=shows)
    group_send(session_group(session_pk), msg)


# The page (`on_page`) whose request is making the changes published from this context.
_page: ContextVar[str | None] = ContextVar("approvals_acting_page", default=None)


@contextmanager
def on_page(page: str | None) -> Iterator[None]:
    """The ticket changes made inside are answered to this ticket page's request with its actions card
    (approvals.views.ticket_act): their `ticket.changed` messages name it (None: no page)."""
    token = _page.set(page)
    try:
        yield
    finally:
        _page.reset(token)


@batched()
def notify_ticket_changed(
    *,
    ticket_id: int,
    session_pk: int,
    inbox: bool = True,
    opened: bool = False,
    opened_as: Any = None,
    page: str | None = None,
) -> None:
    """A ticket was opened, answered or closed: inboxes, the ticket page and its conversation update.
    `inbox=False`: only its pages (e.g. its notification status changed; the inbox row did not).
    `opened`: the ticket was just created; `opened_as`, as it was created (approvals.fanout: its facts
    need no query). Inboxes get its row rendered once (approvals.fanout). `page`: the ticket page
    whose request made the change (`on_page`)."""
    msg = TicketChangedMessage(type="ticket.changed", ticket_id=ticket_id, session_pk=session_pk)
    if page is not None:
        msg["page"] = page
    # Who watches the inbox and the ticket's conversation: one question to the channel layer, not two.
    groups_watched_ahead(([fanout.APPROVALS_GROUP] if inbox else []) + ticket_card_groups(session_pk))
    if inbox:
        _publish_ticket(ticket_id=ticket_id, opened=opened, opened_as=opened_as)
    group_send(session_group(session_pk), msg)
    notify_ticket_card(session_pk=session_pk, ticket_id=ticket_id)


@abatched()
async def anotify_ticket_changed(
    *, ticket_id: int, session_pk: int, inbox: bool = True, opened: bool = False, opened_as: Any = None
) -> None:
    """notify_ticket_changed from async code, once committed (approvals.ticket_rider's statement sent
    from the event loop; inside the batch of the event that changed the ticket, after it): the
    messages leave from the loop, and a thread reads and renders only for an open inbox or page of
    the conversation. A ticket just opened with no inbox open has its facts kept from the loop."""
    msg = TicketChangedMessage(type="ticket.changed", ticket_id=ticket_id, session_pk=session_pk)
    cards = ticket_card_groups(session_pk)
    watched = await agroups_watched(([fanout.APPROVALS_GROUP] if inbox else []) + cards)
    if inbox and fanout.APPROVALS_GROUP not in watched and opened_as is not None:
        await fanout.apublish_opened_unwatched(opened_as)
    elif inbox:  # its groups_watched answered from this batch
        await sync_to_async(_publish_ticket)(ticket_id=ticket_id, opened=opened, opened_as=opened_as)
    await agroup_send(session_group(session_pk), msg)
    if watched.intersection(cards):
        await sync_to_async(notify_ticket_card)(session_pk=session_pk, ticket_id=ticket_id)


def _publish_ticket(*, ticket_id: int, opened: bool, opened_as: Any) -> None:
    try:
        fanout.publish_ticket(ticket_id=ticket_id, opened=opened, opened_as=opened_as)
    except Exception:  # never into the caller: it runs after commit
        logger.warning("Could not publish ticket %s to the inboxes.", ticket_id, exc_info=True)


def after_commit_ticket_changed(ticket: Any, *, opened: bool = False, inbox: bool = True) -> None:
    """`notify_ticket_changed` once the current transaction commits (never raises into it), naming
    the ticket page whose request makes the change (`on_page`) as the change is made."""
    ticket_id, session_pk, page = ticket.pk, ticket.session_id, _page.get()
    transaction.on_commit(
        lambda: notify_ticket_changed(
            ticket_id=ticket_id, session_pk=session_pk, opened=opened, inbox=inbox, page=page
        ),
        robust=True,
    )


def deadline_reached(event: str, *, ticket: Any, data: dict[str, Any]) -> None:
    """A reminder, an escalation or an expiry was recorded for a ticket: tell the people concerned
    (`adkweb.notify`, recorded in this transaction) and update its pages after commit."""
    if event not in DEADLINE_EVENTS:
        raise ValueError(f"Unknown deadline event {event!r}; use one of {', '.join(DEADLINE_EVENTS)}.")
    notify(event, ticket=ticket, data=data)
    after_commit_ticket_changed(ticket)
