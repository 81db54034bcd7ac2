"""Work that waits for this process to be free, run on a thread of its own, without the broker.

Embedded mode's broker holds its background queues' messages (notifications) until the process has had
no foreground work for `memory_broker.QUIET` seconds, at most `memory_broker.MOST` (adkweb.memory_broker).
A message there costs the process ~0.9 ms of CPU more than the work itself (bench/README.md, phase 25
(embedded)): Celery's send (in the caller's thread: for a ticket's outbox row, the turn's append, before
its event reaches the `/run` waiting for it), the consumer's take, the pool's trace and ack. Both live in
this process's memory only, so running the work here loses nothing a message would keep: work that must
survive the process is recorded before it is handed over (an outbox row stays owed until its work is
done; the sweeper sends what a dead process left), as it is before a message is sent.

`when_quiet(fn, *args)` runs `fn(*args)` on the process's `adkweb-quiet` thread once the process is free by
the same rule (`memory_broker.hold_left`: held at most MOST from the first work waiting), each in the
order given; an error is logged and the next one runs. The thread's database connections go back after
each batch (a pool's), except SQLite's (kept, as the request threads keep theirs).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from time import monotonic
from typing import Any

from adkweb import memory_broker
from adkweb.per_process import PerProcess

logger = logging.getLogger(__name__)


class _Runner:
    def __init__(self) -> None:
        self.jobs: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self.changed = threading.Condition()
        self.since: float | None = None  # when the oldest waiting job came
        threading.Thread(target=self.serve, name="adkweb-quiet", daemon=True).start()

    def submit(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        with self.changed:
            self.jobs.append((fn, args))
            if self.since is None:
                self.since = monotonic()
            self.changed.notify()

    def serve(self) -> None:
        while True:
            with self.changed:
                while not self.jobs:
                    self.changed.wait()
                since = self.since if self.since is not None else monotonic()
            while wait := memory_broker.hold_left(since):
                threading.Event().wait(wait)  # nothing wakes this when the process turns quiet
            with self.changed:
                batch, self.jobs, self.since = self.jobs, deque(), None
            for fn, args in batch:
                try:
                    fn(*args)
                except Exception:
                    logger.exception("Quiet work %s%s failed; what it owes stays owed for the sweeper.", fn, args)
            _connections_back()


def _connections_back() -> None:
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        if conn.vendor != "sqlite":
            conn.close()


_runner = PerProcess(_Runner)


def when_quiet(fn: Callable[..., Any], *args: Any) -> None:
    """Run `fn(*args)` on this process's quiet thread once the process is free (see the module's doc)."""
    _runner.get().submit(fn, args)
