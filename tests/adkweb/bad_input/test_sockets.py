"""Websockets whose query string no page's URL could carry (bytes that are not UTF-8, a NUL): refused with
the socket's refusal code, never a failed connect (a UnicodeDecodeError on every route, PostgreSQL's
refusal of a NUL in the conversation list's filter); the same sockets with a fair query string connect.
"""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from tests.adkweb.bad_input.sweep import Objs, counts

BAD_QUERIES = [
    b"agent=\xff\xfe",
    b"after=\xc3",
    b"q=%ED%A0%80&x=\xed\xa0\x80",
    b"agent=%00",
    b"status=%00",
    b"after=1%00",
]


def sockets(o: Objs) -> list[tuple[str, str, bytes, int]]:
    """(path, who, a fair query string, the route's refusal code)."""
    return [
        ("/ws/sessions/", "requester", b"agent=reimbursement_agent&page=1", 4403),
        (f"/ws/sessions/{o.session.pk}/", "requester", b"after=1", 4403),
        ("/ws/approvals/", "approver", b"agent=reimbursement_agent&q=meals", 4003),
        (f"/ws/tickets/{o.call.pk}/", "approver", b"after=1", 4003),
    ]


async def _connect(path: str, user, query: bytes) -> tuple[bool, int | None]:
    from adkweb.asgi import application

    communicator = WebsocketCommunicator(application, path, headers=[(b"origin", b"http://testserver")])
    communicator.scope["query_string"] = query
    communicator.scope["user"] = user
    connected, code = await communicator.connect(timeout=5)
    if connected:
        await communicator.disconnect()
    return connected, code


@pytest.mark.django_db(transaction=True)  # on the test, which tests/integration/test_sweeps_postgres.py imports
async def test_sockets_with_query_strings_no_url_holds_are_refused(objs):
    users = {"requester": objs.requester, "approver": objs.approver}
    before = await database_sync_to_async(counts)()
    failures: list[str] = []
    for path, who, fair, refused in sockets(objs):
        assert await _connect(path, users[who], fair) == (True, None), path  # the socket itself is open to them
        for query in BAD_QUERIES:
            try:
                outcome = await _connect(path, users[who], query)
            except Exception as exc:  # noqa: BLE001  (a failed connect: what this test is for)
                outcome = (False, f"{type(exc).__name__}: {exc}")  # type: ignore[assignment]
            if outcome != (False, refused):
                failures.append(f"{path}?{query!r} as {who}: {outcome}, expected refused with {refused}")
    assert not failures, "\n".join(failures)
    assert await database_sync_to_async(counts)() == before
