"""The conversation list says what its rows were when it was rendered (seen=); its socket, once joined, reads
the page and sends its rows again if they are no longer that: a conversation started while the page loaded
(or while its socket was away) appears, one whose status changed meanwhile says so. Before: the socket read
its page before it joined and pushed nothing, so the new conversation counted as shown and never came, and a
change between the read and the join was never heard."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from agents_app import services
from agents_app.models import Turn
from tests.sockets import connect, page_socket_url

pytestmark = pytest.mark.django_db(transaction=True)


async def _list_socket_url(user) -> str:
    return await sync_to_async(page_socket_url)(user, "/sessions/", "/ws/sessions/")


async def test_a_conversation_started_after_the_list_was_rendered_comes_when_its_socket_connects(demo):
    old = await sync_to_async(services.session_create)(app_name="reimbursement_agent", user_id="requester")
    url = await _list_socket_url(demo["observer"])
    assert "seen=" in url
    new = await sync_to_async(services.session_create)(app_name="stock_agent", user_id="requester")
    comm = await connect(url, demo["observer"])
    frames = [await comm.receive_from(timeout=5), await comm.receive_from(timeout=5)]
    assert all(f.startswith('<tbody hx-swap-oob="afterbegin:#session-rows">') for f in frames), frames
    assert f'id="session-row-{old.pk}"' in frames[0] and f'id="session-row-{new.pk}"' in frames[1]  # new on top
    assert await comm.receive_nothing(timeout=0.2)
    await comm.disconnect()


async def test_a_status_changed_after_the_list_was_rendered_is_sent_when_its_socket_connects(demo):
    session = await sync_to_async(services.session_create)(app_name="reimbursement_agent", user_id="requester")
    url = await _list_socket_url(demo["requester"])
    await sync_to_async(Turn.objects.create)(session=session, kind="message", content={}, status="running")
    comm = await connect(url, demo["requester"])
    frame = await comm.receive_from(timeout=5)
    assert f'id="session-row-{session.pk}"' in frame and "act-running" in frame, frame
    await comm.disconnect()


async def test_a_list_whose_rows_did_not_change_gets_nothing_at_connect(demo):
    await sync_to_async(services.session_create)(app_name="reimbursement_agent", user_id="requester")
    comm = await connect(await _list_socket_url(demo["observer"]), demo["observer"])
    assert await comm.receive_nothing(timeout=0.5)
    await comm.disconnect()
