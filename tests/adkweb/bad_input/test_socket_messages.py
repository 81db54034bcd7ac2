"""What a page's socket is sent by its client: the conversation list's, a conversation's, the inbox's and a
ticket's sockets read nothing from the browser (htmx's ws extension sends a form's values only from an
element with ws-send, which no page has), so whatever comes (JSON that is not, an object of an unknown
type, one that names a channel message's type, binary frames, a large frame, many) is dropped: the
socket stays open and keeps its pushes, nothing is changed, nothing fails."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from tests.adkweb.bad_input.sweep import Objs, counts
from tests.adkweb.bad_input.test_sockets import sockets

TEXTS = [
    "{",
    "not json",
    "null",
    "[]",
    json.dumps({"type": "no.such.type"}),
    json.dumps({"type": "websocket.disconnect", "code": 1000}),
    json.dumps({"type": "ticket.closed", "pk": 1}),
    json.dumps({"type": "login.ended"}),
    json.dumps({"HEADERS": {"HX-Trigger": "x"}, "decision": "approve", "comment": "<script>"}),
    "\ud800".encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
    "x" * 1_000_000,
]
BYTES = [b"\xff\xfe", b"\x00" * 10, b"{}", b"x" * 1_000_000]


@pytest.mark.django_db(transaction=True)  # on the test, which tests/integration/test_sweeps_postgres.py imports
async def test_sockets_drop_what_their_client_sends_and_stay_open(objs: Objs):
    from adkweb.asgi import application

    users = {"requester": objs.requester, "approver": objs.approver}
    before = await database_sync_to_async(counts)()
    failures: list[str] = []
    for path, who, fair, _refused in sockets(objs):
        communicator = WebsocketCommunicator(application, path, headers=[(b"origin", b"http://testserver")])
        communicator.scope["query_string"] = fair
        communicator.scope["user"] = users[who]
        connected, _ = await communicator.connect(timeout=5)
        assert connected, path
        while not await communicator.receive_nothing(timeout=0.3):
            await communicator.receive_output(timeout=1)  # the catch-up frames a socket sends at once
        for text in TEXTS:
            await communicator.send_to(text_data=text)
        for data in BYTES:
            await communicator.send_to(bytes_data=data)
        for _ in range(200):
            await communicator.send_to(text_data="{}")
        if not await communicator.receive_nothing(timeout=1):
            failures.append(f"{path}: answered {await communicator.receive_output(timeout=1)!r}")
        try:
            await communicator.disconnect()
        except Exception as exc:  # noqa: BLE001  (the consumer failed on what it was sent)
            failures.append(f"{path}: {type(exc).__name__}: {exc}")
    assert not failures, "\n".join(failures)
    assert await database_sync_to_async(counts)() == before


HOSTILE_QUERIES = [
    b"page=-1",
    b"page=0",
    b"page=99999999999999999999",
    b"page=" + b"9" * 5000,
    b"after=-1",
    b"after=9223372036854775808",
    b"after=x",
    b"before=" + b"x" * 5000,
    b"agent=" + b"x" * 5000,
    b"status=nope&kind=nope&sort=nope&mine=maybe",
    b"q=" + b"x" * 5000,
    b"shows=%3Cb%3E&nav=2",
    b"shows=" + b"x" * 5000,
    b"page=1&page=2&after=1&after=2",
]


@pytest.mark.django_db(transaction=True)
async def test_sockets_with_hostile_query_values_connect_or_are_refused_never_fail(objs: Objs):
    """Values a page's URL can carry but no page makes (a page past a bigint, 5,000 characters, a cursor
    that is none, a state the ticket card has not): the socket connects (the value ignored or clamped) or
    is refused with its code; it never fails, and its ids past a bigint in the path neither."""
    from adkweb.asgi import application

    users = {"requester": objs.requester, "approver": objs.approver}
    before = await database_sync_to_async(counts)()
    failures: list[str] = []
    routes = [(path, who, refused) for path, who, _fair, refused in sockets(objs)]
    routes += [
        ("/ws/sessions/99999999999999999999/", "requester", 4403),
        ("/ws/tickets/99999999999999999999/", "approver", 4003),
    ]
    for path, who, refused in routes:
        for query in HOSTILE_QUERIES:
            communicator = WebsocketCommunicator(application, path, headers=[(b"origin", b"http://testserver")])
            communicator.scope["query_string"] = query
            communicator.scope["user"] = users[who]
            try:
                connected, code = await communicator.connect(timeout=5)
                if connected:
                    await communicator.disconnect()
                elif code != refused:
                    failures.append(f"{path}?{query[:40]!r}: closed with {code}")
            except Exception as exc:  # noqa: BLE001  (a failed connect: what this test is for)
                failures.append(f"{path}?{query[:40]!r}: {type(exc).__name__}: {exc}")
    assert not failures, "\n".join(failures)
    assert await database_sync_to_async(counts)() == before
