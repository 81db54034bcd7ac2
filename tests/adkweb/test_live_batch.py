"""adkweb.live.batched: a publish's group sends leave together, each group's in order, and one
group's failure does not stop the others."""

from __future__ import annotations

import asyncio

from adkweb import live, watch_hints


class RecordingLayer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    async def group_send(self, group: str, message: dict) -> None:
        if group == "down":
            raise ConnectionError("Redis is down")
        await asyncio.sleep(0.01 if message["n"] % 2 else 0)  # interleave the groups
        self.sent.append((group, message["n"]))


def test_batched_sends_leave_together_in_order_per_group(monkeypatch):
    layer = RecordingLayer()
    monkeypatch.setattr(live, "get_channel_layer", lambda: layer)
    with live.batched():
        for n in range(6):
            live.group_send(f"g{n % 2}", {"type": "x", "n": n})
            live.group_send("down", {"type": "x", "n": n})
        with live.batched():  # nested: the outer batch sends it
            live.group_send("g0", {"type": "x", "n": 6})
        assert layer.sent == []  # nothing left before the batch ended
    assert [n for g, n in layer.sent if g == "g0"] == [0, 2, 4, 6]
    assert [n for g, n in layer.sent if g == "g1"] == [1, 3, 5]
    live.group_send("g1", {"type": "x", "n": 7})  # outside a batch: at once
    assert layer.sent[-1] == ("g1", 7)


class CountingLayer:
    """Channels' in-memory layer's shape (a `groups` dict), counting how often it is asked."""

    def __init__(self, watched: set[str]) -> None:
        self.asked = 0
        self._groups = {g: {"ch": 1} for g in watched}

    @property
    def groups(self) -> dict:
        self.asked += 1
        return self._groups


def test_groups_asked_ahead_are_answered_from_the_batch(monkeypatch):
    layer = CountingLayer({"inbox", "s.owner"})
    monkeypatch.setattr(live, "get_channel_layer", lambda: layer)
    with live.batched():
        live.groups_watched_ahead(["inbox", "s.owner", "s.approver"])
        assert layer.asked == 1
        assert live.groups_watched(["inbox"]) == {"inbox"}
        assert live.groups_watched(["s.owner", "s.approver"]) == {"s.owner"}
        assert layer.asked == 1  # answered from what was asked ahead
        assert live.groups_watched(["other"]) == set()  # not asked ahead: the layer is asked
        assert layer.asked == 2
    assert live.groups_watched(["inbox"]) == {"inbox"}  # after the batch: the layer again
    assert layer.asked == 3
    live.groups_watched_ahead(["inbox"])  # outside a batch: nothing asked, nothing kept
    assert live.groups_watched(["inbox"]) == {"inbox"}
    assert layer.asked == 4


def test_embedded_layer_is_published_to_from_a_thread_without_a_loop_and_without_a_hop(monkeypatch):
    """Embedded mode: a worker thread's after-commit publish reaches a consumer waiting on the server's
    loop, sent in place (asgiref's async_to_sync would start a loop on a new thread for each)."""
    import threading
    import time

    from adkweb.channel_layers import ThreadSafeInMemoryChannelLayer

    layer = ThreadSafeInMemoryChannelLayer()
    monkeypatch.setattr(live, "get_channel_layer", lambda: layer)
    monkeypatch.setattr(live, "async_to_sync", None)  # not used: calling it would raise
    server = asyncio.new_event_loop()
    threading.Thread(target=server.run_forever, daemon=True).start()
    try:
        channel = asyncio.run_coroutine_threadsafe(layer.new_channel(), server).result(5)
        asyncio.run_coroutine_threadsafe(layer.group_add("watchers", channel), server).result(5)
        first = asyncio.run_coroutine_threadsafe(layer.receive(channel), server)
        while channel not in layer._receiver_loops:  # waiting on the server's loop: puts go through it
            time.sleep(0.001)
        assert live.groups_watched(["watchers", "nobody"]) == {"watchers"}
        with live.batched():
            live.group_send("watchers", {"type": "x", "n": 1})
            live.group_send("nobody", {"type": "x", "n": 0})
            live.group_send("watchers", {"type": "x", "n": 2})
        assert first.result(5) == {"type": "x", "n": 1}
        second = asyncio.run_coroutine_threadsafe(layer.receive(channel), server)
        assert second.result(5) == {"type": "x", "n": 2}
    finally:
        server.call_soon_threadsafe(server.stop)


def test_embedded_layer_takes_sends_from_worker_threads_while_its_consumer_receives():
    """Two worker threads publish 200 messages each to a group while its consumer receives on the
    server's loop: every message arrives, each thread's in order, and expiry cleaning (which
    touches the consumers' queues) runs on that loop only, never on a sending thread."""
    import threading

    from adkweb.channel_layers import ThreadSafeInMemoryChannelLayer

    layer = ThreadSafeInMemoryChannelLayer(capacity=1000)
    layer.CLEAN_EVERY = 0.0  # hand a cleaning over on every send
    cleaned_on: set[str] = set()
    clean = layer._clean_expired

    def recording_clean() -> None:
        cleaned_on.add(threading.current_thread().name)
        clean()

    layer._clean_expired = recording_clean  # type: ignore[method-assign]
    server = asyncio.new_event_loop()
    threading.Thread(target=server.run_forever, name="server-loop", daemon=True).start()
    try:
        channel = asyncio.run_coroutine_threadsafe(layer.new_channel(), server).result(5)
        asyncio.run_coroutine_threadsafe(layer.group_add("watchers", channel), server).result(5)

        async def receive_all(n: int) -> list[dict]:
            return [await layer.receive(channel) for _ in range(n)]

        received = asyncio.run_coroutine_threadsafe(receive_all(400), server)
        while channel not in layer._receiver_loops:
            threading.Event().wait(0.001)

        def publish(name: str) -> None:
            for n in range(200):
                layer.group_send_now("watchers", {"type": "x", "from": name, "n": n})

        workers = [threading.Thread(target=publish, args=(f"w{i}",), name=f"w{i}") for i in range(2)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(10)
        messages = received.result(10)
        for name in ("w0", "w1"):
            assert [m["n"] for m in messages if m["from"] == name] == list(range(200))
        assert cleaned_on == {"server-loop"}
    finally:
        server.call_soon_threadsafe(server.stop)


class ManyLayer:
    """The Redis layer's shape for a batch that asks (`group_send_many`): each group's members counted."""

    def __init__(self, members: dict[str, int]) -> None:
        self.members = members

    async def group_send_many(self, pairs: list, ask: list[str]) -> dict[str, int]:
        return {g: self.members.get(g, 0) for g in [g for g, _ in pairs] + list(ask)}


def test_a_group_is_known_empty_only_from_a_batch_sent_after_the_moment_asked_about(monkeypatch):
    layer = ManyLayer({"watched": 1})
    monkeypatch.setattr(live, "get_channel_layer", lambda: layer)
    before = live.time.monotonic()
    asyncio.run(live._agroup_send_many(layer, [("empty", {"type": "x"}), ("watched", {"type": "x"})], ["other"]))
    after = live.time.monotonic()
    assert watch_hints.counted_empty_since("empty", before) and watch_hints.counted_empty_since("other", before)
    assert not watch_hints.counted_empty_since("watched", before)  # it has a member
    assert not watch_hints.counted_empty_since("empty", after)  # counted by a batch sent before that moment
    live._replied({"empty": 2})  # a later answer (a batch sent without waiting) counts a member
    assert not watch_hints.counted_empty_since("empty", before)
    live._replied({"gone": 0})  # an empty count of a batch whose moment is not kept says nothing
    assert not watch_hints.counted_empty_since("gone", before)


def test_groups_are_counted_empty_lately_only_all_of_them_and_only_within_the_moment(monkeypatch):
    layer = ManyLayer({"watched": 1})
    monkeypatch.setattr(live, "get_channel_layer", lambda: layer)
    monkeypatch.setattr(watch_hints, "EMPTY_LATELY", 30.0)
    asyncio.run(live._agroup_send_many(layer, [("a", {"type": "x"})], ["b", "watched"]))
    assert watch_hints.counted_empty_lately(["a", "b"])
    assert not watch_hints.counted_empty_lately(["a", "watched"])  # one has a member
    assert not watch_hints.counted_empty_lately(["a", "never-counted"])
    assert not watch_hints.counted_empty_lately([])
    live._replied({"c": 0}, live.time.monotonic())  # a batch sent without waiting, its moment kept
    assert watch_hints.counted_empty_lately(["a", "c"])
    monkeypatch.setattr(watch_hints, "EMPTY_LATELY", 0.0)
    assert not watch_hints.counted_empty_lately(["a", "b"])  # counted, but not lately


def test_an_async_batch_on_the_embedded_layer_is_sent_in_the_call_without_a_task_per_group(monkeypatch):
    """`abatched()` on the in-memory layer (embedded mode; the session store's appends publish this way):
    each group's sends are done in place, in order, and its question answered, with no task per group
    (a task and a turn of the loop each: ~60 us of an append's publish). A callback queued in the batch
    has not run when it has ended and its messages are in the channel: nothing yielded to the loop."""
    from adkweb.channel_layers import ThreadSafeInMemoryChannelLayer

    layer = ThreadSafeInMemoryChannelLayer()
    monkeypatch.setattr(live, "get_channel_layer", lambda: layer)

    async def main() -> tuple[list, int, set[str], list[dict]]:
        channel = await layer.new_channel()
        await layer.group_add("watchers", channel)
        ran: list = []
        async with live.abatched():
            await live.agroup_send("watchers", {"type": "x", "n": 1})
            await live.agroup_send("other", {"type": "x", "n": 0})
            watched = await live.agroups_watched(["watchers", "nobody"])
            await live.agroup_send("watchers", {"type": "x", "n": 2})
            asyncio.get_running_loop().call_soon(ran.append, True)
        before, queued = list(ran), layer.channels[channel].qsize()
        return before, queued, watched, [await layer.receive(channel), await layer.receive(channel)]

    ran, queued, watched, received = asyncio.run(main())
    assert watched == {"watchers"}
    assert received == [{"type": "x", "n": 1}, {"type": "x", "n": 2}]
    assert (ran, queued) == ([], 2)  # both sent before the loop ran anything else
