"""The worker's side of the wake-ups (agents_app.wake): in each `celery worker` process, drainer threads
(agents_app.wake_drainers) that pop wake-ups while the process has a free drain slot and run their
drains on their own loops, started and stopped with the worker by the bootstep `WakeStep`
(adkweb.celery); Celery's drain task counted in the same slots (`drain_counted`)."""

from __future__ import annotations

import logging
from typing import Any

from celery import bootsteps, signals

from .wake import KEY_PREFIX, enabled
from .wake_drainers import Drainers, Slots, slots

__all__ = ["Drainers", "Slots", "WakeStep", "drain_counted", "slots"]

logger = logging.getLogger(__name__)
NOTIFICATIONS_QUEUE = "notifications"  # agents_app.tasks.NOTIFICATIONS_QUEUE (tasks imports this module)
_TERMINATE_WAIT = 3  # seconds a cold shutdown waits for the running drains


def drain_counted(session_pk: int) -> int:
    """Run the session's drain here (a pool thread: Celery's task), counted in `slots` with the drainers'."""
    from . import runner  # not at import: the bootstep's module is loaded before Django is set up

    slots.take()
    try:
        return runner.session_turns_run(session_pk)
    finally:
        slots.give()


class WakeStep(bootsteps.StartStopStep):
    """The worker's wake-up drainers: started after the pool, stopped before it (Celery stops the
    worker's steps in reverse order); a warm stop waits for the drains running, a cold one
    `_TERMINATE_WAIT` seconds at most."""

    requires = {"celery.worker.components:Pool"}

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.drainers: Drainers | None = None

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
        if getattr(worker.pool, "executor", None) is None:
            logger.error(
                "ADKWEB_WAKE_LIST is on but this worker's pool (%s) is not Celery's threads pool: it takes "
                "Celery's drain tasks only, and turns wait for the sweeper. Run workers with the threads "
                "pool, or set ADKWEB_WAKE_LIST=0 for every process.",
                type(worker.pool).__name__,
            )
            return
        self.drainers = Drainers(worker.pool.limit, keys)
        # Celery stops this step only once its consumer has stopped: stop popping as the shutdown starts.
        signals.worker_shutting_down.connect(self.drainers.halt, weak=False)
        self.drainers.start()

    def stop(self, worker: Any, timeout: float | None = None) -> None:
        if self.drainers is not None:
            signals.worker_shutting_down.disconnect(self.drainers.halt)
            self.drainers.stop(timeout)
            self.drainers = None

    def terminate(self, worker: Any) -> None:
        self.stop(worker, _TERMINATE_WAIT)
