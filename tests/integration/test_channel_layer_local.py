"""The Redis channel layer's shortcuts (real Redis): a message for a channel this process is receiving
on stays in the process, and a process's group membership is written in one round trip. A `/run`
request's watch of its session uses both (agents_app.api.watch)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import redis
from asgiref.sync import sync_to_async
from channels.exceptions import ChannelFull
from django.conf import settings

from adkweb.channel_layers import RedisChannelLayer

GROUP = "layer-local"
PREFIX = f"local-test-{uuid.uuid4().hex[:8]}"  # this run's keys; layers are processes sharing them


def _layer(**kwargs) -> RedisChannelLayer:
    return RedisChannelLayer(hosts=[{"address": settings.REDIS_URL, "socket_timeout": 30}], prefix=PREFIX, **kwargs)


def _recorded(layer: RedisChannelLayer) -> list[str]:
    """The commands the layer's Redis client sends from now on (one host: one client per loop), and
    its publish script's, sent on a connection of their own (adkweb.channel_layers.wire): one EVALSHA
    each (an EVAL after it when Redis did not know the script)."""
    client = layer.connection(0)
    commands: list[str] = []
    execute, run_script = client.execute_command, layer._run_script

    async def recorded(*args, **kwargs):
        commands.append(str(args[0]).upper())
        return await execute(*args, **kwargs)

    async def script_recorded(*args, **kwargs):
        commands.append("EVALSHA")
        return await run_script(*args, **kwargs)

    client.execute_command = recorded
    layer._run_script = script_recorded
    _record_own_connections(layer, commands)
    return commands


def _record_own_connections(layer: RedisChannelLayer, commands: list[str]) -> None:
    """The commands of the layer's other own connections (the reader's pops, the memberships: its
    `_wired`) into `commands` too."""
    wired = layer._wired

    def recorded(name: str, at_least: float = 0.0):
        wires = wired(name, at_least=at_least)
        if wires is not None and "blocking" not in vars(wires):  # its methods wrapped once
            blocking, call_all = wires.blocking, wires.call_all

            async def blocking_recorded(*args):
                commands.append(str(args[0]).upper())
                return await blocking(*args)

            async def call_all_recorded(*sent):
                commands.extend(str(command[0]).upper() for command in sent)
                return await call_all(*sent)

            wires.blocking, wires.call_all = blocking_recorded, call_all_recorded
        return wires

    layer._wired = recorded


async def _receiving(layer: RedisChannelLayer, channel: str) -> asyncio.Task:
    task = asyncio.create_task(layer.receive(channel))
    await asyncio.sleep(0.05)  # the receive waits on the channel's queue
    return task


async def test_a_message_for_a_channel_this_process_receives_on_stays_in_the_process():
    layer, other = _layer(), _layer()
    channel = await layer.new_channel()
    waiting = await _receiving(layer, channel)
    commands = _recorded(layer)
    sent = {"type": "test.message", "n": [1]}
    await layer.send(channel, sent)
    got = await asyncio.wait_for(waiting, 5)
    assert got == sent and got is not sent  # its own copy, as through Redis
    assert commands == []  # not one round trip (channels_redis's send made four, and a pop)
    # Another process's send to it goes through Redis and arrives all the same.
    await other.send(channel, {"type": "test.message", "n": 2})
    assert (await asyncio.wait_for(layer.receive(channel), 5))["n"] == 2


async def test_a_message_before_anyone_receives_goes_through_redis():
    """Nothing receives on the channel yet (as /readyz checks Redis): the message goes to Redis and
    the first receive gets it from there."""
    layer = _layer()
    channel = await layer.new_channel()
    commands = _recorded(layer)
    await layer.send(channel, {"type": "readyz.ping"})
    assert "EVAL" in commands or "ZADD" in commands, commands
    assert (await asyncio.wait_for(layer.receive(channel), 5))["type"] == "readyz.ping"


async def test_a_full_local_channel_refuses_as_redis_does():
    layer = _layer(capacity=2)
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "first"})  # through Redis (nobody receives yet)
    first = await asyncio.wait_for(layer.receive(channel), 5)  # now the channel is received here
    assert first["type"] == "first"
    await layer.send(channel, {"type": "a"})
    await layer.send(channel, {"type": "b"})
    with pytest.raises(ChannelFull):
        await layer.send(channel, {"type": "c"})
    assert [(await layer.receive(channel))["type"] for _ in range(2)] == ["a", "b"]


def _group_in_redis(layer: RedisChannelLayer, group: str) -> tuple[list[bytes], int]:
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        key = layer._group_key(group)
        return client.zrange(key, 0, -1), client.ttl(key)
    finally:
        client.close()


async def test_the_process_joins_a_group_in_one_round_trip_with_its_expiry():
    layer, sender = _layer(), _layer()
    channel = await layer.new_channel()
    commands = _recorded(layer)
    await layer.group_add(GROUP, channel)
    try:
        assert commands == ["ZADD", "EXPIRE"]  # written together on the layer's own connection (Wires.call_all)
        members, ttl = await sync_to_async(_group_in_redis)(layer, GROUP)
        assert members == [layer._member_of[GROUP].encode()] and 0 < ttl <= layer.group_expiry
        await sender.group_send(GROUP, {"type": "test.message", "n": 1})
        assert (await asyncio.wait_for(layer.receive(channel), 5))["n"] == 1
    finally:
        await layer.group_discard(GROUP, channel)
    assert (await sync_to_async(_group_in_redis)(layer, GROUP))[0] == []


async def test_a_run_watch_stops_without_redis_and_leaves_its_group(monkeypatch):
    """TurnWatch (the /run request's membership of its session's group) ends its pump with a message
    to its own channel: kept in the process; the pump leaves the group in Redis."""
    from agents_app.api import watch as watch_module
    from agents_app.events import session_group

    layer = _layer()
    monkeypatch.setattr(watch_module, "get_channel_layer", lambda: layer)
    watch = await watch_module.TurnWatch(987654).start()
    assert (await sync_to_async(_group_in_redis)(layer, session_group(987654)))[0] != []
    await asyncio.sleep(0.05)
    commands = _recorded(layer)
    await watch.stop()
    assert watch.task is not None and watch.task.done()
    assert "EVAL" not in commands and "ZADD" not in commands, commands  # the stop stayed here
    assert (await sync_to_async(_group_in_redis)(layer, session_group(987654)))[0] == []
