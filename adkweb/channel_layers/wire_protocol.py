"""One connection of adkweb.channel_layers.wire's (`Wire`): an `asyncio.Protocol` that writes RESP
commands at once and hands the replies, parsed in `data_received`, to their callers' futures in the
order the commands were written; one time-out timer for the oldest waiting reply; a reply that does not
come in time, one it cannot read, or a connection the server closed fails every command waiting on it
(redis-py's errors). Split out of adkweb.channel_layers.wire, which opens one per event loop (`Wires`)
and imports it back (tests read and patch `Wire` there: the same class).
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .resp import _Incomplete, _parse


class Wire(asyncio.Protocol):
    """One connection: commands written at once, replies handed to their futures in order."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.transport: asyncio.Transport | None = None
        self.lost: BaseException | None = None
        self.scripts: set[str] = set()  # SHA1s of the scripts run on this connection (so known to its server)
        self.last: asyncio.Future[Any] | None = None  # the reply written for last
        self._waiting: deque[tuple[asyncio.Future[Any], float]] = deque()  # and when each times out
        self._timer: asyncio.TimerHandle | None = None  # armed for the oldest waiting reply's time-out
        self._buf = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        pos = 0
        try:
            while pos < len(buf):
                value, pos = _parse(buf, pos)
                if not self._waiting:
                    raise RedisConnectionError("A reply from Redis that no command waits for.")
                waiter, _ = self._waiting.popleft()
                if not waiter.done():  # else its caller was cancelled (or timed out): dropped
                    if isinstance(value, BaseException):
                        waiter.set_exception(value)
                    else:
                        waiter.set_result(value)
        except _Incomplete:
            pass
        except Exception as exc:  # a reply we cannot read: the connection cannot be trusted any more
            self._fail(exc)
            return
        del buf[:pos]

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc or RedisConnectionError("Connection closed by server."))

    def _fail(self, exc: BaseException) -> None:
        if self.lost is None:
            self.lost = exc
        while self._waiting:
            waiter, _ = self._waiting.popleft()
            if not waiter.done():
                waiter.set_exception(
                    exc if isinstance(exc, RedisConnectionError | RedisTimeoutError) else RedisConnectionError(str(exc))
                )
        if self.transport is not None:
            self.transport.abort()

    def call(self, packed: bytes) -> asyncio.Future[Any]:
        """Write a command; the future of its reply (an error reply is raised from it)."""
        if self.lost is not None or self.transport is None or self.transport.is_closing():
            raise RedisConnectionError("Connection to Redis lost.")
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        deadline = loop.time() + self.timeout
        self._waiting.append((waiter, deadline))
        self.last = waiter
        self.transport.write(packed)
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._check)
        return waiter

    def _check(self) -> None:
        """The oldest waiting reply's time-out: replies come in order, so while it has time, the ones
        after it have too. One timer a connection, not one a command (a batch's round trip paid for
        its own timer's handle, its heap push and its cancel's callback)."""
        self._timer = None
        if not self._waiting:
            return  # armed again by the next command
        deadline = self._waiting[0][1]
        loop = asyncio.get_running_loop()
        if loop.time() >= deadline:
            self._fail(RedisTimeoutError("Timeout reading from Redis."))
        else:
            self._timer = loop.call_at(deadline, self._check)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
