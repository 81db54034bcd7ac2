"""Rendered event cards, kept per process: a stored event never changes, so its card
(agents_app/partials/event.html) is rendered once and reused by every page that shows it, until
what it shows changes (issue 12, target 4: the cards were a third of a conversation page's CPU).

The key holds everything the card's markup depends on, so a cached card is the card the template
would write now:
- the event: its pk and a digest of its stored JSON (a pk reused by another database, e.g. tests
  on SQLite, or a rewritten row, is another key);
- the tickets its long-running calls show (a ticket card: pk, status, who closed it), which change;
- the current time zone and language (its `<time>`), and the `oob` value put on its root element.
A card does not depend on who looks at it: who may see a conversation is decided before any card is
rendered (agents_app.visibility.session_visible, the ticket page's conversation_visible), and one
card serves every audience, as the live fan-out already does (agents_app.fanout). Streaming events
(no pk yet) and failed turns' error lines (their Retry button depends on the viewer) are not cached.
Autoescaping is the template's: the cache stores its output, never builds markup itself.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from typing import Any

from django.utils import timezone, translation

from .timeline import EventView

MAX_CARDS = 4096  # most cards are 1-3 KiB
MAX_CHARS = 16 * 1024 * 1024  # all cards together, per process
MAX_CARD_CHARS = 256 * 1024  # a bigger card (a huge tool result) is rendered each time

_cards: OrderedDict[tuple, str] = OrderedDict()
_chars = 0
_lock = threading.Lock()


def _ticket_state(ticket: Any) -> tuple:
    closed_by = ticket.closed_by.get_username() if ticket.closed_by_id is not None else None
    return (ticket.pk, ticket.status, closed_by)


def card_key(event: Any, oob: Any) -> tuple | None:
    """The cache key of an event's card, or None if it is not cached."""
    if type(event) is not EventView or event.streaming or not event.pk:
        return None
    data = json.dumps(event.raw_data, ensure_ascii=False, separators=(",", ":"), default=str)
    digest = hashlib.blake2b(data.encode(), digest_size=16).digest()
    tickets = tuple(
        (item.call_id, None if item.ticket is None else _ticket_state(item.ticket))
        for item in event.items
        if item.kind == "call"
    )
    return (event.pk, digest, tickets, timezone.get_current_timezone_name(), translation.get_language(), str(oob))


def get(key: tuple) -> str | None:
    with _lock:
        html = _cards.get(key)
        if html is not None:
            _cards.move_to_end(key)
        return html


def put(key: tuple, html: str) -> None:
    global _chars
    if len(html) > MAX_CARD_CHARS:
        return
    with _lock:
        old = _cards.pop(key, None)
        _chars += len(html) - (len(old) if old is not None else 0)
        _cards[key] = html
        while len(_cards) > MAX_CARDS or _chars > MAX_CHARS:
            _chars -= len(_cards.popitem(last=False)[1])


def clear() -> None:
    global _chars
    with _lock:
        _cards.clear()
        _chars = 0
