"""Under daphne a request is Twisted's, which by default parses a POST's form body into
`request.args` (through the email package) before daphne hands the body to ASGI, where Django parses
it again. `adkweb.asgi` turns that off (`handler.daphne_bodies_unparsed`): the body reaches daphne's
request whole, as sent, and nothing parses it on the event loop first."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from daphne.http_protocol import HTTPFactory, WebRequest
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport
from twisted.web import http

from adkweb.handler import daphne_bodies_unparsed

FORM = b"decision=approve&comment=ok"
MULTIPART = (
    b'--b\r\nContent-Disposition: form-data; name="decision"\r\n\r\napprove\r\n'
    b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\n' + b"x" * 5000 + b"\r\n--b--\r\n"
)


def _received(monkeypatch: pytest.MonkeyPatch, content_type: bytes, body: bytes) -> tuple[dict, bytes, int]:
    """POST `body` to a daphne protocol; what its request had when daphne took it over (`process`):
    its args, its body, and how many times Twisted parsed a Content-Type."""
    seen: dict[str, Any] = {}
    parsed = []
    content_type_of = http._parseContentType
    monkeypatch.setattr(http, "_parseContentType", lambda line: parsed.append(line) or content_type_of(line))

    def process(self: WebRequest) -> None:
        seen.update(args=dict(self.args), body=self.content.read())

    monkeypatch.setattr(WebRequest, "process", process)
    server = SimpleNamespace(protocol_connected=lambda request: None)
    protocol = HTTPFactory(server).buildProtocol(IPv4Address("TCP", "127.0.0.1", 1234))
    protocol.makeConnection(StringTransport())
    head = b"POST /api/adk/run HTTP/1.1\r\nHost: localhost\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n"
    protocol.dataReceived(head % (content_type, len(body)) + body)
    return seen["args"], seen["body"], len(parsed)


@pytest.mark.parametrize(
    "content_type, body",
    [(b"application/x-www-form-urlencoded", FORM), (b"multipart/form-data; boundary=b", MULTIPART)],
)
def test_a_form_posts_body_reaches_daphne_whole_and_unparsed(monkeypatch, content_type, body):
    daphne_bodies_unparsed()  # as adkweb.asgi does; once per process
    daphne_bodies_unparsed()
    args, received, parsed = _received(monkeypatch, content_type, body)
    assert received == body
    assert args == {} and parsed == 0


def asgi_says(expression: str, imports: str) -> str:
    """`expression` printed in a process of its own that imported what daphne serves (`adkweb.asgi`: no
    in-process worker here)."""
    import os
    import subprocess
    import sys

    code = f"import adkweb.asgi; {imports}; print({expression})"
    env = {**os.environ, "ADKWEB_EMBEDDED_WORKER": "false"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.stdout.strip(), done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_the_asgi_app_turns_the_parsing_off():
    said = asgi_says(
        "getattr(WebRequest, '_adkweb_bodies_unparsed', False)", "from daphne.http_protocol import WebRequest"
    )
    assert said == "True"
