"""Numbers typed by people: `str.isdigit()` also says yes to "²" or "①", which `int()` refuses (as it refuses
5,000 digits), and 19 ASCII digits may be past a bigint, which SQLite refuses in a compiled query's
parameters. Each place that reads a number from a request answers such text as it answers any other
non-number (a search that finds no ticket number, a 400 with its message, a socket with no catch-up), never
a 500."""

from __future__ import annotations

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.test import Client

from agents_app import services
from approvals.models import PendingCall
from approvals.routing import websocket_urlpatterns
from tests.approvals_factories import ticket

pytestmark = pytest.mark.django_db(transaction=True)
NOT_ASCII = ["²", "#²", "①", "٣"]  # superscript, circled, Arabic-Indic (int() takes this one)
PAST_BIGINT = [str(2**63), "9" * 19]  # 19 ASCII digits, past a bigint's largest (a compiled query's parameter)
# and more digits than int() reads (4,300; a search that long is a 400)
NOT_NUMBERS = [*NOT_ASCII, *PAST_BIGINT, "9" * 5000]


def _client(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


def test_inbox_and_api_searches_for_digits_that_are_not_ascii_find_by_text_only(demo):
    call = ticket(tool_name="ask_for_approval")
    approver = _client(demo["approver"])
    for term in [*NOT_ASCII, *PAST_BIGINT]:
        page = approver.get("/", {"q": term, "status": "all"})
        assert page.status_code == 200, term
        listed = approver.get("/api/pending-calls", {"q": term, "status": "all"})
        assert listed.status_code == 200, term
        assert listed.json()["results"] == [], term  # not ticket 3 (nor any): no text matches
    found = approver.get("/api/pending-calls", {"q": f"#{call.pk}", "status": "all"}).json()["results"]
    assert [t["id"] for t in found] == [call.pk]  # an ASCII number still finds its ticket
    assert PendingCall.objects.count() == 1


def test_conversation_numbers_that_are_not_ascii_digits_are_refused_with_their_message(demo):
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")
    requester = _client(demo["requester"])
    for raw in NOT_NUMBERS:
        earlier = requester.get(f"/sessions/{session.pk}/events/", {"before": raw})
        assert earlier.status_code == 400 and b"before must be the pk" in earlier.content, raw
        version = requester.get(f"/sessions/{session.pk}/artifacts/chart.png", {"version": raw})
        assert version.status_code == 400 and b"The version must be a number." in version.content, raw


def test_bulk_decisions_refuse_ticket_numbers_that_are_not_ascii_digits(demo):
    call = ticket()
    approver = _client(demo["approver"])
    for raw in NOT_NUMBERS:
        r = approver.post("/inbox/bulk/", {"action": "approve", "ticket": [raw], "confirm": "1"})
        assert r.status_code == 400 and "Not a ticket number" in r.content.decode(), raw
    assert PendingCall.objects.get(pk=call.pk).status == "pending"


async def test_a_ticket_socket_with_a_catch_up_point_that_is_not_a_number_connects_without_one(demo):
    from channels.db import database_sync_to_async

    call = await database_sync_to_async(ticket)()
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/tickets/{call.pk}/?after={'9' * 5000}")
    communicator.scope["user"] = demo["approver"]
    connected, _ = await communicator.connect()
    assert connected
    assert await communicator.receive_nothing(timeout=0.2)  # no catch-up asked: nothing to send
    await communicator.disconnect()
