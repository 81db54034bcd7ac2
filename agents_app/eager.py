"""Eager runs: the web process that answers `/run` (or `/run_sse`) runs the turn's drain itself.

Such a request holds its HTTP answer open until the turn ends (ADK's `api_server` runs the turn in
the request). In services mode the turn used to cross web -> Redis (the wake-up) -> worker -> Redis
(its events) -> web. Here, as Temporal's "eager workflow start", the web process that committed the
turn, and waits for it anyway, runs the session's drain on one of a few threads of its own
(`ADKWEB_EAGER_SLOTS`), with the very code a worker runs (`runner.session_turns_run`: the lease, the
claim, the heartbeat, the turn, each on the thread's long-lived loop, agents_app.worker_loop), and
sends no wake-up. Exactly once comes from the lease and the claim, not from who runs the drain:

- No free slot, eager off (`ADKWEB_EAGER_RUN`), or a turn committed by anything but `/run`: the
  wake-up is sent as before and a worker runs it.
- The drain finds the session's lease taken (a worker or another request is running it): it claims
  nothing; the holder claims the new turn when its own turn ends (agents_app.turn_sql: `done_next`
  sees every turn committed before it took the session row). Whatever is still queued once the
  drain returns (a holder that stopped without looking, a drain that failed) gets the wake-up it
  would have had, so nothing waits for the sweeper that did not before.
- The web process dies mid-turn: its heartbeat stops, the lease runs out and the sweeper (beat)
  hands the session to a worker, which resumes the turn as it resumes a dead worker's.

How it is wired: `/run` reserves a slot (`reserved`) around the transaction that queues its turn;
the turn's after-commit enqueue (agents_app.services.session_enqueue) asks `run_here` first, which
hands the session to a drain thread instead of sending the wake-up. A reservation the commit did
not use (an approval held for a quorum, a replayed Idempotency-Key, an error) is given back. The
request follows its turn exactly as before (agents_app.api.watch: the group messages, the database
at the end); nothing in the answer depends on who ran the turn.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.conf import settings
from django.db import close_old_connections

from adkweb.per_process import PerProcess

logger = logging.getLogger(__name__)


def enabled() -> bool:
    """ADKWEB_EAGER_RUN on, with at least one slot (either mode: in embedded mode the drain runs on a
    slot's thread instead of going through the in-process broker to the worker thread)."""
    return bool(settings.ADKWEB_EAGER_RUN and settings.ADKWEB_EAGER_SLOTS > 0)


class _Pool:
    """`ADKWEB_EAGER_SLOTS` daemon threads, started as needed, each running the drains handed to
    it on its own long-lived loop; a slot is reserved before its drain is handed over, so a drain
    never waits for a thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.busy = 0
        self.ran = 0  # drains run (tests, diagnostics)
        self.calls: queue.SimpleQueue[tuple[int, Callable[[int], object]]] = queue.SimpleQueue()
        self.threads: list[threading.Thread] = []
        self.pid = os.getpid()
        self.closing = False
        self.exit_hooked = False

    def reserve(self, limit: int) -> bool:
        with self.lock:
            if self.busy >= limit or self.closing:
                return False
            if not self.exit_hooked:
                atexit.register(self.close)
                self.exit_hooked = True
            self.busy += 1
            self.threads = [t for t in self.threads if t.is_alive()]
            if len(self.threads) < self.busy:
                thread = threading.Thread(target=self._serve, name=f"adkweb-eager-{len(self.threads)}", daemon=True)
                thread.start()
                self.threads.append(thread)
            return True

    def close(self, timeout: float | None = None) -> bool:
        """At the process's exit (a web server stopped with SIGTERM): take no more drains and wait for
        the running ones, up to the session lease's length (past it a worker resumes them anyway),
        so a deploy does not cut a turn short. True if none was left running."""
        if self.pid != os.getpid():
            return True
        with self.lock:
            self.closing = True
        wait = settings.ADKWEB_SESSION_LEASE_SECONDS if timeout is None else timeout
        deadline = time.monotonic() + wait
        while self.busy and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.busy:
            logger.warning("Exiting with %d eager drain(s) running; the sweeper hands them to a worker.", self.busy)
        return not self.busy

    def give(self) -> None:
        with self.lock:
            self.busy -= 1

    def _serve(self) -> None:
        while True:
            session_pk, wake = self.calls.get()
            try:
                _drain(session_pk, wake)
            finally:
                with self.lock:
                    self.busy -= 1
                    self.ran += 1


_local = threading.local()
_current_pool = PerProcess(_Pool).get  # a forked child never uses its parent's threads


@dataclass
class Reservation:
    session_pk: int
    used: bool = False


@contextmanager
def reserved(session_pk: int) -> Iterator[Reservation | None]:
    """A drain slot for `session_pk` while the block queues its turn (None: eager off or no slot free,
    the wake-up goes out as before). The turn's after-commit enqueue, on this thread, uses it
    (`run_here`); unused, it is given back when the block ends."""
    pool = _current_pool()
    if not enabled() or not pool.reserve(settings.ADKWEB_EAGER_SLOTS):
        yield None
        return
    held = Reservation(session_pk)
    before = getattr(_local, "reservation", None)
    _local.reservation = held
    try:
        yield held
    finally:
        _local.reservation = before
        if not held.used:
            pool.give()


def run_here(session_pk: int, wake: Callable[[int], object]) -> bool:
    """From the enqueue after a turn's commit: True if this thread reserved a slot for the session
    and its drain now runs here (send no wake-up); False: wake a worker as usual. `wake(session_pk)`:
    the enqueue without this (agents_app.services), for what the drain leaves queued."""
    held: Reservation | None = getattr(_local, "reservation", None)
    if held is None or held.used or held.session_pk != session_pk:
        return False
    held.used = True
    _current_pool().calls.put((session_pk, wake))
    return True


_session_drain: Callable[[int], int] | None = None


def register_drain(drain: Callable[[int], int]) -> None:
    """The drain eager runs call: agents_app.runner.session_turns_run, registered by
    AgentsAppConfig.ready (the runner imports the API's renderers: an import here would be a cycle)."""
    global _session_drain
    _session_drain = drain


def _drain(session_pk: int, wake: Callable[[int], object]) -> None:
    """The worker's drain, here; then the wake-up for anything it left queued (see the module)."""
    from .models import Turn

    try:
        assert _session_drain is not None, "agents_app.eager: no drain registered (AgentsAppConfig.ready)"
        ran = _session_drain(session_pk)
        if not ran:
            logger.info("Session %s: lease held elsewhere; its holder or a worker runs the turn.", session_pk)
    # As a worker's drain would log it; the wake-up below hands the rest on. A CancelledError too (raised
    # out of the thread's loop by worker_loop.run, as the drain's other errors are): it ended the slot's
    # thread with its connection open, and what the drain left queued got no wake-up.
    except (Exception, asyncio.CancelledError):
        logger.exception("Eager drain of session %s failed", session_pk)
    try:
        if Turn.owed(session_pk):
            wake(session_pk)
    except Exception:
        logger.warning("Session %s: could not look for turns left queued; the sweeper will.", session_pk, exc_info=True)
    finally:
        close_old_connections()  # back to the pool until its next drain (PostgreSQL); SQLite keeps it


def busy() -> int:
    """Drains running (or handed over) in this process (tests, diagnostics)."""
    return _current_pool().busy


def drains_run() -> int:
    return _current_pool().ran
