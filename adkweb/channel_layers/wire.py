"""The publish script's own connection (and the reader's pops', the group memberships': the Redis
layer's `_wired`): a bare RESP protocol on the event loop (no redis-py client).

Every batch of group messages (adkweb.channel_layers.publish) is one EVALSHA and its reply a few
integers. Through redis-py's asyncio client that round trip cost ~430 µs of CPU and ~1.2 ms of wall
time at load 6 (its connection pool's lock, retry and observability wrappers, `wait_for` timeouts,
the StreamReader and the RESP3 parser, `pack_command`), against ~125 µs and ~0.4 ms for the same
command written by an `asyncio.Protocol` (`Wire`) and its reply parsed in `data_received` (bench/README.md,
phase 16 (publish)); a stored event's publish is on the session store's append path.

One connection (`Wire`: adkweb.channel_layers.wire_protocol, imported back here) per event loop and
layer (`Wires`), opened on first use with the pool's own settings (host, port or unix socket, db,
username and password; TLS and anything else keeps redis-py's client: `Wires.usable`). Commands are
pipelined: replies come in the order the commands were written, each to its caller's future. A caller
cancelled while its reply is on its way does not shift the others' (its reply is read and dropped). A
reply that does not come within `timeout` seconds, or a connection the server closed, fails every
command waiting on it (redis-py's errors: the publishers log them, as before) and the next command
opens a new connection.
"""

from __future__ import annotations

import asyncio
import logging
import types
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .resp import pack  # tests import pack and Wire from here
from .wire_protocol import Wire

logger = logging.getLogger(__name__)


class Wires:
    """A layer's wires, one per event loop (a wire's transport belongs to the loop that opened it)."""

    def __init__(self, pool: Any, *, at_least: float = 0.0) -> None:
        """`at_least`: seconds a reply may take at the least (a blocking command's own timeout and some:
        the pool's socket_timeout, if shorter, would fail a pop that is just waiting)."""
        self.kwargs = dict(pool.connection_kwargs)
        if at_least:
            self.kwargs["socket_timeout"] = max(self.kwargs.get("socket_timeout") or 30.0, at_least)
        self.kind = pool.connection_class
        self._by_loop: dict[asyncio.AbstractEventLoop, Wire] = {}
        self._opening: dict[asyncio.AbstractEventLoop, asyncio.Future[Wire]] = {}

    @staticmethod
    def usable(pool: Any) -> bool:
        """Plain TCP or a unix socket (TLS and the rest keep redis-py's client)."""
        from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection

        kind = pool.connection_class
        return issubclass(kind, UnixDomainSocketConnection) or (
            issubclass(kind, Connection) and not issubclass(kind, SSLConnection)
        )

    async def call(self, *args: Any) -> Any:
        wire = await self._wire()
        return await wire.call(pack(*args))

    async def call_soon(self, *args: Any) -> asyncio.Future[Any]:
        """A command written now, before whatever this loop writes next; the future of its reply, not
        awaited (`drained()` waits for it with the rest)."""
        wire = await self._wire()
        return wire.call(pack(*args))

    async def call_all(self, *commands: tuple[Any, ...]) -> list[Any]:
        """Several commands written at once (pipelined, one round trip), their replies in order; an
        error reply raised (after all the replies are in, the others kept or dropped with it)."""
        wire = await self._wire()
        replies = [wire.call(pack(*command)) for command in commands]
        try:
            await asyncio.wait(replies)
        except asyncio.CancelledError:
            for reply in replies:
                reply.cancel()  # their replies read and dropped when they come
            raise
        return [reply.result() for reply in replies]

    async def blocking(self, *args: Any) -> Any:
        """A blocking command (BZMPOP) on this loop's connection, which carries nothing else: a caller
        cancelled while it waits closes the connection, so that the server's blocked command ends with
        it rather than popping into a reply nobody reads (what a reply already on its way carried is
        lost, as with redis-py, which closes its connection on a cancel there too)."""
        wire = await self._wire()
        try:
            return await wire.call(pack(*args))
        except asyncio.CancelledError:
            self.close_loop(asyncio.get_running_loop())
            raise

    async def run_script(self, sha: str, body: str, keys: list[Any], argv: list[Any], *, wait: bool = True) -> Any:
        """A script's reply: EVALSHA, or EVAL (the script whole) on a connection that has not run it
        yet (its server may not know it: a new connection after a restart). With `wait=False`, the
        future of its reply: written now, before whatever this loop writes next; not awaited. A
        NOSCRIPT reply (SCRIPT FLUSH since) sends the script again whole: awaited, at once; not
        awaited, after what was written meanwhile (logged)."""
        wire = await self._wire()
        known = sha in wire.scripts
        reply = wire.call(pack("EVALSHA" if known else "EVAL", sha if known else body, len(keys), *keys, *argv))
        if wait:
            try:
                result = await reply
            except NoScriptError:
                wire.scripts.discard(sha)
                return await self.run_script(sha, body, keys, argv)
            wire.scripts.add(sha)
            return result
        out: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def done(reply: asyncio.Future[Any]) -> None:
            if out.done():
                return
            if reply.cancelled():
                out.cancel()
            elif isinstance(reply.exception(), NoScriptError):
                wire.scripts.discard(sha)
                logger.warning("Redis lost the publish script: sent again whole, after what followed it.")
                again = asyncio.ensure_future(self.run_script(sha, body, keys, argv))
                again.add_done_callback(lambda again: _copy(again, out))
            else:
                if reply.exception() is None:
                    wire.scripts.add(sha)
                _copy(reply, out)

        reply.add_done_callback(done)
        return out

    async def drained(self) -> None:
        """Until the replies of what this loop wrote so far are in (not raising: the writers handle them)."""
        wire = self._by_loop.get(asyncio.get_running_loop())
        if wire is not None and wire.last is not None and not wire.last.done():
            await asyncio.wait([wire.last])

    async def _wire(self) -> Wire:
        loop = asyncio.get_running_loop()
        wire = self._by_loop.get(loop)
        if wire is not None and wire.lost is None and wire.transport is not None and not wire.transport.is_closing():
            return wire
        opening = self._opening.get(loop)
        if opening is None:
            opening = self._opening[loop] = loop.create_future()
            try:
                wire = await self._open(loop)
            except BaseException as exc:
                if isinstance(exc, Exception):
                    opening.set_exception(exc)
                    opening.exception()  # retrieved: those waiting get it, nobody else needs to
                else:
                    opening.cancel()
                raise
            else:
                opening.set_result(wire)
            finally:
                del self._opening[loop]
            if loop not in self._by_loop:
                _close_with(loop, self)
            self._by_loop[loop] = wire
            return wire
        return await asyncio.shield(opening)

    async def _open(self, loop: asyncio.AbstractEventLoop) -> Wire:
        kw = self.kwargs
        timeout = kw.get("socket_timeout") or 30.0
        connect_timeout = kw.get("socket_connect_timeout") or timeout
        try:
            async with asyncio.timeout(connect_timeout):
                if kw.get("path"):
                    _, wire = await loop.create_unix_connection(lambda: Wire(timeout), kw["path"])
                else:
                    _, wire = await loop.create_connection(
                        lambda: Wire(timeout), kw.get("host", "localhost"), kw.get("port", 6379)
                    )
        except TimeoutError:
            raise RedisTimeoutError("Timeout connecting to Redis.") from None
        except OSError as exc:
            raise RedisConnectionError(f"Error connecting to Redis: {exc}") from exc
        try:
            if kw.get("password") is not None:
                user = kw.get("username")
                await wire.call(pack("AUTH", *([user] if user else []), kw["password"]))
            if kw.get("db"):
                await wire.call(pack("SELECT", int(kw["db"])))
        except BaseException:
            wire.close()
            raise
        return wire

    def close_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        wire = self._by_loop.pop(loop, None)
        if wire is not None:
            wire.close()


def _copy(source: asyncio.Future[Any], target: asyncio.Future[Any]) -> None:
    if target.done():
        return
    if source.cancelled():
        target.cancel()
    elif source.exception() is not None:
        target.set_exception(source.exception())  # type: ignore[arg-type]
    else:
        target.set_result(source.result())


def _close_with(loop: asyncio.AbstractEventLoop, wires: Wires) -> None:
    """Close this loop's wire when the loop is closed (as channels_redis closes its pools), while the
    loop can still run the transport's close."""
    original = loop.close

    def close(self: asyncio.AbstractEventLoop) -> None:
        wires.close_loop(loop)
        if not loop.is_running() and not loop.is_closed() and asyncio._get_running_loop() is None:
            # The transport's close callbacks. Not from a thread running a loop of its own (a
            # finalizer the garbage collector runs there): the loop cannot run then; its close below
            # drops the transport's pending callbacks, and the socket is closed when it is collected.
            loop.run_until_complete(asyncio.sleep(0))
        self.close = original  # type: ignore[method-assign]
        self.close()

    loop.close = types.MethodType(close, loop)  # type: ignore[method-assign]
