"""Four-eyes keeps off a ticket whoever asked the agent for it, not only the conversation's owner. Django
staff read and write every user's conversations (docs/API.md): a staff member in `treasury` who asked
transfer_agent, in the requester's conversation, for "transfer $5000 to Sam" confirmed that transfer
themselves (201, approved, transferred) under the demo's "Treasury transfers" (four-eyes), where the
ticket's requester is the conversation's user and was the only one four-eyes asked about. Now anyone
who sent a message in the ticket's conversation is refused (403 naming four-eyes) wherever they decide,
their held approvals do not count toward a quorum, and they are not among its deciders (no email)."""

from __future__ import annotations

import httpx
from django.contrib.auth.models import Group
from django.db import transaction
from django.test import Client
from google.genai import types

from agents_app import services as agent_services
from agents_app.models import Turn
from approvals.models import PendingCall, Response
from approvals.permissions import decide_refusal, decides_q
from approvals.selectors import ticket_deciders
from tests.approvals.policy_helpers import open_ticket, person, team
from tests.approvals_factories import asks, session_for, staff
from tests.live_server import long_running_call, text_message

pytest_plugins = ["tests.conftest_live"]

BIG = {"purpose": "laptop", "amount": 2500.0}  # the demo's "Large reimbursements": finance, 2 of N, four-eyes


def _text(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def test_staff_who_asked_for_a_transfer_in_a_requesters_conversation_may_not_confirm_it(
    demo, worker, adk_client, api_token
):
    sam = staff("sam", "treasury")
    adk_client(sam)  # the live server
    base = adk_client(demo["requester"]).http.base_url
    as_sam = httpx.Client(base_url=base, headers=api_token(sam), timeout=60)
    created = as_sam.post("/api/adk/apps/transfer_agent/users/requester/sessions")
    assert created.status_code == 200, created.text
    body = {
        "appName": "transfer_agent",
        "userId": "requester",
        "sessionId": created.json()["id"],
        "newMessage": text_message("transfer $5000 to Sam"),
    }
    asked = as_sam.post("/api/adk/run", json=body)
    assert asked.status_code == 200, asked.text
    ticket = PendingCall.objects.get(call_id=long_running_call(asked.json())["id"])
    assert (ticket.requester, ticket.policy_name, ticket.four_eyes) == ("requester", "Treasury transfers", True)

    r = as_sam.post(f"/api/pending-calls/{ticket.pk}/approve", json={})
    assert r.status_code == 403, r.text
    assert (
        "four-eyes: you asked the agent in this conversation before it opened this ticket (for requester), so"
        in r.json()["detail"]
    ), r.text
    ticket.refresh_from_db()
    assert ticket.is_open and not Response.objects.filter(pending_call=ticket).exists()
    assert sam not in ticket_deciders(ticket=ticket)  # not emailed a one-tap link to confirm it

    browser = Client()
    browser.force_login(sam)
    page = browser.get(f"/tickets/{ticket.pk}/")
    assert page.status_code == 200 and "four-eyes: you asked the agent" in page.content.decode()

    approver = httpx.Client(base_url=base, headers=api_token(demo["approver"]), timeout=60)
    ok = approver.post(f"/api/pending-calls/{ticket.pk}/approve", json={})
    assert ok.status_code == 201 and ok.json()["final"] is True, ok.text


def test_an_askers_held_approval_does_not_count_toward_the_quorum(demo):
    finance = Group.objects.get(name="finance")
    sam = staff("sam", "finance")
    fay = person("fay", finance)
    session = session_for()
    asks(sam, session)  # before the ticket opened: sam asked for what the agent paused on
    ticket = open_ticket(session=session, args=BIG)
    assert ticket.four_eyes and ticket.required_approvals == 2
    held = Response.objects.create(
        pending_call=ticket,
        action="approve",
        payload={},
        final=False,
        actor=sam,
        actor_username="sam",
        args_hash=ticket.args_hash,
    )
    assert not Response.objects.filter(pk=held.pk).filter(decides_q()).exists()
    assert decide_refusal(sam, PendingCall.objects.get(pk=ticket.pk)).startswith("four-eyes: you asked")

    c = Client()
    c.force_login(fay)
    first = c.post(f"/api/pending-calls/{ticket.pk}/approve", {}, content_type="application/json")
    assert first.status_code == 201 and first.json()["final"] is False, first.content  # 1 of 2: sam's not counted
    assert [a["who"] for a in c.get(f"/api/pending-calls/{ticket.pk}").json()["lapsedApprovals"]] == ["sam"]


def test_a_message_written_after_the_ticket_opened_does_not_make_its_writer_an_asker(demo):
    """The askers of a ticket are fixed when it opens: those whose messages led to it. An approver of a
    2-of-N four-eyes ticket who approved it, then wrote in the conversation (a question to the agent, a
    note), became an "asker" of it: their approval stopped counting, so the second approver's approval
    was held as 1 of 2 and the ticket waited for a third, and the approver could no longer decide it."""
    finance = Group.objects.get(name="finance")
    sam, fay = staff("sam", "finance"), person("fay", finance)
    session = session_for()
    ticket = open_ticket(session=session, args=BIG)
    assert ticket.four_eyes and ticket.required_approvals == 2
    url = f"/api/pending-calls/{ticket.pk}"
    as_sam, as_fay = Client(), Client()
    as_sam.force_login(sam)
    as_fay.force_login(fay)
    first = as_sam.post(url + "/approve", {}, content_type="application/json")
    assert first.status_code == 201 and first.json()["final"] is False, first.content
    asks(sam, session)  # after the ticket opened: not what it pauses on

    second = as_fay.post(url + "/approve", {}, content_type="application/json")
    assert second.status_code == 201 and second.json()["final"] is True, second.content  # 2 of 2: the quorum
    ticket = PendingCall.objects.get(pk=ticket.pk)
    assert (ticket.status, ticket.closed_by) == ("approved", fay)
    assert [a["who"] for a in as_fay.get(url).json()["approvals"]] == ["sam", "fay"]
    assert decide_refusal(sam, ticket) is None  # the rule the count read (decides_q) says so too
    assert Response.objects.filter(pending_call=ticket, actor=sam).filter(decides_q()).exists()


def test_who_asked_before_a_ticket_opened_stays_off_it_and_a_later_writer_is_among_its_deciders(demo):
    sam, fay = staff("sam", "finance"), staff("fay", "finance")
    session = session_for()
    asks(sam, session)
    ticket = open_ticket(session=session, args=BIG)
    asks(fay, session)
    ticket = PendingCall.objects.get(pk=ticket.pk)
    assert decide_refusal(sam, ticket).startswith("four-eyes: you asked") and decide_refusal(fay, ticket) is None
    deciders = ticket_deciders(ticket=ticket)
    assert sam not in deciders and fay in deciders


def test_an_answer_to_a_ticket_does_not_make_its_giver_an_asker(demo):
    """Only messages count: the approver whose answer resumed the agent did not ask for what it asks next."""
    session = session_for()
    ticket = open_ticket(session=session, args=BIG)
    answer = types.Content(role="user", parts=[types.Part.from_function_response(name="y", response={})])
    with transaction.atomic():
        agent_services.turn_add(session=session, content=answer, actor=demo["approver"], enqueue=False)
    assert Turn.objects.get(session=session).kind == Turn.Kind.FUNCTION_RESPONSE
    assert decide_refusal(demo["approver"], PendingCall.objects.get(pk=ticket.pk)) is None


def test_without_four_eyes_an_asker_decides_as_before(demo):
    sam = staff("sam", "approvers")
    session = session_for()
    asks(sam, session)
    ticket = open_ticket(session=session, args={"purpose": "meals", "amount": 200.0})
    assert not ticket.four_eyes and decide_refusal(sam, ticket) is None
    assert team("finance") and sam in ticket_deciders(ticket=ticket)
