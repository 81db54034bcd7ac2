"""Embedded mode's broker: kombu's memory transport, woken by a publish instead of polling.

kombu's memory transport has no way to wait for a message: an idle consumer tries every queue and
sleeps `polling_interval` in a loop. At the 5 ms the embedded worker needed for quick turns, that
loop held the GIL ~200 times a second in the serving process, taking CPU from requests and turns
(18% of the embedded server's busy samples in bench/http_flow.py). Here a publish to any queue
notifies a condition that idle consumers wait on (as does an ack, which may let a consumer at its
prefetch limit take the next one): a message is taken as soon as it can be, and an idle worker
costs nothing. `polling_interval` remains the longest an idle consumer sleeps between
looks (a safety net: every put notifies).

Messages are still in this process's memory only (threads of one process), as with `memory://`.
"""

from __future__ import annotations

import threading
from queue import Empty
from time import monotonic
from typing import Any

from kombu.transport import memory

_changed = threading.Condition()
_generation = 0  # how many puts so far: a consumer waits only if none happened since it last looked


def _signal() -> None:
    global _generation
    with _changed:
        _generation += 1
        _changed.notify_all()


class Channel(memory.Channel):
    """Wakes idle consumers when a message is put, and when one is settled or the prefetch limit
    changes: a consumer at its limit (every worker thread busy) may take the next message then."""

    def _put(self, queue: str, message: Any, **kwargs: Any) -> None:
        super()._put(queue, message, **kwargs)
        _signal()

    def _put_fanout(self, exchange: str, message: Any, routing_key: str | None = None, **kwargs: Any) -> None:
        super()._put_fanout(exchange, message, routing_key, **kwargs)
        _signal()

    def basic_ack(self, delivery_tag: Any, multiple: bool = False) -> None:
        super().basic_ack(delivery_tag, multiple)
        _signal()

    def basic_reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        super().basic_reject(delivery_tag, requeue)
        _signal()

    def basic_recover(self, requeue: bool = False) -> None:
        super().basic_recover(requeue)
        _signal()

    def basic_qos(self, *args: Any, **kwargs: Any) -> None:
        super().basic_qos(*args, **kwargs)
        _signal()


class Transport(memory.Transport):
    Channel = Channel
    polling_interval = 1.0  # the longest an idle consumer sleeps between looks

    def drain_events(self, connection: Any, timeout: Any = None, **kwargs: Any) -> Any:
        cycle: Any = self.cycle
        start = monotonic()
        while True:
            with _changed:
                seen = _generation
            try:
                cycle.get(self._deliver, timeout=timeout)
                return
            except Empty:
                waited = monotonic() - start
                if timeout is not None and waited >= timeout:
                    raise TimeoutError() from None  # socket.timeout, as kombu raises it
                wait = float(self.polling_interval or 1.0)
                if timeout is not None:
                    wait = min(wait, timeout - waited)
                with _changed:
                    if _generation == seen:
                        _changed.wait(wait)
