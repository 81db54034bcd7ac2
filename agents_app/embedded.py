"""Embedded mode: a real Celery worker (threads pool, memory broker) inside the serving process,
plus a small sweeper thread standing in for `celery beat`: it sends every task of
`CELERY_BEAT_SCHEDULE`, each at its own interval, to the in-process worker."""

from __future__ import annotations

import atexit
import logging
import sys
import threading
import time
from typing import Any

logger = logging.getLogger(__name__)
_lock = threading.Lock()
_started = False
# start_worker() is a generator-based context manager: if it were garbage collected, its cleanup
# would run and stop the worker. Holding it here keeps the worker alive for the process.
_worker_context = None
_DB_REUSE = 1000


def start_embedded_worker(concurrency: int = 2, sweep_every: float = 5.0) -> None:
    global _started, _worker_context
    with _lock:
        if _started:
            return
        _started = True
    from celery.contrib.testing.worker import start_worker
    from django.db import connection

    from adkweb.celery import app

    # Celery's Django fixup closes the task thread's database connections before and after every
    # task (for a pool to take them back); SQLite has none, and a new connection registers Django's
    # SQL functions again (~1 ms of CPU): keep them, as the request threads do (CONN_MAX_AGE None),
    # closing them only every _DB_REUSE tasks.
    if connection.vendor == "sqlite":  # PostgreSQL: back to its pool after each task, as before
        app.conf.CELERY_DB_REUSE_MAX = _DB_REUSE
    _worker_context = start_worker(
        app, pool="threads", concurrency=concurrency, perform_ping_check=False, loglevel="WARNING"
    )
    _worker_context.__enter__()  # runs for the life of the process
    _stop_at_shutdown()
    threading.Thread(target=_sweep_forever, args=(sweep_every,), name="adkweb-sweeper", daemon=True).start()
    logger.info("Embedded Celery worker started (memory broker).")


def _stop_at_shutdown() -> None:
    """Stop the worker when the server stops (Ctrl-C, SIGTERM). Under daphne (`make run`), before its
    reactor shuts down and off the reactor's thread (a turn in progress may still publish through it);
    at the interpreter's exit the thread pool's executor already refuses new tasks, and a message
    received then printed a traceback. Whatever server runs us, at exit at the latest. Left to the
    garbage collector, the worker's context was cleaned up after Celery's signals were torn down: an
    ignored AttributeError."""
    reactor = sys.modules.get("twisted.internet.reactor")
    if reactor is not None:
        from twisted.internet import threads

        reactor.addSystemEventTrigger("before", "shutdown", threads.deferToThread, _stop_worker)
    atexit.register(_stop_worker)  # nothing to do if stopped already


def _stop_worker() -> None:
    """Stop the worker: its tasks in progress get the context's shutdown timeout to finish (a turn still
    running after it is requeued once its lease lapses, after the next start)."""
    global _worker_context
    with _lock:
        context, _worker_context = _worker_context, None
    if context is None:
        return
    try:
        context.__exit__(None, None, None)
    except RuntimeError as exc:  # the worker thread did not end within the timeout
        logger.warning("Embedded Celery worker: %s; its unfinished turns resume after the next start.", exc)
    else:
        logger.info("Embedded Celery worker stopped.")


def sweeper_start(every: float) -> threading.Event:
    """The sweeper alone, in a thread (tests start it beside their own worker); set the event to stop it."""
    stop = threading.Event()
    threading.Thread(target=_sweep_forever, args=(every, stop), name="adkweb-sweeper", daemon=True).start()
    return stop


def _sweep_forever(every: float, stop: threading.Event | None = None) -> None:
    """Send every beat task at its interval (at most `every` apart) until `stop` is set."""
    from django.conf import settings

    from adkweb.celery import app

    # At most `every` apart: one process, so no load to spare by waiting longer.
    beat: dict[str, dict[str, Any]] = settings.CELERY_BEAT_SCHEDULE
    schedule = {name: min(float(entry["schedule"]), every) for name, entry in beat.items()}
    tasks = {name: str(entry["task"]) for name, entry in beat.items()}
    tick = min([every, *schedule.values()])
    next_at = {name: time.monotonic() + period for name, period in schedule.items()}
    stop = stop or threading.Event()
    while not stop.wait(tick):
        now = time.monotonic()
        for name, due in next_at.items():
            if now < due:
                continue
            next_at[name] = now + schedule[name]
            try:
                app.send_task(tasks[name])
            except Exception:
                logger.warning("Sweeper could not send %s", tasks[name], exc_info=True)
