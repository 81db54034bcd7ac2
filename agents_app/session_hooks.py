"""The session store's event hooks: what other apps run with an event as it is stored.

A hook is called inside the append's transaction with (session row, event row, event): approvals uses
it to open tickets for new interrupts atomically with the event that raised them. A hook registers
with:

- `wants`, a filter that says, cheaply and without a query (from the event and the ADK session's
  events in memory), whether the hook has anything to do with the event. An event no hook wants is
  stored in one statement, without a transaction around hooks, from the event loop. **A hook with no
  filter wants every event**, so every append goes the slower way (a thread, a transaction): register
  one only when that is meant, and say so (`wants_every_event=True`), or a warning is logged.
- `rider` (PostgreSQL): the hook's work for an event inside the append's one statement
  (session_sql.Rider: its writes as CTEs, a guard that sends anything unexpected to the hook), with no
  transaction around the append and no round trip per write. A rider with an `announce` (its
  after-commit work, async) lets the append be sent from the event loop. None: the hook runs as usual.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from google.adk.events.event import Event
from google.adk.sessions.session import Session

if TYPE_CHECKING:
    from . import session_sql
    from .models import AdkSession, StoredEvent

log = logging.getLogger(__name__)

EventHook = Callable[["AdkSession", "StoredEvent", Event], None]
HookFilter = Callable[[Event, Session], bool]
HookRider = Callable[[Event, Session], "session_sql.Rider | None"]

_event_hooks: list[EventHook] = []
_hook_filters: dict[EventHook, HookFilter] = {}
_hook_riders: dict[EventHook, HookRider] = {}


def register_event_hook(
    hook: EventHook,
    wants: HookFilter | None = None,
    rider: HookRider | None = None,
    *,
    wants_every_event: bool = False,
) -> None:
    if wants is None and not wants_every_event:
        log.warning(
            "session store: event hook %s registered without `wants`: every append now takes the "
            "thread path (pass wants=..., or wants_every_event=True if that is meant)",
            getattr(hook, "__qualname__", hook),
        )
    if hook not in _event_hooks:
        _event_hooks.append(hook)
    if wants is not None:
        _hook_filters[hook] = wants
    if rider is not None:
        _hook_riders[hook] = rider


def unregister_event_hook(hook: EventHook) -> None:
    """Undo register_event_hook (tests, plugins reloaded)."""
    if hook in _event_hooks:
        _event_hooks.remove(hook)
    _hook_filters.pop(hook, None)
    _hook_riders.pop(hook, None)


def registered() -> list[tuple[EventHook, HookFilter | None, HookRider | None]]:
    """Each hook with its filter and rider, in registration order (to register them elsewhere)."""
    return [(hook, _hook_filters.get(hook), _hook_riders.get(hook)) for hook in _event_hooks]


def hooks_for(event: Event, session: Session) -> list[EventHook]:
    return [hook for hook in _event_hooks if (wants := _hook_filters.get(hook)) is None or wants(event, session)]


def riders_for(hooks: list[EventHook], event: Event, session: Session) -> list[session_sql.Rider] | None:
    """Each hook's rider for this event, or None when any of them has none (or declines it)."""
    riders = []
    for hook in hooks:
        rider = _hook_riders.get(hook)
        planned = rider(event, session) if rider is not None else None
        if planned is None:
            return None
        riders.append(planned)
    return riders


def loop_riders(event: Event, session: Session) -> list[session_sql.Rider] | None:
    """The riders of an append sent from the event loop: none when no hook wants the event; None
    (the thread path) when a hook that wants it has no rider for it, or one with no `announce`
    (its after-commit work is sync)."""
    hooks = hooks_for(event, session)
    riders = riders_for(hooks, event, session) if hooks else []
    if riders is None or any(rider.announce is None for rider in riders):
        return None
    return riders
