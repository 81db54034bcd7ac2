"""The publish script on a connection of its own (adkweb.channel_layers.wire; real Redis): a batch
leaves without redis-py's client and any channels_redis reader reads it; the script is sent whole on a
new connection and when Redis lost it; a batch that asks nothing is not waited for (`abatched()`'s
end), and what must come after it waits for its reply (`publishes_sent`); a connection the server
ended costs the batch on it at most, the next one opens a new connection. (The protocol itself,
against a fake server: tests/adkweb/test_publish_wire.py.)"""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio
from django.conf import settings

from adkweb.channel_layers import publish

from .test_channel_layer_local import _layer
from .test_fanout_processes import _got


def _message(n: int) -> dict:
    return {"type": "test.message", "n": n}


@pytest.fixture
async def receiver():
    layer = _layer()
    channel = await layer.new_channel()
    await layer.group_add("wire-a", channel)
    yield layer, channel
    await layer.group_discard("wire-a", channel)


async def test_a_batch_leaves_on_its_own_connection_not_through_redis_pys_client(receiver):
    layer, channel = receiver
    sender = _layer()
    client = sender.connection(0)

    async def refused(*args, **kwargs):
        raise AssertionError(f"sent through redis-py's client: {args[:1]}")

    client.execute_command = refused
    counts = await sender.group_send_many([("wire-a", _message(n)) for n in range(3)], ["wire-none"])
    assert counts == {"wire-a": 1, "wire-none": 0}
    assert await _got(layer, channel) == [0, 1, 2]


def _commands(wire) -> list[bytes]:
    """The names of the commands written on this wire from now on."""
    names: list[bytes] = []
    call = wire.call

    def recorded(packed: bytes):
        names.append(packed.split(b"\r\n")[2])
        return call(packed)

    wire.call = recorded
    return names


async def test_a_script_is_sent_whole_on_a_new_connection_and_again_when_redis_lost_it(receiver, monkeypatch):
    layer, channel = receiver
    sender = _layer()
    await sender.group_send_many([], ["wire-a"])  # its wire opened
    wire = sender._wires._by_loop[asyncio.get_running_loop()]
    assert publish.SHA in wire.scripts
    sent = _commands(wire)
    assert await sender.group_send_many([("wire-a", _message(6))]) == {"wire-a": 1}
    monkeypatch.setattr(publish, "SHA", "0" * 40)  # known to this connection, not to Redis (SCRIPT FLUSH)
    wire.scripts.add(publish.SHA)
    assert await sender.group_send_many([("wire-a", _message(7))]) == {"wire-a": 1}
    await sender.group_send_soon([("wire-a", _message(8))], lambda reply: None)
    await sender.sent()
    await asyncio.sleep(0.1)  # the no-wait batch's NOSCRIPT: sent again whole
    assert sent == [b"EVALSHA", b"EVALSHA", b"EVAL", b"EVALSHA", b"EVAL"]
    assert await _got(layer, channel) == [6, 7, 8]


async def test_a_batch_that_asks_nothing_is_written_and_its_reply_read_later(receiver):
    layer, channel = receiver
    sender = _layer()
    await sender.group_send_many([], ["wire-a"])  # its wire opened
    wire = sender._wires._by_loop[asyncio.get_running_loop()]
    replies: list = []
    await sender.group_send_soon([("wire-a", _message(1))], replies.append)
    assert replies == [] and not wire.last.done()  # on its way: not waited for
    await sender.group_send_soon([("wire-a", _message(2))], replies.append)
    await sender.sent()
    assert replies == [{"wire-a": 1}, {"wire-a": 1}]
    assert await _got(layer, channel) == [1, 2]


async def test_a_batch_ends_without_waiting_and_publishes_sent_waits_for_its_reply(receiver, monkeypatch):
    from channels.layers import channel_layers

    from adkweb import live
    from agents_app.publish_order import publishes_sent

    layer, channel = receiver
    sender = _layer()
    monkeypatch.setitem(channel_layers.backends, "default", sender)
    await sender.group_send_many([], ["wire-a"])  # its wire opened
    wire = sender._wires._by_loop[asyncio.get_running_loop()]
    async with live.abatched():
        await live.agroup_send("wire-a", _message(3))
    assert not wire.last.done()  # the batch's sends are on the wire, the reply not read yet
    await publishes_sent()  # before a publish from another connection (sync code's)
    assert wire.last.done()
    assert await _got(layer, channel) == [3]


async def test_a_connection_the_server_ended_is_replaced_by_the_next_batch(receiver):
    layer, channel = receiver
    sender = _layer()
    await sender.group_send_many([("wire-a", _message(1))])
    wire_id = await sender._wires.call("CLIENT", "ID")
    admin = redis.asyncio.Redis.from_url(settings.REDIS_URL)
    try:
        assert await admin.client_kill_filter(_id=wire_id) == 1
    finally:
        await admin.aclose()
    await asyncio.sleep(0.2)  # the close reaches this loop
    assert await sender.group_send_many([("wire-a", _message(2))]) == {"wire-a": 1}
    assert await sender._wires.call("CLIENT", "ID") != wire_id
    assert await _got(layer, channel) == [1, 2]
