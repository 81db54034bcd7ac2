"""Embedded mode: a real Celery worker (threads pool, memory broker) inside the serving process,
plus a small sweeper thread standing in for `celery beat`."""

from __future__ import annotations

import logging
import threading
import time

logger = logging.getLogger(__name__)
_lock = threading.Lock()
_started = False
# start_worker() is a generator-based context manager: if it were garbage collected, its cleanup
# would run and stop the worker. Holding it here keeps the worker alive for the process.
_worker_context = None


def start_embedded_worker(concurrency: int = 2, sweep_every: float = 5.0) -> None:
    global _started, _worker_context
    with _lock:
        if _started:
            return
        _started = True
    from celery.contrib.testing.worker import start_worker

    from adkweb.celery import app

    _worker_context = start_worker(
        app, pool="threads", concurrency=concurrency, perform_ping_check=False, loglevel="WARNING"
    )
    _worker_context.__enter__()  # runs for the life of the process
    threading.Thread(target=_sweep_forever, args=(sweep_every,), name="adkweb-sweeper", daemon=True).start()
    logger.info("Embedded Celery worker started (memory broker).")


def _sweep_forever(every: float) -> None:
    from django.db import close_old_connections

    from adkweb.celery import app

    from .services import owed_sessions_enqueue

    def notifications_sweep() -> None:  # by name: this app does not import notifications
        app.send_task("notifications.tasks.notifications_sweep")

    while True:
        time.sleep(every)
        for sweep in (owed_sessions_enqueue, notifications_sweep):  # what beat sends in services mode
            try:
                sweep()
            except Exception:
                logger.warning("Sweeper pass %s failed", sweep.__name__, exc_info=True)
            finally:
                close_old_connections()
