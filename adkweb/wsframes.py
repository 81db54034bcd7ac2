"""Websocket frames built once per process, written to each socket.

A live fragment is the same text for every socket of an audience (agents_app.fanout, approvals.fanout
render it once and the channel layer hands one message to all of a process's sockets). Sent through
ASGI, each socket's send went through Channels' send wrappers, daphne's `handle_reply`, the UTF-8
encoding and autobahn's framing (`sendMessage`, `sendFrame`, whose debug log arguments are built on
every call): about a third of a web process's time with 1,000 sockets on one conversation
(bench/README.md). Under daphne, `frame_writer` (ASGI middleware, outermost) gives each websocket's
scope a `FrameWriter` for its connection; `LiveConsumer.send_frame` writes the frame built once per
text (autobahn's `PreparedMessage`: encoded and framed once) to the socket's transport, in order with
everything else sent on it (every write is synchronous). Elsewhere (uvicorn, Channels' test
communicator) there is no writer and frames go through ASGI as before.
"""

from __future__ import annotations

import functools
from typing import Any

SCOPE_KEY = "adkweb.frame_writer"


@functools.lru_cache(maxsize=256)
def prepared(text: str) -> Any:
    """The text frame of `text`, encoded and framed once per process (the same fragment for 1,000
    sockets is one string; its hash is computed once)."""
    from autobahn.websocket.protocol import PreparedMessage

    return PreparedMessage(text.encode("utf8"), isBinary=False, applyMask=False, doNotCompress=False)


class FrameWriter:
    """Writes prepared text frames to one daphne websocket connection."""

    __slots__ = ("connections", "protocol")

    def __init__(self, connections: dict, protocol: Any) -> None:
        self.connections, self.protocol = connections, protocol

    def write(self, text: str) -> bool:
        """Send `text` as one frame; False if it must go through ASGI instead (not open yet)."""
        protocol = self.protocol
        details = self.connections.get(protocol)
        if details is None or details.get("disconnected"):
            return True  # gone: daphne's handle_reply drops what is sent to it too
        if protocol.state != protocol.STATE_OPEN:
            return False  # connecting (ASGI accepts first) or closing (ASGI reports it)
        frame = prepared(text)
        if protocol.send_queue or getattr(protocol, "_perMessageCompress", None) is not None:
            protocol.sendPreparedMessage(frame)  # behind queued data, or compressed per socket
        else:
            protocol.transport.write(frame.payloadHybi)
        return True


def _daphne_connection(send: Any) -> FrameWriter | None:
    """The connection behind daphne's `send` (`partial(server.handle_reply, protocol)`), if it is one."""
    if not isinstance(send, functools.partial) or len(send.args) != 1 or send.keywords:
        return None
    server = getattr(send.func, "__self__", None)
    protocol = send.args[0]
    if getattr(send.func, "__name__", "") != "handle_reply" or type(server).__module__ != "daphne.server":
        return None
    if not hasattr(protocol, "sendPreparedMessage") or not hasattr(protocol, "transport"):
        return None
    connections = getattr(server, "connections", None)
    return FrameWriter(connections, protocol) if isinstance(connections, dict) else None


def frame_writer(app: Any) -> Any:
    """ASGI middleware (outermost: it needs the server's own `send`)."""

    async def asgi(scope: dict, receive: Any, send: Any) -> Any:
        if scope.get("type") == "websocket":
            writer = _daphne_connection(send)
            if writer is not None:
                scope = {**scope, SCOPE_KEY: writer}
        return await app(scope, receive, send)

    return asgi
