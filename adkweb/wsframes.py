"""Websocket frames built once per process, written to each socket.

A live fragment is the same text for every socket of an audience (agents_app.fanout, approvals.fanout
render it once and the channel layer hands one message to all of a process's sockets). Sent through
ASGI, each socket's send went through Channels' send wrappers, daphne's `handle_reply`, the UTF-8
encoding and autobahn's framing (`sendMessage`, `sendFrame`, whose debug log arguments are built on
every call): about a third of a web process's time with 1,000 sockets on one conversation
(bench/README.md). Under daphne, `frame_writer` (ASGI middleware, outermost) gives each websocket's
scope a `FrameWriter` for its connection; `LiveConsumer.send_frame` writes the frame built once per
text (autobahn's `PreparedMessage`: encoded and framed once) to the socket, in order with everything
else sent on it (every write is synchronous; what waits in Twisted's buffer goes first). Elsewhere
(uvicorn, Channels' test communicator) there is no writer and frames go through ASGI as before.
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

    def ready(self) -> bool:
        """Whether `write` takes a frame now (the socket is open, or gone: dropped) rather than
        leaving it to ASGI (connecting, or closing)."""
        protocol = self.protocol
        details = self.connections.get(protocol)
        if details is None or details.get("disconnected"):
            return True
        return protocol.state == protocol.STATE_OPEN

    def write(self, *texts: str) -> bool:
        """Send each text as one frame, all of them in one write; False if they must go through ASGI
        instead (not open yet, or closing)."""
        protocol = self.protocol
        details = self.connections.get(protocol)
        if details is None or details.get("disconnected"):
            return True  # gone: daphne's handle_reply drops what is sent to it too
        if protocol.state != protocol.STATE_OPEN:
            return False  # connecting (ASGI accepts first) or closing (ASGI reports it)
        frames = [prepared(text) for text in texts]
        if protocol.send_queue or getattr(protocol, "_perMessageCompress", None) is not None:
            for frame in frames:
                protocol.sendPreparedMessage(frame)  # behind queued data, or compressed per socket
        elif len(frames) == 1:
            _write_now(protocol.transport, frames[0].payloadHybi)
        else:  # frames back to back in one send: one syscall (and one wake-up of the reader) per socket
            _write_now(protocol.transport, b"".join(frame.payloadHybi for frame in frames))
        return True

    def close(self, code: int) -> bool:
        """Close the socket with `code` where autobahn's `sendClose` (daphne's way) refuses a server any
        code but 1000 and 3000-4999: 1011 and 1012, the codes the htmx ws extension reconnects on, had
        the application fail ("invalid close code") and daphne close with 1011 and log a traceback.
        The close frame daphne sends for a failed application, sent here; False: through ASGI."""
        protocol = self.protocol
        details = self.connections.get(protocol)
        if details is None or details.get("disconnected"):
            return True
        if protocol.state != protocol.STATE_OPEN:
            return False
        protocol.sendCloseFrame(code=code)
        return True


def _write_now(transport: Any, data: bytes) -> None:
    """Send at once when nothing waits in Twisted's buffer of this connection: one `send`, where
    Twisted's `write` registers for writability (an epoll change), sends on the next loop turn and
    unregisters (another). What the socket does not take now, and everything on a connection that
    is not plain TCP or not idle, goes through Twisted's `write` (which also sees a failed socket).

    Plain TCP means Twisted's own TCP connection, not an object that answers like one: daphne's
    `ssl:` endpoint hands the protocol a TLS wrapper (`TLSMemoryBIOProtocol`) that forwards every
    attribute it lacks to the TCP connection under it (`TLS` False, its `socket`), so only the type
    tells that bytes sent on that socket would skip the encryption (the client's TLS stream broke:
    tests/integration/test_wsframes_tls.py)."""
    from twisted.internet import tcp

    try:
        idle = (
            isinstance(transport, tcp.Connection)
            and transport.TLS is False
            and transport.connected
            and not transport.disconnecting
            and not transport._writeDisconnected
            and not transport._tempDataBuffer
            and transport.offset == len(transport.dataBuffer)
        )
        sock = transport.socket
    except AttributeError:  # not a Twisted TCP transport
        idle = False
    if idle:
        try:
            sent = sock.send(data)
        except OSError:  # would block, or failed: Twisted's write handles both
            sent = 0
        if sent == len(data):
            return
        data = data[sent:]
    transport.write(data)


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
