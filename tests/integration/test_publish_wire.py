"""The publish script on a connection of its own (adkweb.channel_layers.wire; real Redis): a batch
leaves without redis-py's client and any channels_redis reader reads it; a script Redis does not know
is sent whole once; a connection the server ended costs the batch on it at most, the next one opens
a new connection. (The protocol itself, against a fake server: tests/adkweb/test_publish_wire.py.)"""

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


async def test_a_script_redis_does_not_know_is_sent_whole(receiver, monkeypatch):
    layer, channel = receiver
    sender = _layer()
    sent: list[str] = []
    wires_call = None

    async def recorded(*args):
        sent.append(args[0])
        return await wires_call(*args)

    await sender.group_send_many([], ["wire-a"])  # its wires made
    wires_call = sender._wires.call
    monkeypatch.setattr(sender._wires, "call", recorded)
    monkeypatch.setattr(publish, "SHA", "0" * 40)  # as after a restart or SCRIPT FLUSH: unknown
    assert await sender.group_send_many([("wire-a", _message(7))]) == {"wire-a": 1}
    assert sent == ["EVALSHA", "EVAL"]
    assert await _got(layer, channel) == [7]


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
