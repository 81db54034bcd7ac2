"""Under daphne, a request Twisted will not read is answered, saying why, rather than dropped. Twisted's HTTP
channel (a LineReceiver) closes the connection without a word on a line past 16 KB (`lineLengthExceeded`):
a URL of ~50 KB (a link with a huge query string, a client's bug) got no answer at all, which browsers
show as "connection reset" and clients retry. A request line and headers past 16 KB together, or one
Twisted cannot parse, got a bare "400 Bad Request" with no body. Now: 414 "URL too long" for the request
line, 431 for a header or the headers together, 400 saying the request could not be read; each plain
text, then the connection closed, as Twisted does. The limits stay Twisted's (16 KB a line and in all):
no page of adkweb needs a longer URL, and a GET's query string the size of a body is refused by
Django's own limits anyway. A no-op without daphne; once per process (adkweb.asgi)."""

from __future__ import annotations

from typing import Any

TOO_LONG = (
    414,
    b"URI Too Long",
    "The URL is too long: this server reads at most 16 KB of a request's first line. Nothing was done. "
    "Open the page from a link or the menu; a client should send long input in a request's body.",
)
HEADERS_TOO_LARGE = (
    431,
    b"Request Header Fields Too Large",
    "The request's headers are too large: this server reads at most 16 KB of a request's URL and headers "
    "together (a header line: 16 KB). Nothing was done. If a cookie grew too large, clear this site's "
    "cookies and log in again.",
)
UNREADABLE = (
    400,
    b"Bad Request",
    "The request could not be read: its first line or a header is not HTTP's. Nothing was done.",
)


def answer(channel: Any, refusal: tuple[int, bytes, str]) -> None:
    """Write `refusal` as a whole response on Twisted's `channel`, then close it (after the write)."""
    status, reason, text = refusal
    body = text.encode() + b"\n"
    head = (
        b"HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
        % (status, reason, len(body))
    )
    channel.transport.write(head + body)
    channel.loseConnection()


def daphne_limits_answered() -> None:
    """Twisted's HTTPChannel (daphne's) answers the requests it will not read (this module's docstring)."""
    try:
        from twisted.web.http import HTTPChannel
    except ImportError:  # pragma: no cover (daphne brings Twisted; another server needs nothing)
        return
    if getattr(HTTPChannel, "_adkweb_limits_answered", False):
        return

    def lineLengthExceeded(self: Any, line: bytes) -> None:
        first = getattr(self, "_HTTPChannel__first_line", 0)  # set until the request line is read
        answer(self, TOO_LONG if first else HEADERS_TOO_LARGE)

    def _respondToBadRequestAndDisconnect(self: Any) -> None:
        over = getattr(self, "_receivedHeaderSize", 0) > self.totalHeadersSize
        answer(self, HEADERS_TOO_LARGE if over else UNREADABLE)

    setattr(HTTPChannel, "lineLengthExceeded", lineLengthExceeded)  # noqa: B010  (a method of Twisted's class)
    setattr(HTTPChannel, "_respondToBadRequestAndDisconnect", _respondToBadRequestAndDisconnect)  # noqa: B010
    setattr(HTTPChannel, "_adkweb_limits_answered", True)  # noqa: B010
