"""Template helpers for conversation pages (and anyone including agents_app/partials/event.html)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template

from agents_app import selectors, summaries, timeline

register = template.Library()


@register.simple_tag
def event_view(event: Any, tickets: dict | None = None) -> Any:
    """An EventView from a StoredEvent (or the EventView itself, unchanged)."""
    if isinstance(event, (timeline.EventView, timeline.TurnError)):
        return event
    return selectors.stored_event_view(event, tickets if isinstance(tickets, dict) else None)


@register.filter
def epoch(value: Any) -> datetime | None:
    """A float UNIX timestamp (ADK's time fields) as an aware datetime."""
    from agents_app.rows import epoch as to_datetime

    return to_datetime(value)


@register.filter
def pretty_json(value: Any) -> str:
    return summaries.pretty_json(value)


@register.filter
def status_label(value: str) -> str:
    """running / waiting / failed / idle as people say it."""
    return selectors.SESSION_STATUSES.get(value, value)


@register.filter
def model_label(model: str) -> str:
    from agents_app.demo.model import DEMO_LABEL, is_demo_model

    return DEMO_LABEL if model and is_demo_model(model) else (model or "(default)")


@register.simple_tag
def session_row(s: Any, oob: Any = "") -> str:
    """A row of the conversation list (adkweb.markup: written in Python, as the template wrote it)."""
    from agents_app.rows import session_row as row

    return row(s, oob)


EVENT_TEMPLATE = "agents_app/partials/event.html"


@register.simple_tag(takes_context=True)
def event_card(context: Any, event: Any, oob: Any = "") -> str:
    """`{% include "agents_app/partials/event.html" with event=event oob=oob %}`, with stored events'
    cards rendered once per process (agents_app.cards: the key holds what the card depends on)."""
    from django.utils.safestring import mark_safe

    from agents_app import cards

    key = cards.card_key(event, oob)
    html = cards.get(key) if key is not None else None
    if html is None:
        template = context.template.engine.get_template(EVENT_TEMPLATE)
        with context.push(event=event, oob=oob):
            html = template.render(context)
        if key is not None:
            cards.put(key, html)
    return mark_safe(html)
