"""Under daphne (Twisted's HTTP channel), a request past Twisted's limits: a ~50 KB URL was dropped without
an answer (the connection closed: a browser's "connection reset"), a request line and headers past 16 KB
together, or an unparsable one, a bare "400 Bad Request" with no body. Now each is answered, plain text
saying why, then the connection closed (adkweb.daphne_limits, turned on by adkweb.asgi)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from daphne.http_protocol import HTTPFactory, WebRequest
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport

from adkweb.daphne_limits import daphne_limits_answered
from tests.adkweb.test_daphne_bodies import asgi_says


def _answer(monkeypatch: pytest.MonkeyPatch, data: bytes) -> tuple[bytes, bool, list]:
    """`data` sent to a daphne protocol: what it wrote back, whether it closed, the requests it handed on."""
    handed: list = []
    monkeypatch.setattr(WebRequest, "process", lambda self: handed.append(self.uri))
    server = SimpleNamespace(protocol_connected=lambda request: None)
    protocol = HTTPFactory(server).buildProtocol(IPv4Address("TCP", "127.0.0.1", 1234))
    transport = StringTransport()
    protocol.makeConnection(transport)
    protocol.dataReceived(data)
    return transport.value(), transport.disconnecting, handed


@pytest.mark.parametrize("size", [17_000, 50_000])
def test_a_url_past_16_kb_is_a_414_saying_so(monkeypatch, size):
    daphne_limits_answered()  # as adkweb.asgi does; once per process
    daphne_limits_answered()
    url = b"/sessions/?q=" + b"x" * size
    for sent in (b"GET " + url + b" HTTP/1.1\r\nHost: localhost\r\n\r\n", b"GET " + url):  # whole, or still coming
        written, closed, handed = _answer(monkeypatch, sent)
        assert written.startswith(b"HTTP/1.1 414 URI Too Long\r\n"), written[:200]
        assert b"The URL is too long" in written and closed and handed == []


def test_headers_past_16_kb_are_a_431_and_an_unreadable_request_a_400_saying_so(monkeypatch):
    daphne_limits_answered()
    cases = {
        b"GET / HTTP/1.1\r\nHost: localhost\r\nCookie: " + b"c" * 17_000 + b"\r\n\r\n": b"431 Request Header",
        b"GET /?q=" + b"x" * 9000 + b" HTTP/1.1\r\nHost: localhost\r\nX-A: " + b"a" * 8000 + b"\r\n\r\n": b"431 ",
        b"NOT HTTP\r\n\r\n": b"400 Bad Request",
    }
    for sent, status in cases.items():
        written, closed, handed = _answer(monkeypatch, sent)
        assert written.startswith(b"HTTP/1.1 " + status), (sent[:40], written[:200])
        assert b"Nothing was done." in written and closed and handed == []
    written, closed, handed = _answer(monkeypatch, b"GET /?q=" + b"x" * 15_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert handed and written == b""  # under the limits: daphne's, as before


def test_the_asgi_app_turns_the_answers_on():
    said = asgi_says(
        "getattr(HTTPChannel, '_adkweb_limits_answered', False)", "from twisted.web.http import HTTPChannel"
    )
    assert said == "True"
