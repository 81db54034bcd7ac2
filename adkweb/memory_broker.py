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

Background queues (`BACKGROUND`: notifications) hold their messages while work someone waits for
runs in this process (`foreground()`: an HTTP request, adkweb.handler; a drain of turns,
agents_app.runner) and for `QUIET` seconds after, at most `MOST` seconds. Every thread of the
process shares one GIL: a ticket's emails taken up while the turn that opened the ticket still ran
(~10 ms of CPU for three deciders) took that CPU from the turn and from the `/run` waiting for it
(bench/README.md, phase 14 (embedded)). They go out once the process has had nothing to run for a
moment (the email some ms later); under steady load after `MOST` seconds anyway, all that is held
then. Only where this transport is the broker: a services-mode worker's queues are Redis's, and
its `foreground()` marks change nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from queue import Empty
from time import monotonic
from typing import Any

from kombu.transport import memory

_changed = threading.Condition()
_generation = 0  # how many puts so far: a consumer waits only if none happened since it last looked

BACKGROUND = frozenset({"notifications"})  # queues that wait for the process to be free (settings' routes)
# Seconds with no foreground work before a background queue's messages go: a client's next request
# (an answer to the ticket the last one opened) usually comes within it.
QUIET = 0.05
MOST = 5.0  # the longest a background queue holds its messages (well inside the sweepers' grace)
_fore = threading.Lock()
_running = 0  # foreground work running now
_ended = float("-inf")  # when the last one ended (monotonic)
_held_since: dict[str, float] = {}  # background queue -> since when its messages are held


@contextmanager
def foreground() -> Iterator[None]:
    """Mark work someone waits for (a request, a turn) as running in this process: background
    queues hold their messages until QUIET seconds after the last such work ends (at most MOST)."""
    global _running, _ended
    with _fore:
        _running += 1
    try:
        yield
    finally:
        with _fore:
            _running -= 1
            _ended = monotonic()


def _quiet_in() -> float:
    """Seconds until the process has had no foreground work for QUIET seconds (0: it has now)."""
    with _fore:
        return QUIET if _running else max(0.0, _ended + QUIET - monotonic())


def hold_left(since: float, quiet_in: float | None = None) -> float:
    """How long work waiting since `since` (monotonic) is still held from now (0: it goes): until the
    process has had no foreground work for QUIET seconds (`quiet_in`: `_quiet_in()`, read now unless
    given), at most MOST after `since`. The rule of the background queues (`_hold`) and of
    adkweb.quiet_work's thread, each keeping its own `since`."""
    wait = _quiet_in() if quiet_in is None else quiet_in
    left = since + MOST - monotonic()
    return min(wait, left) if wait and left > 0 else 0.0


def _hold(queue: str, size: int) -> float:
    """How long the background `queue`, holding `size` messages, holds them from now (0: they go)."""
    wait = _quiet_in()
    if not size or not wait:
        _held_since.pop(queue, None)
        return 0.0
    # Past MOST the held ones go, until the queue is empty (its `since` kept until then).
    return hold_left(_held_since.setdefault(queue, monotonic()), wait)


def _held_for() -> float | None:
    """The shortest time a background queue still holds its messages (None: none holds any)."""
    waits = [_hold(queue, 1) for queue in list(_held_since)]
    return min(waits) if waits else None


def _signal() -> None:
    global _generation
    with _changed:
        _generation += 1
        _changed.notify_all()


class Channel(memory.Channel):
    """Wakes idle consumers when a message is put, and when one is settled or the prefetch limit
    changes: a consumer at its limit (every worker thread busy) may take the next message then.
    A background queue gives nothing while it holds its messages (`_hold`)."""

    def _get(self, queue: str, timeout: Any = None) -> Any:
        if queue in BACKGROUND and _hold(queue, self._size(queue)):
            raise Empty()
        return super()._get(queue, timeout)

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

    @property
    def default_connection_params(self) -> dict[str, Any]:
        # No host to default to (kombu's virtual transports say 'localhost', and warn on every connection
        # of the memory:// URL that it "reverted" to it: twice in `make run`'s first seconds).
        return {"port": None, "hostname": None}

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
                held = _held_for()  # nothing wakes a consumer when a hold ends: look again then
                if held is not None:
                    wait = min(wait, max(held, 0.001))
                if timeout is not None:
                    wait = min(wait, timeout - waited)
                with _changed:
                    if _generation == seen:
                        _changed.wait(wait)
