"""The web process's cyclic garbage collector, kept out of the event loop's way.

CPython's full (generation 2) collection walks every object the collector tracks that is not frozen,
and the process's one event loop waits for it. A web process's long-lived objects are what it made
to start (Django, the apps, ADK: ~200k objects) and what each websocket holds while it is open (its
consumer, daphne's and autobahn's protocol, the ASGI middleware's coroutines, the scope, the user,
the queues: ~170 objects a socket). With 1,000 sockets on one conversation a full collection took
205-387 ms, 40-124 ms once the startup objects were frozen, and a new event waited that long at
every socket: the round of bench/fanout.py that missed target 5 (bench/README.md, phases 8 and 9).

So (`install`, from adkweb.asgi):

- **startup**: once the process is set up, `gc.collect(); gc.freeze()`: the startup objects leave the
  collector's walks for the life of the process.
- **settled websockets**: when websockets have opened or closed and then none has for `settle`
  seconds, the loop collects once (`gc.collect()`: what is garbage then is freed, not frozen) and
  freezes what survived: the open sockets' objects. Full collections after that walk only what was
  made since (each socket's messages are forwarded and dropped: little survives), a few ms.
- **thaw**: a frozen object is still freed by reference counting when its last reference goes, but a
  frozen *cycle* is never collected, and a closed socket leaves ~95 objects in cycles (measured under
  daphne): frozen, they would stay in memory for ever. So once `thaw_closes` websockets have closed
  since the last thaw, or the frozen objects have grown past `thaw_growth` times their number after
  it, the next settle first unfreezes everything and the collection walks the whole heap once (the
  startup objects too: the one long pause, 0.6-2.0 s with 1,000 sockets at load 8-10, at a moment
  when no socket has opened or closed for `settle` seconds), then freezes again. Memory stays
  bounded: the cyclic garbage kept frozen is at most what `thaw_closes` sockets and one growth step
  leave.

What this costs: frozen cycles wait for the next thaw; a settle's collection is one full pause over
the unfrozen objects (what an automatic full collection would have walked anyway, at a moment of
the process's choosing rather than in the middle of a fan-out); a thaw's walks the whole heap.
Generation 0 and 1 collections are untouched. The Celery worker does not load adkweb.asgi: its policy
(`freeze_worker`, at its `worker_ready` and in a prefork child at `worker_process_init`: adkweb.celery)
is the startup freeze (a full collection there walked ~190k startup objects, ~42 ms of whatever turn
it fell in), and one more after its first drain that ran a turn (`drain_ran`, from
agents_app.runner): what that turn built to stay (the app's runner, ADK's and the model client's
objects, the loop's connections: ~40k objects) out of the walks too; a full collection every ~50
turns then took ~1 ms instead of ~17 (bench/README.md, phase 21 (drain)). Later apps' runners are
not frozen (one freeze, a collection of ~20 ms once, at a worker's start).

`ADKWEB_GC_SETTLE_SECONDS=0` turns the settle freezes and thaws off (the startup freeze stays).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)


class Policy:
    """The settle freezes and thaws of one process (see the module docstring)."""

    def __init__(self, settle: float = 1.0, thaw_closes: int = 1000, thaw_growth: float = 2.0) -> None:
        self.settle, self.thaw_closes, self.thaw_growth = settle, thaw_closes, thaw_growth
        self.last_change = 0.0  # monotonic time of the last websocket opened or closed
        self.changed = False  # since the last settle
        self.closes = 0  # websockets closed since the last thaw
        self.floor = gc.get_freeze_count()  # frozen objects after the last thaw (or startup)
        self.timer: asyncio.TimerHandle | None = None
        self.timer_loop: asyncio.AbstractEventLoop | None = None
        self.settles = self.thaws = 0
        self.last_pause_ms = 0.0

    # -- websocket activity (the event loop's thread) -----------------------------------------------
    def opened(self) -> None:
        self._changed()

    def closed(self) -> None:
        self.closes += 1
        self._changed()

    def _changed(self) -> None:
        if self.settle <= 0:
            return
        self.last_change, self.changed = time.monotonic(), True
        loop = asyncio.get_running_loop()
        if self.timer is None or self.timer_loop is not loop:  # (a test's loop that ended took its timer)
            self.timer, self.timer_loop = loop.call_later(self.settle, self._check), loop

    def _check(self) -> None:
        """The timer: settled if nothing changed for `settle` seconds, else wait for the rest."""
        self.timer = None
        quiet = time.monotonic() - self.last_change
        if quiet < self.settle:
            self.timer = asyncio.get_running_loop().call_later(self.settle - quiet, self._check)
            return
        self.settled()

    # -- the collections ----------------------------------------------------------------------------
    def thaw_due(self) -> bool:
        return self.closes >= self.thaw_closes or gc.get_freeze_count() > self.thaw_growth * max(self.floor, 1)

    def settled(self) -> None:
        """Collect what is garbage now and freeze what survives; unfreeze first if a thaw is due."""
        if not self.changed:
            return
        self.changed = False
        thaw = self.thaw_due()
        started = time.perf_counter()
        if thaw:
            gc.unfreeze()
        gc.collect()
        gc.freeze()
        self.last_pause_ms = (time.perf_counter() - started) * 1000
        self.settles += 1
        if thaw:
            self.thaws += 1
            self.closes = 0
            self.floor = gc.get_freeze_count()
        logger.info(
            "gc: %s after websockets settled in %.0f ms; %d objects frozen",
            "thawed and froze" if thaw else "froze",
            self.last_pause_ms,
            gc.get_freeze_count(),
        )


_policy: Policy | None = None


def freeze_startup(**_: Any) -> None:
    """What the process made to start (Django, the apps, ADK) out of the cyclic collector's walks, for
    the life of the process: collect what is garbage now, freeze the rest. (A Celery signal receiver
    too: it takes the signal's arguments.)"""
    gc.collect()
    gc.freeze()


_drain_freeze_due = False  # armed by `freeze_worker`, done by the first `drain_ran`
_drain_freeze_lock = threading.Lock()  # a worker's drain threads


def freeze_worker(**_: Any) -> None:
    """A Celery worker's policy (a signal receiver: adkweb.celery): the startup freeze now, and one more
    after its first drain that runs a turn (`drain_ran`)."""
    global _drain_freeze_due
    freeze_startup()
    _drain_freeze_due = True


def drain_ran() -> None:
    """After a drain that ran a turn (agents_app.runner): in a worker (`freeze_worker`), the first time,
    collect and freeze what survived it; nothing elsewhere (the web process has its own policy)."""
    global _drain_freeze_due
    if not _drain_freeze_due:
        return
    with _drain_freeze_lock:
        if not _drain_freeze_due:
            return
        _drain_freeze_due = False
    started = time.perf_counter()
    freeze_startup()
    logger.info(
        "gc: froze what the first drain left in %.0f ms; %d objects frozen",
        (time.perf_counter() - started) * 1000,
        gc.get_freeze_count(),
    )


def install(settle: float = 1.0, thaw_closes: int = 1000) -> Policy:
    """The startup freeze, and the process's policy for settled websockets (see the module docstring);
    its figures on the process's metrics (adkweb.metrics)."""
    global _policy
    freeze_startup()
    first = _policy is None
    _policy = Policy(settle=settle, thaw_closes=thaw_closes)
    if first:
        from adkweb.metrics import REGISTRY

        REGISTRY.register(_Collector())
    return _policy


class _Collector:
    """adkweb_gc_* on /metrics: frozen objects, settles and thaws, the last settle's pause."""

    def collect(self) -> Any:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        current = _policy
        yield GaugeMetricFamily(
            "adkweb_gc_frozen_objects",
            "Objects out of the cyclic collector's walks (gc.freeze).",
            gc.get_freeze_count(),
        )
        if current is not None:
            yield CounterMetricFamily(
                "adkweb_gc_settles", "Collections and freezes after websockets settled.", current.settles
            )
            yield CounterMetricFamily("adkweb_gc_thaws", "Settles that unfroze and walked everything.", current.thaws)
            yield GaugeMetricFamily(
                "adkweb_gc_last_settle_seconds",
                "The last settle's pause of the event loop.",
                current.last_pause_ms / 1000,
            )


def policy() -> Policy | None:
    return _policy


def websockets_settle(app: Any) -> Any:
    """ASGI middleware: tells the process's policy when a websocket connection starts and ends."""

    async def asgi(scope: dict, receive: Callable, send: Callable) -> Any:
        current = _policy
        if scope.get("type") != "websocket" or current is None:
            return await app(scope, receive, send)
        current.opened()
        try:
            return await app(scope, receive, send)
        finally:
            current.closed()

    return asgi
