"""The web process's garbage collector policy (adkweb.gcpolicy): what survives websockets settling is
frozen, what is garbage then is collected (not frozen), nothing is done while sockets keep opening and
closing, and frozen cycles left by closed sockets are collected by a thaw: memory does not grow over
connect/disconnect cycles."""

from __future__ import annotations

import asyncio
import gc
import weakref

from adkweb import gcpolicy

SETTLE = 0.05


class Node:
    """An object in a reference cycle (only the cyclic collector frees it)."""

    def __init__(self) -> None:
        self.me = self


def _tracked(obj: object) -> bool:
    """Whether the collector walks `obj` (frozen objects are not in any generation)."""
    return any(o is obj for o in gc.get_objects())


async def test_settled_websockets_have_the_garbage_collected_and_the_rest_frozen():
    policy = gcpolicy.Policy(settle=SETTLE)
    kept = Node()
    garbage = Node()
    gone = weakref.ref(garbage)
    del garbage
    policy.opened()
    await asyncio.sleep(SETTLE * 3)
    assert policy.settles == 1
    assert gone() is None  # collected before the freeze: per-request garbage is not frozen
    assert not _tracked(kept)  # frozen: out of the full collections' walks
    assert kept.me is kept


async def test_nothing_is_collected_while_websockets_keep_opening():
    policy = gcpolicy.Policy(settle=SETTLE)
    for _ in range(8):
        policy.opened()
        await asyncio.sleep(SETTLE / 3)
    assert policy.settles == 0  # never quiet for `settle` seconds: no pause in the middle of a burst
    await asyncio.sleep(SETTLE * 3)
    assert policy.settles == 1  # once, after the burst


async def test_off_with_no_settle_time():
    policy = gcpolicy.Policy(settle=0)
    kept = Node()
    policy.opened()
    policy.closed()
    await asyncio.sleep(0.05)
    assert policy.settles == 0 and policy.timer is None and _tracked(kept)


async def test_frozen_cycles_of_closed_websockets_are_collected_by_a_thaw():
    policy = gcpolicy.Policy(settle=SETTLE, thaw_closes=3)
    socket_objects = Node()
    gone = weakref.ref(socket_objects)
    policy.opened()
    await asyncio.sleep(SETTLE * 3)
    assert not _tracked(socket_objects)  # frozen while its socket is open
    del socket_objects  # its socket closed: a frozen cycle, which reference counting cannot free
    for _ in range(2):
        policy.closed()
    await asyncio.sleep(SETTLE * 3)
    assert policy.thaws == 0 and gone() is not None  # 2 closes: not yet
    policy.closed()
    await asyncio.sleep(SETTLE * 3)
    assert policy.thaws == 1 and gone() is None


async def test_memory_does_not_grow_over_connect_and_disconnect_cycles():
    """Each connection leaves 2,000 objects in reference cycles when it closes (as a websocket's
    protocol, tasks and consumer can): frozen while open, collected by the thaws."""
    policy = gcpolicy.Policy(settle=SETTLE, thaw_closes=20)

    async def app(scope, receive, send):
        held = [Node() for _ in range(1000)]
        for a, b in zip(held, held[1:], strict=False):
            a.next = b
        await receive()  # open until the client goes

    wrapped = gcpolicy.websockets_settle(app)
    gcpolicy_before = gcpolicy._policy
    gcpolicy._policy = policy
    try:
        frozen = []
        for _ in range(8):
            closing = asyncio.Event()

            async def receive(closing=closing):
                await closing.wait()
                return {"type": "websocket.disconnect"}

            async def send(message):
                pass

            conns = [asyncio.create_task(wrapped({"type": "websocket"}, receive, send)) for _ in range(10)]
            await asyncio.sleep(SETTLE * 3)  # settled with 10 open: frozen
            closing.set()
            await asyncio.gather(*conns)
            await asyncio.sleep(SETTLE * 3)  # settled after the closes
            frozen.append(gc.get_freeze_count())
        assert policy.thaws >= 3, (policy.thaws, frozen)
        # Without thaws each cycle would leave its 10 connections' 20,000 objects frozen for ever.
        assert max(frozen[2:]) - min(frozen[2:]) < 25_000, frozen
        assert frozen[-1] <= frozen[1] + 25_000, frozen
    finally:
        gcpolicy._policy = gcpolicy_before


async def test_the_web_process_installs_the_policy_and_hears_of_its_websockets(monkeypatch):
    from channels.testing import WebsocketCommunicator
    from django.conf import settings

    import adkweb.asgi

    policy = gcpolicy.policy()
    assert policy is not None and policy.settle == settings.ADKWEB_GC_SETTLE_SECONDS > 0
    assert gc.get_freeze_count() > 50_000  # the startup objects
    heard = []
    monkeypatch.setattr(policy, "opened", lambda: heard.append("opened"))
    monkeypatch.setattr(policy, "closed", lambda: heard.append("closed"))
    communicator = WebsocketCommunicator(adkweb.asgi.application, "/ws/approvals/")
    connected, _ = await communicator.connect()  # no login, no origin: refused
    assert not connected
    await communicator.wait()
    assert heard == ["opened", "closed"]
