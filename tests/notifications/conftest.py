"""Fixtures for notification tests: a real SMTP server (aiosmtpd) and a real HTTP webhook receiver,
both on local ports, and settings that point adkweb at them."""

from __future__ import annotations

import email
import email.policy
import hashlib
import hmac
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

FAST_RETRIES = [0.3, 0.3, 0.3, 0.3, 0.3]  # the real schedule is 10 s … 30 min; same count of tries


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SmtpSink:
    """aiosmtpd handler: keeps every message it is given, parsed."""

    def __init__(self) -> None:
        self.messages: list[email.message.EmailMessage] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 (aiosmtpd's name)
        self.messages.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
        return "250 Message accepted"


@pytest.fixture
def smtp_server(settings: Any) -> Iterator[SmtpSink]:
    """A real SMTP server on a local port; adkweb sends to it with Django's SMTP backend."""
    from aiosmtpd.controller import Controller

    sink = SmtpSink()
    port = free_port()
    controller = Controller(sink, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
    try:
        yield sink
    finally:
        controller.stop()


@dataclass
class Hit:
    body: bytes
    headers: dict[str, str]
    signature_ok: bool
    status: int

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """A webhook receiver as a customer would write one: it checks the HMAC before anything else."""

    secret: str
    fail_first: int = 0
    sleep: float = 0.0
    hits: list[Hit] = field(default_factory=list)
    url: str = ""

    def wait_for(self, n: int, timeout: float = 15.0) -> list[Hit]:
        deadline = time.monotonic() + timeout
        while len(self.hits) < n:
            if time.monotonic() > deadline:
                raise AssertionError(f"the receiver got {len(self.hits)} requests, expected {n}")
            time.sleep(0.02)
        return self.hits


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            expected = "sha256=" + hmac.new(receiver.secret.encode(), body, hashlib.sha256).hexdigest()
            ok = hmac.compare_digest(expected, self.headers.get("X-Adkweb-Signature", ""))
            if receiver.sleep:
                time.sleep(receiver.sleep)
            failing = len([h for h in receiver.hits if h.signature_ok]) < receiver.fail_first
            status = 401 if not ok else (503 if failing else 204)
            receiver.hits.append(Hit(body, dict(self.headers), ok, status))
            self.send_response(status)
            self.end_headers()
            if status != 204:
                self.wfile.write(b"signature mismatch" if not ok else b"temporarily unavailable")

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def webhook_receiver(settings: Any) -> Iterator[Any]:
    """receiver(secret, fail_first=0, sleep=0) → a live Receiver on a local port (so webhooks to
    loopback addresses are allowed, as an administrator of a receiver on the same host would)."""
    settings.ADKWEB_WEBHOOK_ALLOW_PRIVATE = True
    servers: list[ThreadingHTTPServer] = []

    def make(secret: str, **opts: Any) -> Receiver:
        receiver = Receiver(secret=secret, **opts)
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/adkweb"
        return receiver

    yield make
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def fast_retries(settings: Any) -> list[float]:
    settings.ADKWEB_NOTIFY_RETRY_DELAYS = FAST_RETRIES
    return FAST_RETRIES


@pytest.fixture
def emails(demo: dict[str, Any]) -> dict[str, Any]:
    """Demo users with email addresses (the approvers get the ticket emails)."""
    for name, user in demo.items():
        user.email = f"{name}@example.com"
        user.save(update_fields=["email"])
    return demo


@pytest.fixture
def admin_client(demo: dict[str, Any], client: Any) -> Any:
    """The demo's admin logged in (pytest-django's own `admin_client` makes a user of its own)."""
    client.force_login(demo["admin"])
    return client


def post(c: Any, path: str, body: Any, method: str = "post") -> Any:
    """A JSON request (`method`: post, patch, put) through a Django test client."""
    return getattr(c, method)(path, data=json.dumps(body), content_type="application/json")
