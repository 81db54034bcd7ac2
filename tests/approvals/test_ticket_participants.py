"""Who takes part in which ticket (approvals.models.TicketParticipant, the inbox's "mine" reads it) stays
equal to what it is derived from (assigned to, closed by, a response of theirs; the ticket's open state
and created_at) after every path that writes a response, assigns, or changes a ticket's state: the
pages, the API, bulk decisions, one-tap links, policies and grants, quorums, expiry, cancelling a
deleted conversation's tickets, an aborted call, the ticket hook's SQL, a deleted user, and bare
ORM/SQL writes. The triggers of migration 0010 keep it; each test breaks if its kind of write is missed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.test import Client
from django.utils import timezone

from agents_app.session_service import DjangoSessionService
from agents_app.tokens import token_create
from approvals import deadlines, services
from approvals.models import PendingCall, Response, TicketParticipant
from notifications import links
from tests.approvals.participant_helpers import exact, pairs, part
from tests.approvals.policy_helpers import open_ticket, policy
from tests.approvals.test_ticket_hook import _call as hook_call
from tests.approvals.test_ticket_hook import _response as hook_response
from tests.approvals_factories import session_for, ticket


def _as(user) -> Client:  # noqa: ANN001
    c = Client()
    c.force_login(user)
    return c


def test_a_decision_on_the_page_makes_the_decider_part_of_the_closed_ticket(demo):
    me, call = demo["approver"], ticket()
    assert exact() == set()
    r = _as(me).post(f"/tickets/{call.pk}/approve/", {"approve-comment": "ok"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    assert pairs(exact()) == {part(call, me): False}


def test_an_update_keeps_its_sender_on_the_open_ticket_until_another_closes_it(demo):
    me, other, call = demo["approver"], demo["admin"], ticket()
    r = _as(me).post(f"/tickets/{call.pk}/update/", {"update-message": "looking"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    assert pairs(exact()) == {part(call, me): True}
    services.ticket_reject(ticket=PendingCall.objects.get(pk=call.pk), actor=other, reason="no")
    assert pairs(exact()) == {part(call, me): False, part(call, other): False}  # my row closed with it


def test_api_responses_and_decisions_as_their_token_holder(demo):
    me, call, later = demo["approver"], ticket(), ticket()
    _, key = token_create(user=me, name="test")
    api = Client(HTTP_AUTHORIZATION=f"Token {key}")
    body = {"response": {"status": "working"}, "final": False}
    assert api.post(f"/api/pending-calls/{call.pk}/responses", body, content_type="application/json").status_code < 300
    assert pairs(exact()) == {part(call, me): True}
    assert api.post(f"/api/pending-calls/{later.pk}/approve", {}, content_type="application/json").status_code < 300
    assert pairs(exact()) == {part(call, me): True, part(later, me): False}


def test_assigning_and_giving_back_and_a_response_that_keeps_me_on_it(demo):
    me, page, call = demo["approver"], _as(demo["approver"]), ticket()
    assert page.post(f"/tickets/{call.pk}/assign/", {"assign": "me"}).status_code in (200, 302)
    assert pairs(exact()) == {part(call, me): True}
    page.post(f"/tickets/{call.pk}/assign/", {"assign": "none"})
    assert PendingCall.objects.get(pk=call.pk).assigned_to is None and exact() == set()  # no part left
    page.post(f"/tickets/{call.pk}/assign/", {"assign": "me"})
    services.ticket_update(ticket=call, actor=me, message="on it")
    page.post(f"/tickets/{call.pk}/assign/", {"assign": "none"})
    assert pairs(exact()) == {part(call, me): True}  # still mine: my update is on it


def test_bulk_decisions_and_one_tap_links(demo):
    me = demo["approver"]
    first, second, linked = ticket(), ticket(), ticket()
    page = _as(me)
    r = page.post("/inbox/bulk/", {"action": "approve", "ticket": [first.pk, second.pk], "confirm": "1"})
    assert r.status_code == 200
    link = links.link_create(ticket=linked, user=demo["admin"])
    assert Client().post(links.link_url(link, "approve")).status_code == 200
    want = {part(first, me): False, part(second, me): False, part(linked, demo["admin"]): False}
    assert pairs(exact()) == want


def test_a_quorum_ticket_open_after_one_approval_closed_after_the_second(demo):
    policy("two", tool="ask_for_approval", required_approvals=2)
    call, one, two = open_ticket(), demo["approver"], demo["admin"]
    services.ticket_approve(ticket=call, actor=one)
    assert pairs(exact()) == {part(call, one): True}
    services.ticket_approve(ticket=PendingCall.objects.get(pk=call.pk), actor=two)
    assert pairs(exact()) == {part(call, one): False, part(call, two): False}


def test_a_policy_decision_and_expiry_close_the_rows_of_those_who_took_part(demo):
    me = demo["approver"]
    policy("quick", tool="ask_for_approval", due_in_seconds=60)
    call = open_ticket()
    services.ticket_update(ticket=call, actor=me, message="checking")
    PendingCall.objects.filter(pk=call.pk).update(due_at=timezone.now() - timedelta(seconds=1))
    assert deadlines.deadlines_sweep()["expired"] == 1
    assert PendingCall.objects.get(pk=call.pk).status == "expired"
    assert pairs(exact()) == {part(call, me): False}
    policy("auto", tool="petty_cash", auto_decision="approve")
    decided = open_ticket(tool_name="petty_cash")
    assert decided.status == "approved" and decided.closed_by is None
    assert pairs(exact()) == {part(call, me): False}  # decided by no one: nobody's


def test_a_deleted_conversations_tickets_cancelled_and_an_aborted_call(demo):
    me = demo["approver"]
    session = session_for()
    call = ticket(session=session)
    services.ticket_update(ticket=call, actor=me, message="checking")
    services.tickets_cancel_archived(session=session, by="admin")
    assert pairs(exact()) == {part(call, me): False}
    aborted = ticket(assigned_to=me)
    aborted.status, aborted.closed_at = PendingCall.Status.CANCELLED, timezone.now()
    aborted.save()  # services.tickets_record_event: a full save
    assert pairs(exact()) == {part(call, me): False, part(aborted, me): False}


@pytest.mark.django_db(transaction=True)
async def test_tickets_the_ticket_hook_opens_and_tickets_inserted_closed(demo):
    """The session store's append opens the ticket (on PostgreSQL in the append's own SQL, the ticket
    rider) and records the call's first response (an UPDATE of the ticket): nobody's yet."""
    me, admin = demo["approver"], demo["admin"]
    service = DjangoSessionService()
    session = await service.create_session(app_name="reimbursement_agent", user_id="requester")
    await service.append_event(session, hook_call("lr-1", "ask_for_approval", long_running=True))
    await service.append_event(session, hook_response("lr-1", "ask_for_approval", {"status": "pending"}))
    opened = await PendingCall.objects.aget(call_id="lr-1")
    assert opened.initial_response == {"status": "pending"} and await sync_to_async(exact)() == set()
    await sync_to_async(services.ticket_approve)(ticket=opened, actor=me)
    inserted = await sync_to_async(ticket)(status="approved", closed_by=admin, assigned_to=me, closed_at=timezone.now())
    want = {part(opened, me): False, part(inserted, admin): False, part(inserted, me): False}
    assert pairs(await sync_to_async(exact)()) == want
    await sync_to_async(connections.close_all)()


def test_bare_orm_and_sql_writes_to_a_ticket(demo):
    me, other = demo["approver"], demo["admin"]
    call = ticket(assigned_to=me)
    PendingCall.objects.filter(pk=call.pk).update(assigned_to=other)
    assert pairs(exact()) == {part(call, other): True}
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE approvals_pendingcall SET status = 'approved', closed_by_id = %s WHERE id = %s", [me.pk, call.pk]
        )
    assert pairs(exact()) == {part(call, other): False, part(call, me): False}
    PendingCall.objects.filter(pk=call.pk).update(status="pending", closed_by=None, created_at=timezone.now())
    assert pairs(exact()) == {part(call, other): True}  # reopened, its key moved with it
    TicketParticipant.objects.all().delete()  # what a test's cleanup may do; then the ticket goes
    Response.objects.filter(pending_call=call).delete()
    call.delete()
    assert exact() == set()


def test_a_deleted_person_leaves_the_record_and_no_part(demo):
    gone = get_user_model().objects.create_user("gone", password="gone-pw")
    call, kept = ticket(assigned_to=gone), ticket()
    Response.objects.create(pending_call=kept, action="update", payload={}, final=False, actor=gone)
    assert len(exact()) == 2
    gone.delete()
    assert exact() == set() and Response.objects.get(pending_call=kept).actor is None
    assert PendingCall.objects.get(pk=call.pk).assigned_to is None
