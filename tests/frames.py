"""The live consumers' two ways to a socket, for tests that run through Channels' test communicator.

Under daphne a live consumer writes frames at once (adkweb.wsframes.FrameWriter) and takes the channel
layer's messages directly, without a task per message (adkweb.live_socket.LiveConsumer, the layers' direct
delivery); elsewhere its frames go through ASGI and its messages through Channels' dispatch loop.
The `transport` fixture runs a test both ways: "direct" gives each communicator a writer that puts
the frames in the communicator's output, where the socket's ASGI sends go too, so the test reads
them with `receive_from` either way.

    pytestmark = pytest.mark.usefixtures("transport")   # the fixture: tests/conftest.py
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator

from adkweb import wsframes


class QueueFrameWriter:
    """A FrameWriter (ready, write) whose frames go to a test communicator's output, in order with what
    the consumer sends through ASGI."""

    def __init__(self, communicator: WebsocketCommunicator) -> None:
        self.communicator = communicator
        self.frames: list[str] = []

    def ready(self) -> bool:
        return True

    def write(self, *texts: str) -> bool:
        for text in texts:
            self.frames.append(text)
            self.communicator.output_queue.put_nowait({"type": "websocket.send", "text": text})
        return True


def direct(communicator: WebsocketCommunicator) -> QueueFrameWriter:
    """Give one communicator (before it connects) the writer of a daphne socket."""
    writer = QueueFrameWriter(communicator)
    communicator.scope[wsframes.SCOPE_KEY] = writer
    return writer


def use(transport: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The `transport` fixture (tests/conftest.py): every communicator the test makes goes through
    ASGI only ("asgi"), or gets a daphne socket's writer ("direct")."""
    if transport == "direct":
        made = WebsocketCommunicator.__init__

        def init(self: WebsocketCommunicator, *args: Any, **kwargs: Any) -> None:
            made(self, *args, **kwargs)
            direct(self)

        monkeypatch.setattr(WebsocketCommunicator, "__init__", init)
    return transport


async def direct_delivery_contract(layer: Any, group: str = "direct-delivery") -> None:
    """What a channel layer's direct delivery promises (adkweb.channel_layers.DirectDelivery): a
    message goes to the channel's handler if it takes it, else into the channel's queue, and once
    something is queued everything after it is queued behind it (the handler is not even asked); a
    handler that raises has the message queued; a channel that stops delivering directly is back to
    its queue."""
    taker, decliner, failing = [await layer.new_channel() for _ in range(3)]
    for name in (taker, decliner, failing):
        await layer.group_add(group, name)
    taken: dict[str, list[int]] = {taker: [], decliner: [], failing: []}
    asked: dict[str, list[int]] = {taker: [], decliner: [], failing: []}

    def handler(name: str, takes: Any) -> Any:
        def take(message: dict) -> bool:
            asked[name].append(message["n"])
            if not takes(message["n"]):
                return False
            taken[name].append(message["n"])
            return True

        return take

    def fails_first(n: int) -> bool:
        if n == 0:
            raise RuntimeError("boom")
        return True

    layer.deliver_directly(taker, handler(taker, lambda n: True))
    layer.deliver_directly(decliner, handler(decliner, lambda n: n != 1))
    layer.deliver_directly(failing, handler(failing, fails_first))
    waiting = asyncio.ensure_future(layer.receive(taker))  # a consumer waits on its channel (Redis: the reader runs)
    try:
        for n in range(4):
            await layer.group_send(group, {"type": "test.message", "n": n})
        await asyncio.sleep(0.3)  # nothing more to come: every message is taken or queued
        assert taken[taker] == [0, 1, 2, 3] and not waiting.done()
        assert taken[decliner] == [0] and asked[decliner] == [0, 1]  # 2 and 3 queued behind 1, unasked
        assert [(await layer.receive(decliner))["n"] for _ in range(3)] == [1, 2, 3]
        assert taken[failing] == [] and asked[failing] == [0]
        assert [(await layer.receive(failing))["n"] for _ in range(4)] == [0, 1, 2, 3]
        layer.stop_delivering_directly(taker)
        await layer.group_send(group, {"type": "test.message", "n": 4})
        assert (await asyncio.wait_for(waiting, 5))["n"] == 4
        assert taken[taker] == [0, 1, 2, 3]
    finally:
        waiting.cancel()
        for name in (taker, decliner, failing):
            layer.stop_delivering_directly(name)
            await layer.group_discard(group, name)
