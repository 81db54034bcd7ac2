"""Live frames over TLS: daphne serving https/wss itself (its `ssl:` endpoint), with real websockets.

adkweb.wsframes writes a prepared frame straight to the socket when the connection is plain TCP and
idle; over TLS every byte must go through the TLS layer instead. Here a daphne process serves wss with
a certificate made for the test, sockets of a logged-in approver watch a conversation, the worker
process runs a turn, and every socket gets every stored event once, in order, as readable frames (a
frame written under the TLS layer would break the client's TLS stream).

The sockets are websockets' asyncio client, one thread, as a browser's are. Its sync client reads in a
background thread while the caller's thread writes, and Python's `ssl` socket is not safe for that: with
TLS 1.3 the session tickets daphne sends right after the handshake are read while the upgrade request is
written, and now and then the request never arrived (CI, 2026-12-06 and 12-07: "timed out while waiting
for handshake response", daphne logging no WSCONNECTING). Reproduced with 300 connects to this daphne:
the sync client failed within 2-90 connects in each of 3 runs, the asyncio client connected 900 of 900,
the sync client held to TLS 1.2 600 of 600 (python-socketio#1568 and python-engineio#461 report the same
race)."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
import sys
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.conf import settings
from django.test import Client
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect

from agents_app import services

from . import processes
from .test_fanout_services import _final_ids, _message_settled

SOCKETS = 5
T = TypeVar("T")


class _Loop:
    """An event loop in a thread of its own: the sockets live there while the test's thread sends the
    message and waits for the turn as the other fan-out tests do."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


async def _socket_frames(ws: ClientConnection, stored: list[str]) -> list[str]:
    """What the socket receives until every one of `stored` came, then anything after the last event,
    too (up to 30 s); as test_fanout_services._socket_frames, for an asyncio socket."""
    frames: list[str] = []
    deadline = time.monotonic() + 30
    while set(_final_ids(frames)) != set(stored) and time.monotonic() < deadline:
        try:
            frames.append(str(await asyncio.wait_for(ws.recv(), max(deadline - time.monotonic(), 0.01))))
        except TimeoutError:
            break
    while True:
        try:
            frames.append(str(await asyncio.wait_for(ws.recv(), 0.3)))
        except TimeoutError:
            return frames


def _certificate(tmp_path) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (cert and key PEM files)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return str(cert_file), str(key_file)


def _daphne_tls(cert: str, key: str) -> tuple[processes.Service, str]:
    port = processes.free_port()
    endpoint = f"ssl:{port}:interface=127.0.0.1:privateKey={key}:certKey={cert}"
    args = [sys.executable, "-m", "daphne", "-e", endpoint, "adkweb.asgi:application"]
    web = processes.Service(args, processes.service_env(settings.REDIS_URL), ready="Listening on TCP address")
    return web.start(), f"127.0.0.1:{port}"


def test_live_frames_over_tls_reach_every_socket_once_in_order(demo, worker, tmp_path):
    cert, key = _certificate(tmp_path)
    trusted = ssl.create_default_context(cafile=cert)
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")
    approver = Client()
    approver.force_login(demo["approver"])
    cookie = f"sessionid={approver.cookies['sessionid'].value}"
    web, host = _daphne_tls(cert, key)
    loop, sockets = _Loop(), []

    async def watch() -> ClientConnection:
        ws = await ws_connect(
            f"wss://{host}/ws/sessions/{session.pk}/?after=0",
            ssl=trusted,
            additional_headers={"Cookie": cookie, "Origin": f"https://{host}"},
            open_timeout=20,
        )
        assert 'id="session-status"' in str(await asyncio.wait_for(ws.recv(), 20))
        return ws

    try:
        for _ in range(SOCKETS):
            sockets.append(loop.run(watch()))

        stored = _message_settled(demo["requester"], session.pk)

        for i, ws in enumerate(sockets):
            frames = loop.run(_socket_frames(ws, stored))
            assert _final_ids(frames) == stored, f"socket {i}: {_final_ids(frames)} != {stored}"
            assert "waiting for a human" in "".join(frames), i
    except BaseException:
        print("daphne's log (last 5,000 characters):\n" + web.text()[-5000:])  # shown with the failure
        raise
    finally:
        for ws in sockets:
            loop.run(ws.close())
        loop.stop()
        web.stop()
