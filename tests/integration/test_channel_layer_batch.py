"""The Redis channel layer's batches (real Redis): a publisher's group messages leave in one round
trip (adkweb.channel_layers.publish) and a process's reader takes what waits for it in one pop
(`RedisChannelLayer._read`), each channel's messages in the order they were sent, expired messages
and memberships dropped as channels_redis drops them."""

from __future__ import annotations

import asyncio
import time

import channels_redis.core
import pytest
import redis
from django.conf import settings

from adkweb.channel_layers import RedisChannelLayer

from .test_channel_layer_local import PREFIX, _layer, _recorded
from .test_fanout_processes import _got


def _message(n: int, **extra) -> dict:
    return {"type": "test.message", "n": n, **extra}


async def _members_of(layer: RedisChannelLayer, groups: dict[str, int]) -> dict[str, list[str]]:
    """Channels of `layer` joined to each group, as many as asked."""
    joined: dict[str, list[str]] = {}
    for group, count in groups.items():
        joined[group] = [await layer.new_channel() for _ in range(count)]
        for name in joined[group]:
            await layer.group_add(group, name)
    return joined


async def _leave(layer: RedisChannelLayer, joined: dict[str, list[str]]) -> None:
    for group, names in joined.items():
        for name in names:
            await layer.group_discard(group, name)


async def test_a_batch_goes_in_one_round_trip_each_group_in_order_with_its_watchers_counted():
    receiver, other, sender = _layer(), _layer(), _layer()
    joined = await _members_of(receiver, {"batch-a": 3, "batch-b": 2})
    theirs = await _members_of(other, {"batch-a": 1})
    try:
        await sender.group_send_many([], ["batch-a"])  # the script loaded once (EVALSHA, then SCRIPT LOAD)
        commands = _recorded(sender)
        pairs = [("batch-a", _message(0)), ("batch-b", _message(1)), ("batch-a", _message(2))]
        pairs += [("batch-b", _message(3, big="x" * 5000)), ("batch-a", _message(4, none=None, empty={}))]
        counts = await sender.group_send_many(pairs, ["batch-none"])
        assert commands == ["EVALSHA"]  # channels_redis: 4 round trips per message, and a ZCARD to ask
        assert counts == {"batch-a": 2, "batch-b": 1, "batch-none": 0}  # one member per process
        for name in joined["batch-a"]:
            assert await _got(receiver, name) == [0, 2, 4]
        for name in joined["batch-b"]:
            assert await _got(receiver, name) == [1, 3]
        assert await _got(other, theirs["batch-a"][0]) == [0, 2, 4]
    finally:
        del sender.connection(0).execute_command
        await _leave(receiver, joined)
        await _leave(other, theirs)


async def test_a_batch_is_stored_as_channels_redis_stores_a_group_send():
    """Any channels_redis reader reads it: here channels_redis's own layer, on a channel that joined the
    group through it (a channel of another kind of process), and a general channel (no `!`)."""
    stock = channels_redis.core.RedisChannelLayer(
        hosts=[{"address": settings.REDIS_URL, "socket_timeout": 30}], prefix=PREFIX
    )
    sender = _layer()
    specific = await stock.new_channel()
    general = f"general-{time.monotonic_ns()}"
    for name in (specific, general):
        await stock.group_add("batch-stock", name)
    try:
        await sender.group_send_many([("batch-stock", _message(n, html="é<b>", data=None)) for n in range(3)])
        for name in (specific, general):
            got = [await asyncio.wait_for(stock.receive(name), 5) for _ in range(3)]
            assert got == [_message(n, html="é<b>", data=None) for n in range(3)], name
    finally:
        for name in (specific, general):
            await stock.group_discard("batch-stock", name)


async def test_one_message_to_several_groups_is_packed_once_and_every_copy_arrives(monkeypatch):
    """The same message to three groups (a fragment for each audience; a status for a conversation and
    the list) is packed once for the batch, and each group's copy is stored as channels_redis's own
    `group_send` stores it, with a random prefix of its own: a channels_redis channel in two of the
    groups gets two copies (a shared prefix made them one member of its sorted set: one lost)."""
    stock = channels_redis.core.RedisChannelLayer(
        hosts=[{"address": settings.REDIS_URL, "socket_timeout": 30}], prefix=PREFIX
    )
    receiver, sender = _layer(), _layer()
    general = f"general-{time.monotonic_ns()}"
    for group in ("batch-each-1", "batch-each-2"):
        await stock.group_add(group, general)
    joined = await _members_of(receiver, {"batch-each-1": 1, "batch-each-2": 1, "batch-each-3": 2})
    packed = []
    stored_form = sender._stored_form
    monkeypatch.setattr(sender, "_stored_form", lambda message: packed.append(message) or stored_form(message))
    shared = _message(0, html="é<b>", data=None)
    other = _message(1)
    try:
        pairs = [(g, shared) for g in ("batch-each-1", "batch-each-2", "batch-each-3")] + [("batch-each-1", other)]
        await sender.group_send_many(pairs)
        assert packed == [shared, other]  # once each: four before, one per pair
        key = f"{PREFIX}{general}"
        client = redis.Redis.from_url(settings.REDIS_URL)
        try:
            members = client.zrange(key, 0, -1)
        finally:
            client.close()
        assert len(members) == 3 and len({m[:12] for m in members}) == 3
        expected = [{**shared, "__asgi_channel__": [general]}] * 2 + [{**other, "__asgi_channel__": [general]}]
        assert [m[12:] for m in members] == [stock.serialize(m)[12:] for m in expected]  # channels_redis's bytes
        assert [await asyncio.wait_for(stock.receive(general), 5) for _ in range(3)] == [shared, shared, other]
        assert await _got(receiver, joined["batch-each-1"][0]) == [0, 1]
        assert await _got(receiver, joined["batch-each-2"][0]) == [0]
        assert [await _got(receiver, name) for name in joined["batch-each-3"]] == [[0], [0]]
    finally:
        for group in ("batch-each-1", "batch-each-2"):
            await stock.group_discard(group, general)
        await _leave(receiver, joined)


async def test_a_group_name_is_checked_once_and_a_bad_one_refused(monkeypatch):
    sender = _layer()
    checked, check = [], sender.require_valid_group_name
    monkeypatch.setattr(sender, "require_valid_group_name", lambda name: checked.append(name) or check(name))
    for n in range(3):
        await sender.group_send_many([("batch-checked", _message(n))], ["batch-checked-2"])
    assert checked == ["batch-checked", "batch-checked-2"]  # once each, not at every batch
    with pytest.raises(TypeError):
        await sender.group_send_many([("a bad name!", _message(3))])


async def test_a_batchs_scores_are_in_seconds_a_microsecond_apart_and_later_than_the_last_batchs():
    receiver, sender = _layer(), _layer()
    joined = await _members_of(receiver, {"batch-scores": 1})
    try:
        before = time.time()
        await sender.group_send_many([("batch-scores", _message(n)) for n in range(3)])
        await sender.group_send_many([("batch-scores", _message(3))])
        client = redis.Redis.from_url(settings.REDIS_URL)
        try:
            key = f"{PREFIX}{joined['batch-scores'][0].partition('!')[0]}!"
            scores = [score for _, score in client.zrange(key, 0, -1, withscores=True)]
        finally:
            client.close()
        assert len(scores) == 4 and before - 1 < scores[0] < time.time() + 1
        assert [round((b - a) * 1e6) for a, b in zip(scores, scores[1:], strict=False)][:2] == [1, 1]
        assert scores == sorted(set(scores))
        assert await _got(receiver, joined["batch-scores"][0]) == [0, 1, 2, 3]
    finally:
        await _leave(receiver, joined)


async def test_expired_messages_and_memberships_are_dropped_by_a_batch_as_by_a_group_send():
    receiver, patient, sender = _layer(), _layer(), _layer(expiry=1)
    joined = await _members_of(receiver, {"batch-expiry": 1})
    name = joined["batch-expiry"][0]
    try:
        # Nobody receives yet: it waits in Redis (the key kept for 60 s, `patient`'s expiry).
        await patient.group_send_many([("batch-expiry", _message(0))])
        await asyncio.sleep(2.2)
        await sender.group_send_many([("batch-expiry", _message(1))])
        assert await _got(receiver, name) == [1]  # the first is older than this sender's expiry: dropped
        # The process's membership in Redis is older than this sender's group_expiry: dropped, not sent to.
        strict = _layer(group_expiry=1)
        assert await strict.group_send_many([("batch-expiry", _message(2))]) == {"batch-expiry": 0}
        assert await _got(receiver, name) == []
        assert await sender.group_send_many([], ["batch-expiry"]) == {"batch-expiry": 0}  # gone from Redis
    finally:
        await _leave(receiver, joined)


async def test_the_reader_takes_a_burst_in_one_pop_each_channel_in_order():
    """What waits for a process is taken in one BZMPOP (channels_redis took four round trips per
    message, BZPOPMIN one), then handed out in the order popped: each channel's messages in the
    order they were sent, direct sends and group messages alike."""
    layer, sender = _layer(), _layer()
    joined = await _members_of(layer, {"burst-a": 2, "burst-b": 2})
    lone = await layer.new_channel()
    expected: dict[str, list[int]] = {name: [] for names in joined.values() for name in names}
    expected[lone] = []
    try:
        for n in range(30):  # sent before anyone receives: all of it waits in Redis
            if n % 5 == 4:
                await sender.send(lone, _message(n))
                expected[lone].append(n)
                continue
            group = "burst-a" if n % 2 else "burst-b"
            if n % 3:
                await sender.group_send(group, _message(n))
            else:
                await sender.group_send_many([(group, _message(n))])
            for name in joined[group]:
                expected[name].append(n)
        commands = _recorded(layer)
        got = await asyncio.gather(*(_got(layer, name) for name in expected))
        assert dict(zip(expected, got, strict=True)) == expected
        assert set(commands) == {"BZMPOP"}, commands  # no EVAL, ZADD, ZPOPMIN
        assert len(commands) <= 3, commands  # one for all 30 (and the pops that wait)
    finally:
        del layer.connection(0).execute_command
        await _leave(layer, joined)


async def test_a_burst_skips_local_memberships_past_their_expiry():
    layer, sender = _layer(group_expiry=60), _layer()
    joined = await _members_of(layer, {"burst-expiry": 3})
    stale, *fresh = joined["burst-expiry"]
    layer._local["burst-expiry"][stale] = time.time() - 61  # joined longer ago than group_expiry
    try:
        for n in range(4):
            await sender.group_send("burst-expiry", _message(n))
        assert await _got(layer, stale) == []
        for name in fresh:
            assert await _got(layer, name) == [0, 1, 2, 3]
        assert stale not in layer.local_members("burst-expiry")
    finally:
        await _leave(layer, {"burst-expiry": fresh})
