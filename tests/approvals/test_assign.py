"""Assign to me / Unassign on the ticket page: approvers say who is on a ticket; the inbox shows
it (and "mine" finds it); nothing reaches the agent."""

from __future__ import annotations

from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.test import Client

from agents_app.models import Turn
from approvals import services
from approvals.models import PendingCall, Response
from approvals.routing import websocket_urlpatterns
from tests.approvals_factories import ticket


def _client(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


def test_approver_assigns_a_ticket_to_themself_and_gives_it_back(demo):
    call = ticket()
    approver = _client(demo["approver"])
    page = approver.get(f"/tickets/{call.pk}/").content.decode()
    assert "Nobody is assigned." in page and ">Assign to me</button>" in page

    r = approver.post(f"/tickets/{call.pk}/assign/", {"assign": "me"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    html = r.content.decode()
    assert (
        "Assigned to you." in html and "Assigned to <strong>approver</strong>" in html and ">Unassign</button>" in html
    )
    assert PendingCall.objects.get(pk=call.pk).assigned_to == demo["approver"]
    inbox = approver.get("/?mine=on").content.decode()
    assert f'id="pending-call-{call.pk}"' in inbox and "· approver" in inbox
    assert f'id="pending-call-{call.pk}"' not in _client(demo["admin"]).get("/?mine=on").content.decode()

    r = approver.post(f"/tickets/{call.pk}/assign/", {"assign": "none"})
    assert r.status_code == 302
    assert PendingCall.objects.get(pk=call.pk).assigned_to is None
    assert not Turn.objects.exists() and not Response.objects.exists()  # the agent hears nothing of it


def test_only_approvers_assign_and_only_open_tickets(demo):
    call = ticket()
    requester = _client(demo["requester"])
    assert ">Assign to me</button>" not in requester.get(f"/tickets/{call.pk}/").content.decode()
    assert requester.post(f"/tickets/{call.pk}/assign/", {"assign": "me"}).status_code == 403
    assert _client(demo["observer"]).post(f"/tickets/{call.pk}/assign/", {"assign": "me"}).status_code == 403
    assert PendingCall.objects.get(pk=call.pk).assigned_to is None

    services.ticket_reject(ticket=call, actor=demo["approver"], reason="no")
    r = _client(demo["admin"]).post(f"/tickets/{call.pk}/assign/", {"assign": "me"})
    assert r.status_code == 409 and "already closed" in r.content.decode()
    assert PendingCall.objects.get(pk=call.pk).assigned_to is None
    csrf = Client(enforce_csrf_checks=True)
    csrf.force_login(demo["approver"])
    assert csrf.post(f"/tickets/{ticket().pk}/assign/", {"assign": "me"}).status_code == 403


async def test_open_inboxes_see_the_assignee_live(demo, transactional_db):
    call = await sync_to_async(ticket)()
    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/approvals/")
    comm.scope["user"] = demo["admin"]
    assert (await comm.connect())[0]
    await sync_to_async(services.ticket_assign)(ticket=call, actor=demo["approver"], assignee=demo["approver"])
    seen = ""
    while f'id="pending-call-{call.pk}"' not in seen or "· approver" not in seen:
        seen += await comm.receive_from(timeout=5)
    await comm.disconnect()


def test_assign_over_the_api(demo):
    import json

    call = ticket()
    approver = _client(demo["approver"])

    def post(client, body):
        return client.post(f"/api/pending-calls/{call.pk}/assign", json.dumps(body), content_type="application/json")

    r = post(approver, {"assignee": "me"})
    assert r.status_code == 200 and r.json()["assigned_to"] == "approver"
    assert post(approver, {"assignee": "observer"}).status_code == 400
    assert post(approver, {}).status_code == 400
    assert post(_client(demo["requester"]), {"assignee": "me"}).status_code == 403
    assert PendingCall.objects.get(pk=call.pk).assigned_to == demo["approver"]
    r = post(approver, {"assignee": None})
    assert r.status_code == 200 and r.json()["assigned_to"] is None


def test_an_approval_that_waits_for_another_approver_gives_the_ticket_back(demo):
    """A 2-of-N ticket taken, then approved by its assignee (1 of 2): it stayed assigned to them, whose
    approval cannot give the next one, so the inbox showed the others "1 of 2 approvals · approver" and
    the ticket waited on someone who could not move it. Now it is nobody's; "mine" still finds it."""
    from tests.approvals.policy_helpers import open_ticket

    big = open_ticket(args={"purpose": "conference", "amount": 2500.0})
    assert big.required_approvals == 2
    approver = _client(demo["approver"])
    assert approver.post(f"/tickets/{big.pk}/assign/", {"assign": "me"}).status_code == 302
    assert approver.post(f"/tickets/{big.pk}/approve/", {"approve-args_hash": big.args_hash}).status_code == 302
    big.refresh_from_db()
    assert big.is_open and big.assigned_to is None
    other = _client(demo["approver2"])
    page = other.get(f"/tickets/{big.pk}/").content.decode()
    assert "Nobody is assigned." in page and ">Assign to me</button>" in page
    row = other.get("/").content.decode().split(f'id="pending-call-{big.pk}"')[1].split("</tr>")[0]
    assert "1 of 2 approvals" in row and "· approver" not in row
    assert f'id="pending-call-{big.pk}"' in approver.get("/?mine=on").content.decode()  # they answered it
    assert other.post(f"/tickets/{big.pk}/assign/", {"assign": "me"}).status_code == 302
    assert other.post(f"/tickets/{big.pk}/approve/", {"approve-args_hash": big.args_hash}).status_code == 302
    big.refresh_from_db()
    assert big.status == "approved" and big.assigned_to == demo["approver2"]  # a closing one changes nothing


def test_an_approver_whose_approval_counts_is_not_offered_the_ticket_and_may_not_take_it(demo):
    """Since an approval that waits for another approver gives the ticket back, its giver was offered
    "Assign to me" again and could take it (200), though only another approver can move it. Now the page
    says why it is not theirs to take, and the page's and the API's assign refuse 409, nothing changed."""
    import json

    from tests.approvals.policy_helpers import open_ticket

    big = open_ticket(args={"purpose": "conference", "amount": 2500.0})
    approver = _client(demo["approver"])
    assert approver.post(f"/tickets/{big.pk}/approve/", {"approve-args_hash": big.args_hash}).status_code == 302
    page = approver.get(f"/tickets/{big.pk}/").content.decode()
    assert ">Assign to me</button>" not in page and 'id="take-refused">Not yours to take: your approval counts' in page
    r = approver.post(f"/tickets/{big.pk}/assign/", {"assign": "me"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 409, r.status_code
    assert f"You may not take ticket #{big.pk}: your approval counts (1 of 2)" in r.content.decode()
    api = f"/api/pending-calls/{big.pk}/assign"
    r = approver.post(api, json.dumps({"assignee": "me"}), content_type="application/json")
    assert r.status_code == 409 and "another approver gives the next one" in r.json()["detail"], r.content
    big.refresh_from_db()
    assert big.assigned_to is None and Response.objects.filter(pending_call=big).count() == 1
    other = _client(demo["approver2"])
    assert ">Assign to me</button>" in other.get(f"/tickets/{big.pk}/").content.decode()
    assert other.post(api, json.dumps({"assignee": "me"}), content_type="application/json").status_code == 200


def test_taking_a_single_approval_ticket_reads_no_approvals(demo):
    """Whose approval counts matters only on a ticket that needs several: taking (or giving back) one that
    needs one read its responses all the same. Now the one rule (selectors.own_approval_counts) asks
    nothing there; on a quorum ticket it still reads them, and still refuses a counted approver."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    call = ticket()
    assert call.required_approvals == 1
    with CaptureQueriesContext(connection) as queries:
        services.ticket_assign(ticket=call, actor=demo["approver"], assignee=demo["approver"])
    read = [q["sql"] for q in queries.captured_queries if Response._meta.db_table in q["sql"]]
    assert read == [], read
    assert PendingCall.objects.get(pk=call.pk).assigned_to == demo["approver"]
