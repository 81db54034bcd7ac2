"""Live frames over TLS: daphne serving https/wss itself (its `ssl:` endpoint), with real websockets.

adkweb.wsframes writes a prepared frame straight to the socket when the connection is plain TCP and
idle; over TLS every byte must go through the TLS layer instead. Here a daphne process serves wss with
a certificate made for the test, sockets of a logged-in approver watch a conversation, the worker
process runs a turn, and every socket gets every stored event once, in order, as readable frames (a
frame written under the TLS layer would break the client's TLS stream)."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.conf import settings
from django.test import Client
from websockets.sync.client import connect as ws_connect

from agents_app import services

from . import processes
from .test_fanout_services import _final_ids, _message_settled, _socket_frames

SOCKETS = 5


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
    sockets = []
    try:
        for _ in range(SOCKETS):
            ws = ws_connect(
                f"wss://{host}/ws/sessions/{session.pk}/?after=0",
                ssl=trusted,
                additional_headers={"Cookie": cookie, "Origin": f"https://{host}"},
                open_timeout=20,
            )
            assert 'id="session-status"' in ws.recv(timeout=20)
            sockets.append(ws)

        stored = _message_settled(demo["requester"], session.pk)

        for i, ws in enumerate(sockets):
            frames = _socket_frames(ws, stored)
            assert _final_ids(frames) == stored, f"socket {i}: {_final_ids(frames)} != {stored}"
            assert "waiting for a human" in "".join(frames), i
    except BaseException:
        print("daphne's log (last 5,000 characters):\n" + web.text()[-5000:])  # shown with the failure
        raise
    finally:
        for ws in sockets:
            ws.close()
        web.stop()
