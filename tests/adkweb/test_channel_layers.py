"""The in-memory channel layer of embedded mode (adkweb.channel_layers.ThreadSafeInMemoryChannelLayer):
its direct delivery to consumers (the Redis layer's is tested in tests/integration)."""

from __future__ import annotations

from adkweb.channel_layers import ThreadSafeInMemoryChannelLayer
from tests.frames import direct_delivery_contract


async def test_direct_delivery_takes_or_queues_in_order():
    await direct_delivery_contract(ThreadSafeInMemoryChannelLayer())


async def test_finished_channels_are_forgotten_and_a_receiving_one_is_not():
    """Every `/run` follows its turn on a channel of its own (join the session's group, receive, leave):
    the layer must not keep each one's receiver loop forever (a leak, and every publish from a worker
    thread walked them all). A channel still receiving, even in no group, stays known, so a send from
    a thread without a loop still wakes it."""
    import asyncio
    import threading

    layer = ThreadSafeInMemoryChannelLayer()
    layer.CLEAN_EVERY = 0.0
    for n in range(50):  # as agents_app.api.watch.TurnWatch does
        channel = await layer.new_channel()
        await layer.group_add(f"session-{n}", channel)
        await layer.group_send(f"session-{n}", {"type": "session.event", "n": n})
        assert (await layer.receive(channel))["n"] == n
        await layer.group_discard(f"session-{n}", channel)
    waiting = await layer.new_channel()
    received = asyncio.ensure_future(layer.receive(waiting))
    await asyncio.sleep(0)
    watching = await layer.new_channel()  # a socket between two receives, in a group
    await layer.group_add("inbox", watching)
    layer._receiver_loops[watching] = asyncio.get_running_loop()
    layer._clean_expired()
    assert set(layer._receiver_loops) == {waiting, watching}
    sender = threading.Thread(target=layer.send_now, args=(waiting, {"type": "x", "n": 1}))
    sender.start()
    sender.join(5)
    assert (await asyncio.wait_for(received, 5))["n"] == 1


async def test_a_received_message_shares_nothing_with_the_sent_one():
    """A message of flat values (what every publish sends) is copied shallowly; one holding a list or a
    dict deeply, as Channels' layer copies every message: a sender changing its message (or anything
    in it) after the send changes nothing the receiver got, from a thread or on the loop."""
    import threading

    layer = ThreadSafeInMemoryChannelLayer()
    channel = await layer.new_channel()
    await layer.group_add("session-1", channel)
    flat = {"type": "turn.finished", "session_pk": 1, "turn_id": 2, "status": "done", "ahead": True, "x": None}
    nested = {"type": "session.event", "ids": [1, 2], "by": {"pk": 3}}
    await layer.group_send("session-1", flat)
    sender = threading.Thread(target=layer.group_send_now, args=("session-1", nested))
    sender.start()
    sender.join(5)
    expected = [dict(flat), {"type": "session.event", "ids": [1, 2], "by": {"pk": 3}}]
    flat["status"] = "failed"
    nested["ids"].append(9)
    nested["by"]["pk"] = 0
    got = [await layer.receive(channel), await layer.receive(channel)]
    assert got == expected
    assert got[0] is not flat and got[1]["ids"] is not nested["ids"] and got[1]["by"] is not nested["by"]
