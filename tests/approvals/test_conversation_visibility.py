"""Who reads a conversation, now that policies route tickets to groups: its requester, observers,
and people who may see every ticket in it (approvers: also conversations without tickets). A
conversation shows its tickets' arguments (calls, the agent's words), so a ticket routed to other
groups hides it, on the page, the list, the sockets, the ticket page's timeline and the API."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.test import Client
from google.adk.events.event import Event
from google.genai import types

from agents_app import fanout
from agents_app.events import session_group
from agents_app.models import StoredEvent
from agents_app.routing import websocket_urlpatterns as conversation_sockets
from agents_app.session_service import event_to_json
from approvals.routing import websocket_urlpatterns as ticket_sockets
from tests.approvals.policy_helpers import open_ticket, person, team
from tests.approvals_factories import session_for

SECRET = {"purpose": "acquisition of Initech", "amount": 4_000_000.0}


def _client(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


def _call_event(session, call_id: str, args: dict) -> StoredEvent:
    call = types.FunctionCall(id=call_id, name="ask_for_approval", args=args)
    ev = Event(
        author="reimbursement_agent",
        content=types.Content(role="model", parts=[types.Part(function_call=call)]),
        long_running_tool_ids={call_id},
    )
    return StoredEvent.objects.create(
        session=session, event_id=ev.id, author=ev.author, timestamp=ev.timestamp, data=event_to_json(ev)
    )


@pytest.fixture
def world(demo):
    """A conversation with a small ticket (any approver) and a secret one routed to finance."""
    finance_member = person("fiona", approver=True)
    finance_only = person("frank")  # in finance, not in the approvers role
    team("finance", finance_member, finance_only)  # the demo's "Large reimbursements" (over $1000) policy
    session = session_for()
    meals = {"purpose": "meals", "amount": 20.0}
    small = open_ticket(session=session, call_id="c-small", args=meals, event=_call_event(session, "c-small", meals))
    only_small = session_for()
    alone = open_ticket(session=only_small, args={"purpose": "taxi", "amount": 30.0})
    secret_event = _call_event(session, "c-big", SECRET)
    secret = open_ticket(session=session, call_id="c-big", args=SECRET, event=secret_event)
    assert secret.routed and not small.routed
    only_finance = session_for()
    open_ticket(session=only_finance, args=SECRET)
    return {
        "only_finance": only_finance,
        "session": session,
        "only_small": only_small,
        "small": small,
        "alone": alone,
        "secret": secret,
        "outsider": person("olga", approver=True),  # an approver, not in finance
        "fiona": finance_member,
        "frank": finance_only,
        **demo,
    }


def test_an_approver_outside_the_ticket_groups_cannot_open_or_list_the_conversation(world):
    outsider, session = world["outsider"], world["session"]
    c = _client(outsider)
    r = c.get(f"/sessions/{session.pk}/")
    assert r.status_code == 404 and b"Initech" not in r.content
    listing = c.get("/sessions/").content.decode()
    assert f'id="session-row-{session.pk}"' not in listing
    assert f'id="session-row-{world["only_small"].pk}"' in listing, "a conversation of tickets they may see"
    r = c.get(f"/sessions/{session.pk}/events/?before=999999")  # "Load earlier events"
    assert r.status_code == 404 and b"Initech" not in r.content
    assert c.get(f"/sessions/{session.pk}/messages/").status_code == 405  # GET: still nothing leaks
    assert c.post(f"/sessions/{session.pk}/messages/", {"text": "hi"}).status_code == 404


@pytest.mark.parametrize("who", ["fiona", "requester", "observer", "admin"])
def test_the_requester_observers_and_the_ticket_groups_read_it(world, who):
    r = _client(world[who]).get(f"/sessions/{world['session'].pk}/")
    assert r.status_code == 200 and "Initech" in r.content.decode()


def test_a_group_member_without_the_approvers_role_sees_only_conversations_of_their_tickets(world):
    from agents_app.visibility import session_visible

    assert session_visible(world["frank"], world["only_finance"])
    assert _client(world["frank"]).get(f"/sessions/{world['only_finance'].pk}/").status_code == 200
    assert not session_visible(world["frank"], world["session"]), "its small ticket is for the approvers role"
    assert not session_visible(world["frank"], world["only_small"])
    assert not session_visible(world["frank"], session_for()), "nor conversations without tickets"
    assert session_visible(world["outsider"], session_for()), "approvers: conversations without tickets, as before"


def test_the_ticket_page_of_the_small_ticket_does_not_show_the_secret_one(world):
    c = _client(world["outsider"])
    r = c.get(f"/tickets/{world['small'].pk}/")
    html = r.content.decode()
    assert r.status_code == 200 and "meals" in html
    assert "Initech" not in html and "4,000,000" not in html and 'id="conversation-hidden"' in html
    assert f'href="/sessions/{world["session"].pk}/"' not in html
    assert c.get(f"/tickets/{world['secret'].pk}/").status_code == 404
    # Fiona sees both tickets: the conversation is shown on the ticket page.
    html = _client(world["fiona"]).get(f"/tickets/{world['small'].pk}/").content.decode()
    assert "Initech" in html and 'id="conversation-hidden"' not in html


def test_the_api_refuses_an_approver_someone_elses_session(world):
    s = world["session"]
    r = _client(world["outsider"]).get(f"/api/adk/apps/{s.app_name}/users/{s.user_id}/sessions/{s.session_id}")
    assert r.status_code == 403 and b"Initech" not in r.content
    r = _client(world["outsider"]).get(f"/api/pending-calls/{world['secret'].pk}")
    assert r.status_code == 404 and b"Initech" not in r.content


# -- sockets -------------------------------------------------------------------------------------
conversation_app = URLRouter(conversation_sockets)
ticket_app = URLRouter(ticket_sockets)


async def _connect(app, path: str, user) -> tuple[WebsocketCommunicator, bool]:
    comm = WebsocketCommunicator(app, path)
    comm.scope["user"] = user
    connected, _ = await comm.connect()
    return comm, connected


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("transport")
async def test_the_conversation_socket_refuses_an_outsider_and_closes_when_a_ticket_goes_elsewhere(demo):
    w = await sync_to_async(_world_for_sockets)(demo)
    _, connected = await _connect(conversation_app, f"/ws/sessions/{w['session'].pk}/", w["outsider"])
    assert not connected
    # A conversation the outsider may read, until a ticket routed to finance opens in it.
    comm, connected = await _connect(conversation_app, f"/ws/sessions/{w['only_small'].pk}/?after=0", w["outsider"])
    assert connected
    await comm.receive_from()  # status (and the list)
    event = await sync_to_async(_call_event)(w["only_small"], "c-late", SECRET)
    await sync_to_async(open_ticket)(session=w["only_small"], call_id="c-late", args=SECRET, event=event)
    await sync_to_async(fanout.publish_event)(session_pk=w["only_small"].pk, event_pk=event.pk)
    out = await comm.receive_output(timeout=2)
    assert out["type"] == "websocket.close", out  # closed before the event's card (Initech) is sent
    await fanout.apublish_partial(
        session_pk=w["only_small"].pk, event_id="x", author="a", text="Initech", turn_id=0, event={}
    )
    assert await comm.receive_nothing(timeout=0.3)


@pytest.mark.django_db(transaction=True)
async def test_the_ticket_socket_pushes_no_events_nor_cards_of_tickets_the_viewer_may_not_see(demo):
    w = await sync_to_async(_world_for_sockets)(demo)
    _, connected = await _connect(ticket_app, f"/ws/tickets/{w['secret'].pk}/", w["outsider"])
    assert not connected
    comm, connected = await _connect(ticket_app, f"/ws/tickets/{w['small'].pk}/?after=0", w["outsider"])
    assert connected
    assert await comm.receive_nothing(timeout=0.3), "no catch-up of the conversation's events"
    group = session_group(w["session"].pk)
    await get_channel_layer().group_send(group, {"type": "session.event", "event_pk": w["secret_event"].pk})
    await get_channel_layer().group_send(group, {"type": "ticket.changed", "ticket_id": w["secret"].pk})
    html = await comm.receive_from()  # the open count in the menu bar, nothing of the ticket
    assert html.startswith('<span id="nav-open-count"') and "conv-ticket-" not in html and "Initech" not in html
    assert await comm.receive_nothing(timeout=0.3)
    await get_channel_layer().group_send(group, {"type": "ticket.changed", "ticket_id": w["small"].pk})
    html = await comm.receive_from()
    assert 'id="ticket-status"' in html and "Initech" not in html and "conv-ticket-" not in html
    await comm.disconnect()
    # Fiona, who may see both tickets, gets the conversation's events on the small ticket's page.
    comm, connected = await _connect(ticket_app, f"/ws/tickets/{w['small'].pk}/?after=0", w["fiona"])
    assert connected and "Initech" in await comm.receive_from()
    await comm.disconnect()


def _world_for_sockets(demo) -> dict:
    fiona = person("fiona", approver=True)
    team("finance", fiona)
    session, only_small = session_for(), session_for()
    small = open_ticket(session=session, call_id="c-small", event=_call_event(session, "c-small", {"amount": 20.0}))
    open_ticket(session=only_small, args={"purpose": "taxi", "amount": 30.0})
    secret_event = _call_event(session, "c-big", SECRET)
    secret = open_ticket(session=session, call_id="c-big", args=SECRET, event=secret_event)
    outsider = person("olga", approver=True)
    return {
        "session": session,
        "only_small": only_small,
        "small": small,
        "secret": secret,
        "secret_event": secret_event,
        "outsider": outsider,
        "fiona": fiona,
    }
