"""Getting work through a broker outage quickly. The Turn row is the truth and the sweeper (beat)
re-enqueues owed work, but at its own pace; these two make delivery follow the broker's return
within a second or two:

- `relay_owe`: an enqueue the broker refused (after the request that queued the turn committed)
  is retried every ADKWEB_ENQUEUE_RETRY_SECONDS from a thread of the process, until it goes through.
- `Consumer`: the worker reconnects to the broker every second (kombu backs off to 30 s between
  tries by default, so a worker could sit idle for half a minute after Redis came back).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from celery.worker.consumer import Consumer as CeleryConsumer
from django.conf import settings

logger = logging.getLogger(__name__)
_lock = threading.Lock()
# Sessions owed, each with the refusals recorded for it: a send clears it only if none came meanwhile (a
# turn committed after that send's wake-up left may find the drain it woke done already: sent again).
_owed: dict[int, int] = {}
_relay: threading.Thread | None = None


def relay_owe(session_pk: int, send: Callable[[int], object]) -> None:
    """Remember a session whose enqueue (`send(session_pk)`) failed and keep trying it in the background."""
    global _relay
    every = settings.ADKWEB_ENQUEUE_RETRY_SECONDS
    if not every:
        return  # the sweeper alone delivers it
    with _lock:
        _owed[session_pk] = _owed.get(session_pk, 0) + 1
        if _relay is None or not _relay.is_alive():  # not alive: a forked child's copy of its parent's, one that died
            _relay = threading.Thread(target=_deliver, args=(every, send), name="adkweb-enqueue-relay", daemon=True)
            _relay.start()


def _deliver(every: float, send: Callable[[int], object]) -> None:
    global _relay
    while True:
        time.sleep(every)
        with _lock:
            pending = sorted(_owed.items())
            if not pending:
                # Gone from now on, for relay_owe: its thread is still alive until this returns, and a
                # refusal recorded meanwhile found it so and started none (owed, with nobody to send it).
                if _relay is threading.current_thread():
                    _relay = None
                return
        for session_pk, refused in pending:
            try:
                send(session_pk)
            except Exception:
                break  # still down: try again later
            with _lock:
                if _owed.get(session_pk) == refused:  # else refused again meanwhile: sent again
                    del _owed[session_pk]
            logger.info("Enqueued session %s after a broker outage.", session_pk)


class Consumer(CeleryConsumer):
    """Celery's consumer, reconnecting to the broker every second instead of backing off to 30 s."""

    def ensure_connected(self, conn: Any) -> Any:
        conn.ensure_connection = functools.partial(
            conn.ensure_connection, interval_start=0.5, interval_step=0.5, interval_max=1
        )
        return super().ensure_connected(conn)
