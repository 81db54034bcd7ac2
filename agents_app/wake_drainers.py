"""The wake-up drainers of a `celery worker` process (agents_app.wake_worker's bootstep starts and stops
them): the pool's concurrency of daemon threads, each running its worker loop (agents_app.worker_loop)
for its whole life. One of them at a time holds "the pop" (a process keeps one BLPOP waiting): while
the process has a free drain slot (`slots`, shared with Celery's drain task) it waits on the wake-up
lists, and runs the drain it pops at once on its own loop (`worker_loop.run_here`). Once the drain's
first step is done (its claim on its way) it hands the pop to the drainer idle most recently (the
warmest loop), or lets the next one to finish take it. The listener thread they replace handed each
wake-up to a thread of Celery's pool: ~0.2-0.3 ms more of the queue stage (bench/README.md, phases 21
and 27 (drainers)).

The BLPOP is awaited on the drainer's loop over a bare RESP connection of its own
(adkweb.channel_layers.wire); where that cannot speak to the server (TLS), redis-py's blocking call
holds the idle drainer's loop instead. A warm shutdown stops the popping at once (`halt`), a wake-up
popped meanwhile goes back to its list's head, and `stop` waits for the drains running; a Redis outage
is logged once and retried every second; a drain's exception (a CancelledError too) is logged; a
drainer whose loop raises is logged and goes on.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from adkweb.channel_layers.wire import Wires

from . import worker_loop
from .wake import client

logger = logging.getLogger(__name__)
_POP_TIMEOUT = 1  # seconds a BLPOP waits: how long a stop may wait for the drainer holding the pop


class Slots:
    """Drains running in this process, from wake-ups and Celery's task."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._given: list[Callable[[], None]] = []
        self.busy = 0

    def take(self) -> None:
        with self._cond:
            self.busy += 1

    def give(self) -> None:
        with self._cond:
            self.busy -= 1
            self._cond.notify_all()
            given, self._given = self._given, []
        for call in given:
            call()

    def when_given(self, call: Callable[[], None]) -> None:
        """`call()` (once, on the giving thread) at the next `give`."""
        with self._cond:
            self._given.append(call)


slots = Slots()


class Drainers:
    """`limit` drainer threads; one at a time pops a wake-up and runs its drain on its own loop."""

    def __init__(self, limit: int, keys: list[str]) -> None:
        self._limit, self.keys = max(limit, 1), keys
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._held = False  # a drainer holds the pop; when False, nobody waits in `_idle` either
        self._idle: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []  # the newest last
        self._failing = False
        pool = client().connection_pool
        self._wires = Wires(pool, at_least=_POP_TIMEOUT + 5) if _plain(pool) else None
        self._threads = [
            threading.Thread(target=self._live, name=f"adkweb-drain-{i}", daemon=True) for i in range(self._limit)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()
        logger.info("Wake-up drainers on %s (up to %d drains at once).", ", ".join(self.keys), self._limit)

    def halt(self, **_signal: Any) -> None:
        """Pop no more (from Celery's signal handler at a warm shutdown's start: only sets an event)."""
        self._stopped.set()

    def stop(self, timeout: float | None = None) -> None:
        """Pop no more; wait for the drains running (at most `timeout` seconds in all, if given)."""
        self._stopped.set()
        with self._lock:
            idle, self._idle = self._idle, []
        for loop, turn in idle:
            _set_soon(loop, turn)
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            if thread.is_alive() and thread is not threading.current_thread():
                thread.join(None if deadline is None else max(deadline - time.monotonic(), 0))

    def _live(self) -> None:
        while not self._stopped.is_set():
            try:
                worker_loop.run(self._drainer())
            except Exception:
                logger.exception("A wake-up drainer failed; it goes on.")
                self._stopped.wait(0.1)  # not a busy loop of failures

    async def _drainer(self) -> None:
        while await self._take_pop():
            hand_on = _Once(self._hand_on)  # the pop handed on once: after the drain's first step, or here
            try:
                got = await self._pop()
                if got is None:
                    continue
                slots.take()  # counted from now: the next pop waits for a slot
                try:
                    await worker_loop.run_here(_drain_woken(got[1]), then=hand_on)
                finally:
                    slots.give()
            finally:
                hand_on()

    async def _take_pop(self) -> bool:
        """Hold the pop: at once where nobody does, else when it is handed on (False: stopping)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._stopped.is_set():
                return False
            if not self._held:
                self._held = True
                return True
            turn = loop.create_future()
            self._idle.append((loop, turn))
        try:
            await turn
        except BaseException:
            with self._lock:
                waiting = (loop, turn) in self._idle
                if waiting:
                    self._idle.remove((loop, turn))
            if not waiting and not self._stopped.is_set():
                self._hand_on()  # handed to this drainer already: on to the next
            raise
        return not self._stopped.is_set()

    def _hand_on(self) -> None:
        with self._lock:
            if not self._idle:
                self._held = False
                return
            loop, turn = self._idle.pop()
        _set_soon(loop, turn)

    async def _pop(self) -> tuple[str, int] | None:
        """A wake-up (its list, its session) popped while the process has a free slot; None: stopping."""
        while await self._slot_free():
            try:
                got = await self._blpop()
            except Exception:  # Redis down: the next call connects again
                if not self._failing:
                    logger.warning("Wake-up drainers: Redis unreachable; retrying every second.", exc_info=True)
                self._failing = True
                await self._pause(1)
                continue
            if self._failing:
                logger.info("Wake-up drainers: Redis is back.")
                self._failing = False
            if got is None or not got[1].isdigit():  # anything else in the list is not ours: dropped
                continue
            list_key, session_pk = got[0].decode(), int(got[1])
            if self._stopped.is_set():
                _push_back(list_key, session_pk)  # popped while the worker was stopping: for another worker
                return None
            return list_key, session_pk
        return None

    async def _blpop(self) -> Any:
        if self._wires is not None:
            return await self._wires.blocking("BLPOP", *self.keys, _POP_TIMEOUT)
        return client().blpop(self.keys, timeout=_POP_TIMEOUT)  # this idle drainer's loop waits meanwhile

    async def _slot_free(self) -> bool:
        """Until fewer than `limit` drains run in this process (True) or the worker stops (False)."""
        loop = asyncio.get_running_loop()
        freed: asyncio.Future[None] | None = None  # told of the next `give` once, not at each half-second wait
        while not self._stopped.is_set():
            if slots.busy < self._limit:
                return True
            if freed is None or freed.done():
                freed = loop.create_future()
                slots.when_given(functools.partial(_set_soon, loop, freed))
            if slots.busy >= self._limit:
                await asyncio.wait([freed], timeout=0.5)
        return False

    async def _pause(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self._stopped.is_set() and time.monotonic() < end:
            await asyncio.sleep(0.1)


async def _drain_woken(session_pk: int) -> int:
    from . import runner  # not at import: the bootstep's module is loaded before Django is set up

    try:
        return await runner.session_turns_drain(session_pk)
    # As Celery's task would log it; the sweeper brings owed work back. A CancelledError too: this is the
    # drain's own task (worker_loop.run_here), which nothing cancels; one raised in it (a library's cancel
    # scope, a future cancelled) went through the drainer's loop and ended its thread (`_live`).
    except (Exception, asyncio.CancelledError):
        logger.exception("Drain of session %s (woken) failed", session_pk)
        return 0


def _push_back(list_key: str, session_pk: int) -> None:
    try:
        client().lpush(list_key, session_pk)
    except Exception:
        logger.warning("Wake-up for session %s not pushed back; the sweeper will find it.", session_pk, exc_info=True)


def _plain(pool: Any) -> bool:
    """Plain TCP or a unix socket: what adkweb.channel_layers.wire speaks (TLS keeps redis-py's client)."""
    from redis.connection import Connection, SSLConnection, UnixDomainSocketConnection

    kind = pool.connection_class
    return issubclass(kind, UnixDomainSocketConnection) or (
        issubclass(kind, Connection) and not issubclass(kind, SSLConnection)
    )


class _Once:
    def __init__(self, call: Callable[[], None]) -> None:
        self._call: Callable[[], None] | None = call

    def __call__(self) -> None:
        call, self._call = self._call, None
        if call is not None:
            call()


def _set_soon(loop: asyncio.AbstractEventLoop, future: asyncio.Future[None]) -> None:
    try:
        loop.call_soon_threadsafe(_set, future)
    except RuntimeError:  # its loop is closed: its drainer is gone
        pass


def _set(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
