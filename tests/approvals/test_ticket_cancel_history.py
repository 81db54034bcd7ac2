"""A ticket closed without an answer says why in its history, and on a quorum ticket which held
approvals it had: an agent's aborted run (a function response with INVOCATION_ABORTED) cancelled its
ticket with no history entry at all, so its page said only "Cancelled", and approvals held on a quorum
ticket that ended that way (or by its conversation's deletion) were recorded nowhere as having been
held when it closed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from google.adk.events.event import Event
from google.genai import types

from agents_app.session_service import DjangoSessionService
from approvals import deadlines, services
from approvals.models import PendingCall, Response, TicketActivity
from tests.approvals.policy_helpers import open_ticket
from tests.approvals.test_escalation_recorded_at_decision import _escalating

pytestmark = pytest.mark.django_db(transaction=True)
APP, USER = "reimbursement_agent", "requester"
BIG = {"purpose": "conference", "amount": 2500.0}  # the demo's "Large reimbursements": 2 approvals


def _event(part: types.Part, **fields: object) -> Event:
    return Event(author=APP, invocation_id="inv", content=types.Content(role="model", parts=[part]), **fields)


def _opened(args: dict) -> tuple[DjangoSessionService, object, PendingCall]:
    """A ticket as an agent's pause opens it, through the session store."""
    service = DjangoSessionService()
    session = service.create_session_sync(app_name=APP, user_id=USER)
    call = types.FunctionCall(id="lr-1", name="ask_for_approval", args=args)
    service._store_event(session, _event(types.Part(function_call=call), long_running_tool_ids={"lr-1"}), None)
    return service, session, PendingCall.objects.get(call_id="lr-1")


def _abort(service: DjangoSessionService, session: object) -> PendingCall:
    answer = types.FunctionResponse(id="lr-1", name="ask_for_approval", response={"error": "INVOCATION_ABORTED"})
    service._store_event(session, _event(types.Part(function_response=answer)), None)
    return PendingCall.objects.get(call_id="lr-1")


def _page(user, ticket: PendingCall) -> str:
    client = Client()
    client.force_login(user)
    r = client.get(f"/tickets/{ticket.pk}/")
    assert r.status_code == 200
    return r.content.decode()


def test_an_aborted_run_cancels_its_ticket_saying_why(demo):
    service, session, ticket = _opened({"purpose": "meals", "amount": 20.0})
    ticket = _abort(service, session)
    assert ticket.status == PendingCall.Status.CANCELLED
    [entry] = TicketActivity.objects.filter(ticket=ticket)
    assert entry.kind == "cancelled" and "its run was aborted" in entry.message and entry.detail is None
    html = _page(demo["approver"], ticket)
    assert "the agent stopped waiting for this answer (its run was aborted)" in html
    assert "conversation deleted" not in html  # the kind's label no longer names one cause


def test_an_aborted_quorum_ticket_records_the_approvals_it_held(demo):
    service, session, ticket = _opened(BIG)
    assert ticket.required_approvals == 2
    services.ticket_approve(ticket=ticket, actor=demo["approver"], args_hash=ticket.args_hash)
    held = Response.objects.get(pending_call=ticket, action="approve")
    ticket = _abort(service, session)
    assert ticket.status == PendingCall.Status.CANCELLED
    [entry] = TicketActivity.objects.filter(ticket=ticket, kind="cancelled")
    assert entry.detail == {"counted": [held.pk]}
    assert "It had 1 of the 2 approvals it needed; they decided nothing." in entry.message
    assert "It had 1 of the 2 approvals it needed" in _page(demo["approver2"], ticket)


def test_a_deleted_conversations_quorum_ticket_records_the_approvals_it_held(demo):
    _, session, ticket = _opened(BIG)
    services.ticket_approve(ticket=ticket, actor=demo["approver"], args_hash=ticket.args_hash)
    held = Response.objects.get(pending_call=ticket, action="approve")
    assert services.tickets_cancel_archived(session=ticket.session, by="admin") == 1
    [entry] = TicketActivity.objects.filter(ticket=ticket, kind="cancelled")
    assert entry.message.startswith("Cancelled: its conversation was deleted by admin")
    assert entry.detail == {"counted": [held.pk]} and "1 of the 2 approvals" in entry.message


def test_a_ticket_cancelled_after_its_escalation_time_records_the_escalation_first(demo):
    """As a decision does (approvals.escalations): the sweep skips closed tickets, so a cancel after the
    escalation time and before the sweep left no "Escalated" entry and no escalated_at."""
    _escalating()  # a policy: to ops after 30 minutes
    service, session, aborted = _opened({"purpose": "meals", "amount": 200.0})
    deleted = open_ticket(args={"purpose": "meals", "amount": 200.0})
    past = timezone.now() - timedelta(minutes=1)
    PendingCall.objects.filter(pk__in=[aborted.pk, deleted.pk]).update(escalate_at=past)
    _abort(service, session)
    assert services.tickets_cancel_archived(session=deleted.session, by="admin") == 1
    assert deadlines.deadlines_sweep()["escalated"] == 0
    for ticket in (aborted, deleted):
        ticket.refresh_from_db()
        assert ticket.status == "cancelled" and ticket.escalated_at == past
        kinds = list(TicketActivity.objects.filter(ticket=ticket).values_list("kind", flat=True))
        assert kinds[-2:] == ["escalated", "cancelled"], kinds


def test_the_api_and_the_page_read_a_cancelled_quorum_tickets_record_of_its_held_approvals(api, demo):
    """The cancel records which held approvals would have counted (a2add02), but the API said
    `approvalsRecorded: false` and listed every approval of its arguments as counting, a lapsed one too
    (the ticket page: "2 approvals given (2 required) ... was not recorded"). Now both read the record:
    the held approval that counted, the lapsed one apart, `approvalsRecorded: true`, the list as the detail."""
    from django.contrib.auth.models import Group

    service, session, ticket = _opened(BIG)
    services.ticket_approve(ticket=ticket, actor=demo["approver"], args_hash=ticket.args_hash)
    demo["approver"].groups.remove(Group.objects.get(name="finance"))  # their approval no longer counts
    services.ticket_approve(ticket=ticket, actor=demo["approver2"], args_hash=ticket.args_hash)
    ticket = _abort(service, session)
    assert ticket.status == PendingCall.Status.CANCELLED
    held = Response.objects.get(pending_call=ticket, actor=demo["approver2"])
    [entry] = TicketActivity.objects.filter(ticket=ticket, kind="cancelled")
    assert entry.detail == {"counted": [held.pk]}
    body = api(demo["observer"]).get(f"/api/pending-calls/{ticket.pk}").json()
    shown = (body["approvalsRecorded"], [a["who"] for a in body["approvals"]])
    assert shown == (True, ["approver2"]), body
    assert [a["who"] for a in body["lapsedApprovals"]] == ["approver"]
    listed = api(demo["observer"]).get("/api/pending-calls?status=cancelled").json()["results"]
    (found,) = [t for t in listed if t["id"] == ticket.pk]
    assert (found["approvalsRecorded"], [a["who"] for a in found["approvals"]]) == (True, ["approver2"])
    page = _page(demo["observer"], ticket)
    assert "1 of 2 approvals" in page and "was not recorded" not in page
