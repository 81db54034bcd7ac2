"""A cancel is never lost in the Redis channel layer's commands (real Redis).

redis-py writes each command through `asyncio.wait_for` when a socket timeout is set (ours: 30 s),
and Python 3.11's `wait_for` drops a cancel that lands after the write finished but before its
caller resumed. The layer's reader, cancelled there at the end of a request's event loop, went on
popping and `asyncio.run` waited for it for ever (test_sweeps_postgres hung). Each test lands the
cancel exactly there, by cancelling from inside the write."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.conf import settings
from redis.asyncio.connection import Connection

from adkweb.channel_layers import RedisChannelLayer
from adkweb.channel_layers.wire import Wire, Wires


def _layer() -> RedisChannelLayer:
    return RedisChannelLayer(
        hosts=[{"address": settings.REDIS_URL, "socket_timeout": 30}], prefix=f"cancel-test-{uuid.uuid4().hex[:8]}"
    )


def test_a_cancel_landing_as_a_command_is_written_is_delivered(monkeypatch):
    layer = _layer()
    victim: list[asyncio.Task] = []
    write = Connection._send_packed_command

    async def write_then_cancel(self, command):
        await write(self, command)
        victim[0].cancel()  # the write is done; the caller has not resumed yet

    async def main() -> tuple[bool, object]:
        client = layer.connection(0)
        await client.ping()  # connected before the hook
        monkeypatch.setattr(Connection, "_send_packed_command", write_then_cancel)
        task = asyncio.create_task(client.ping())
        victim.append(task)
        done, _ = await asyncio.wait({task}, timeout=10)
        monkeypatch.undo()
        assert await layer.connection(0).ping()  # the pool still serves commands
        return task.cancelled(), None if task.cancelled() or task not in done else task.result()

    cancelled, result = asyncio.run(main())
    assert cancelled, f"the cancelled PING returned {result!r} instead of raising CancelledError"


def test_a_reader_cancelled_as_it_sends_its_next_pop_stops_at_once(monkeypatch):
    """The end of a request's loop, in slow motion: the reader has handed a message over and sends
    its next pop (a 5 s BZMPOP) when the loop's cancel comes. It stops then, not when that pop
    returns (nor never, before the layer's guard). Through redis-py (a layer whose connections the
    bare protocol does not serve, e.g. TLS: the reader's pops go through redis-py's client there)."""
    monkeypatch.setattr(Wires, "usable", staticmethod(lambda pool: False))
    layer = _layer()
    pops = 0
    write = Connection._send_packed_command

    async def write_then_cancel_the_reader(self, command):
        nonlocal pops
        await write(self, command)
        if any(b"BZMPOP" in part for part in command):
            pops += 1
            if pops == 2:  # the pop after the message's
                layer._reader.cancel()

    _assert_the_reader_stops(
        layer,
        lambda: monkeypatch.setattr(Connection, "_send_packed_command", write_then_cancel_the_reader),
        monkeypatch,
    )
    assert pops >= 2


def test_a_reader_on_its_own_connection_cancelled_as_it_sends_its_next_pop_stops_at_once(monkeypatch):
    """The same end of a loop where the reader pops on a connection of its own (adkweb.channel_layers.wire)."""
    layer = _layer()
    pops = 0
    call = Wire.call

    def call_then_cancel_the_reader(self, packed):
        nonlocal pops
        reply = call(self, packed)
        if b"BZMPOP" in packed:
            pops += 1
            if pops == 2:  # the pop after the message's, written
                layer._reader.cancel()
        return reply

    _assert_the_reader_stops(layer, lambda: monkeypatch.setattr(Wire, "call", call_then_cancel_the_reader), monkeypatch)
    assert pops >= 2


def test_a_message_sent_after_a_waiting_pop_was_cancelled_reaches_the_next_receive():
    """A receive cancelled while the reader's pop waits in Redis (nobody else receives: the reader is
    cancelled) closes the pop's connection, so the server's blocked BZMPOP ends with it: a message sent
    afterwards stays in Redis for the next receive, not popped into a reply nobody reads."""
    layer = _layer()

    async def main() -> dict:
        channel = await layer.new_channel()
        waiting = asyncio.create_task(layer.receive(channel))
        await asyncio.sleep(0.3)  # the reader's pop is blocked in Redis
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await asyncio.sleep(0.1)
        other = _layer()
        other.prefix = layer.prefix  # another process's layer: through Redis
        await other.send(channel, {"type": "after"})
        await asyncio.sleep(0.3)  # a pop still blocked in Redis would have taken it by now
        async with asyncio.timeout(3):  # under the pop's 5 s: a lost message would still be waited for
            return await layer.receive(channel)

    assert asyncio.run(main())["type"] == "after"


@pytest.fixture(autouse=True)
def _redis_keys_of_these_tests():
    yield
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    for key in client.scan_iter("cancel-test-*"):
        client.delete(key)


def _assert_the_reader_stops(layer: Any, patch: Callable[[], None], monkeypatch: pytest.MonkeyPatch) -> None:
    """A message received, then `patch` (which cancels the reader as it writes its next pop): the
    reader's task ends cancelled within 4 s, under the pop's own 5 s timeout."""

    async def main() -> tuple[bool, float]:
        channel = await layer.new_channel()
        await layer.send(channel, {"type": "hello"})
        patch()
        assert (await layer.receive(channel))["type"] == "hello"
        reader = layer._reader
        assert reader is not None
        started = time.monotonic()
        done, _ = await asyncio.wait({reader}, timeout=4)  # under the pop's 5 s
        monkeypatch.undo()
        if not done:
            reader.cancel()
        return reader in done and reader.cancelled(), time.monotonic() - started

    stopped, waited = asyncio.run(asyncio.wait_for(main(), 30))
    assert stopped, f"the cancelled reader was still popping after {waited:.1f} s"
