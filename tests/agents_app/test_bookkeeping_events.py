"""ADK's own markers with nothing for a person to read (an agent's end, `end_of_agent`; a resumable
invocation's checkpoint, `agent_state`) are stored and served as ADK serves them, but the pages do not show
them as empty "(no message content)" bubbles: not in a conversation, not on a ticket page, not pushed live.
An event without content that carries something a person reads (a state update, an error) still shows."""

from __future__ import annotations

import re

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.template.loader import render_to_string
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions

from adkweb.routing import websocket_urlpatterns
from agents_app import fanout, services
from agents_app.models import AdkSession, StoredEvent
from agents_app.session_service import event_to_json
from approvals.models import PendingCall
from tests.agents_app.test_demo_conversations import _as, _page, seeded  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("transactional_db")
EMPTY = "(no message content"


def _end_of_agent_events(session_id: str) -> list[StoredEvent]:
    events = StoredEvent.objects.filter(session__session_id=session_id).order_by("pk")
    return [e for e in events if (e.data.get("actions") or {}).get("end_of_agent")]


def test_a_finished_conversation_shows_no_empty_bubbles_and_the_api_keeps_adks_events(seeded):  # noqa: F811
    session = AdkSession.objects.get(session_id="demo-train")
    assert _end_of_agent_events("demo-train"), "the demo agent's run stores ADK's end_of_agent events"
    page = _page(_as("requester"), f"/sessions/{session.pk}/")
    assert "Done: I reimbursed $350.00" in page
    assert EMPTY not in page
    ticket = PendingCall.objects.get(session=session)
    assert EMPTY not in _page(_as("approver"), f"/tickets/{ticket.pk}/")
    # The ADK-shaped API serves every stored event, the markers included (clients see what ADK's server sends).
    api = _as("requester").get(f"/api/adk/apps/{session.app_name}/users/requester/sessions/{session.session_id}")
    assert api.status_code == 200
    assert sum(1 for e in api.json()["events"] if (e.get("actions") or {}).get("endOfAgent")) == len(
        _end_of_agent_events("demo-train")
    )


def _stored(session, **event) -> StoredEvent:
    ev = Event(author="reimbursement_agent", invocation_id="e-1", **event)
    return StoredEvent.objects.create(
        session=session, event_id=ev.id, author=ev.author, timestamp=ev.timestamp, data=event_to_json(ev)
    )


def _card(stored: StoredEvent) -> str:
    html = render_to_string("agents_app/partials/event.html", {"event": stored})
    return re.sub(r"\s+", " ", html).strip()


def test_only_events_with_nothing_to_read_are_left_out(demo):
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")
    assert _card(_stored(session, actions=EventActions(end_of_agent=True))) == ""
    assert _card(_stored(session, actions=EventActions(agent_state={"step": 1}))) == ""
    assert "state updated" in _card(_stored(session, actions=EventActions(state_delta={"k": 1})))
    assert "boom" in _card(_stored(session, error_code="X", error_message="boom"))


async def test_a_marker_is_not_pushed_to_an_open_page_as_a_bubble(demo):
    from asgiref.sync import sync_to_async

    session = await sync_to_async(services.session_create)(app_name="reimbursement_agent", user_id="requester")
    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/sessions/{session.pk}/")
    comm.scope["user"] = demo["requester"]
    assert (await comm.connect())[0]
    await comm.receive_from()  # the catch-up
    marker = await sync_to_async(_stored)(session, actions=EventActions(end_of_agent=True))
    text = await sync_to_async(_stored)(session, content={"role": "model", "parts": [{"text": "after it"}]})
    for stored in (marker, text):
        await sync_to_async(fanout.publish_event)(session_pk=session.pk, event_pk=stored.pk, stored=stored)
    frames = []
    while not await comm.receive_nothing(timeout=0.3):
        frames.append(await comm.receive_from())
    assert any("after it" in f for f in frames), frames
    assert not any(marker.event_id in f or EMPTY in f for f in frames), frames
    await comm.disconnect()
