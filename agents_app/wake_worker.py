"""The worker's side of the wake-ups (agents_app.wake): a listener thread per `celery worker` process
that pops wake-ups while the process has a free drain slot and runs their drains on the threads of
Celery's pool, started and stopped with the worker by the bootstep `WakeStep` (adkweb.celery)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from celery import bootsteps, signals

from .wake import KEY_PREFIX, client, enabled

logger = logging.getLogger(__name__)
NOTIFICATIONS_QUEUE = "notifications"  # agents_app.tasks.NOTIFICATIONS_QUEUE (tasks imports this module)
_POP_TIMEOUT = 1  # seconds a BLPOP waits: how long a stop may wait for the listener


class Slots:
    """Drains running (or handed to the pool) in this process, from wake-ups and Celery's task."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.busy = 0

    def take(self) -> None:
        with self._cond:
            self.busy += 1

    def give(self) -> None:
        with self._cond:
            self.busy -= 1
            self._cond.notify_all()

    def wait_below(self, limit: int, stopped: threading.Event) -> bool:
        """Wait until fewer than `limit` drains are busy (True) or `stopped` is set (False)."""
        with self._cond:
            while self.busy >= limit and not stopped.is_set():
                self._cond.wait(0.5)
            return not stopped.is_set()


slots = Slots()


def drain_counted(session_pk: int) -> int:
    """Run the session's drain here (a pool thread), counted in `slots`."""
    from . import runner  # not at import: the bootstep's module is loaded before Django is set up

    slots.take()
    try:
        return runner.session_turns_run(session_pk)
    finally:
        slots.give()


class Listener:
    """A thread that pops wake-ups while the process has a free slot and submits their drains."""

    def __init__(self, submit: Callable[..., Future], concurrency: int, keys: list[str]) -> None:
        self._submit, self._limit, self.keys = submit, max(concurrency, 1), keys
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="adkweb-wake", daemon=True)

    def start(self) -> None:
        self._thread.start()
        logger.info("Wake-up listener on %s (up to %d drains at once).", ", ".join(self.keys), self._limit)

    def halt(self, **_signal: Any) -> None:
        """Pop no more (from Celery's signal handler at a warm shutdown's start: only sets an event)."""
        self._stopped.set()

    def stop(self, timeout: float = _POP_TIMEOUT + 2) -> None:
        self._stopped.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _listen(self) -> None:
        conn = client()
        failing = False
        while slots.wait_below(self._limit, self._stopped):
            try:
                got = conn.blpop(self.keys, timeout=_POP_TIMEOUT)
            except Exception:  # Redis down: redis-py reconnects on the next call
                if not failing:
                    logger.warning("Wake-up listener: Redis unreachable; retrying every second.", exc_info=True)
                failing = True
                self._stopped.wait(1)
                continue
            if failing:
                logger.info("Wake-up listener: Redis is back.")
                failing = False
            if got is not None and got[1].isdigit():  # anything else in the list is not ours: dropped
                self._hand_over(got[0].decode(), int(got[1]))

    def _hand_over(self, list_key: str, session_pk: int) -> None:
        if self._stopped.is_set():
            _push_back(list_key, session_pk)  # popped while the worker was stopping: for another worker
            return
        slots.take()  # counted from now: the next pop waits for a slot
        try:
            future = self._submit(_drain_woken, session_pk)
        except RuntimeError:  # the pool is shut down
            slots.give()
            _push_back(list_key, session_pk)
            return
        future.add_done_callback(lambda f: _done(f, list_key, session_pk))


def _drain_woken(session_pk: int) -> int:
    from . import runner

    try:
        return runner.session_turns_run(session_pk)
    except Exception:  # as Celery's task would log it; the sweeper brings owed work back
        logger.exception("Drain of session %s (woken) failed", session_pk)
        return 0


def _done(future: Future, list_key: str, session_pk: int) -> None:
    slots.give()
    if future.cancelled():  # the pool stopped before it ran: another worker (or this one, restarted) will
        _push_back(list_key, session_pk)


def _push_back(list_key: str, session_pk: int) -> None:
    try:
        client().lpush(list_key, session_pk)
    except Exception:
        logger.warning("Wake-up for session %s not pushed back; the sweeper will find it.", session_pk, exc_info=True)


class WakeStep(bootsteps.StartStopStep):
    """The worker's wake-up listener: started after the pool, stopped before it (Celery stops the
    worker's steps in reverse order: the pool then waits for the drains running on it)."""

    requires = {"celery.worker.components:Pool"}

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.listener: Listener | None = None

    def create(self, worker: Any) -> WakeStep:
        return self

    def start(self, worker: Any) -> None:
        if not enabled():
            return
        # The wake-up lists of the queues this worker takes (the web pushes to its drain task's queue's,
        # agents_app.wake.key): `-Q agents` in production; a bench's private queue has its own list.
        consumed = worker.app.amqp.queues.consume_from or worker.app.amqp.queues
        keys = [KEY_PREFIX + q for q in sorted(consumed) if q != NOTIFICATIONS_QUEUE]
        if not keys:
            return  # a worker of the notifications queue only
        executor = getattr(worker.pool, "executor", None)
        if executor is None:
            logger.error(
                "ADKWEB_WAKE_LIST is on but this worker's pool (%s) is not Celery's threads pool: it takes "
                "Celery's drain tasks only, and turns wait for the sweeper. Run workers with the threads "
                "pool, or set ADKWEB_WAKE_LIST=0 for every process.",
                type(worker.pool).__name__,
            )
            return
        self.listener = Listener(executor.submit, worker.pool.limit, keys)
        # Celery stops this step only once its consumer has stopped: stop popping as the shutdown starts.
        signals.worker_shutting_down.connect(self.listener.halt, weak=False)
        self.listener.start()

    def stop(self, worker: Any) -> None:
        if self.listener is not None:
            signals.worker_shutting_down.disconnect(self.listener.halt)
            self.listener.stop()
            self.listener = None

    def terminate(self, worker: Any) -> None:
        self.stop(worker)
