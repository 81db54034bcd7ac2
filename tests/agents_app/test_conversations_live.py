"""Live, end to end: a real worker runs the turn; the conversation socket streams it in."""

from __future__ import annotations

import re

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.test import Client

from agents_app import services
from agents_app.routing import websocket_urlpatterns

pytestmark = pytest.mark.django_db(transaction=True)


async def test_posted_message_streams_in_then_the_final_event_replaces_the_chunks(demo, worker):
    session = await sync_to_async(services.session_create)(app_name="summary_agent", user_id="requester")
    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/sessions/{session.pk}/?after=0")
    comm.scope["user"] = demo["requester"]
    assert (await comm.connect())[0]
    await comm.receive_from()  # the status badge

    client = Client()
    await sync_to_async(client.force_login)(demo["requester"])
    text = "Please summarise this rather long note about the quarterly travel budget for the team"
    r = await sync_to_async(client.post)(f"/sessions/{session.pk}/messages/", {"text": text}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200

    received: list[str] = []
    stream_id = None
    while True:
        try:
            html = await comm.receive_from(timeout=20)
        except TimeoutError:
            raise AssertionError(f"no final event; received: {received}") from None
        received.append(html)
        if stream_id is None and "event-streaming" in html:
            assert html.startswith('<div hx-swap-oob="beforeend:#conversation-events">')
            assert "Summary" in html  # the first chunk
            stream_id = re.search(r'<article id="(event-[^"]+)"', html).group(1)
            # The card carries the invocation and agent-tree node ADK gave the partial event.
            invocation = re.search(r'data-invocation-id="([^"]*)"', html).group(1)
            assert invocation.startswith("e-")
            assert re.search(r'data-node-path="summary_agent@\d+"', html)
        elif stream_id and html.lstrip().startswith(f'<article id="{stream_id}"'):
            final = html
            break
    assert 'hx-swap-oob="true"' in final and "event-streaming" not in final
    stored = await sync_to_async(lambda: session.events.filter(author="summary_agent").order_by("id").last())()
    assert stored.data["invocation_id"] == invocation
    assert "Summary (14 words): Please summarise this rather long note" in final
    chunks = [h for h in received if h.lstrip().startswith(f'<span hx-swap-oob="beforeend:#{stream_id}-stream">')]
    assert chunks, "later chunks are appended to the streaming card"
    assert any(text in h for h in received[: received.index(final)]), "the user's message arrived first"
    await comm.disconnect()
