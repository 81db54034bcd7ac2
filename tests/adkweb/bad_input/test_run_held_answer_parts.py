"""A /run message whose only answer is an approval held for a quorum (1 of 2), with an image beside it: the
approval was recorded and nothing reached the agent, the image included (200, []): the caller was told
nothing of the image, and it never reached the agent, not even once the quorum was reached (that turn
carries the last approval only). Now such a message is refused (409, saying why and what to send), with
nothing recorded; the approval sent alone is held as before."""

from __future__ import annotations

from django.db import transaction
from django.test import Client

from approvals.models import PendingCall, Response
from tests.adkweb.bad_input.sweep import _refusal, counts
from tests.approvals.policy_helpers import open_ticket
from tests.approvals_factories import session_for, staff

BIG = {"purpose": "laptop", "amount": 2500.0}  # the demo's "Large reimbursements": finance, 2 of N
RECEIPT = {"inlineData": {"mimeType": "image/png", "data": "cmVjZWlwdA=="}}


def _run(ticket: PendingCall, *parts: dict) -> dict:
    fr = {"id": ticket.call_id, "name": ticket.call_name, "response": {"status": "approved"}}
    body = {"appName": ticket.app_name, "userId": ticket.requester, "sessionId": ticket.session.session_id}
    return {**body, "newMessage": {"role": "user", "parts": [{"functionResponse": fr}, *parts]}}


def test_a_held_approval_with_an_image_beside_it_is_refused_and_nothing_is_recorded(demo):
    fay = staff("fay", "finance")  # staff: /run in the requester's conversation
    ticket = open_ticket(session=session_for(app_name="reimbursement_agent"), args=BIG, invocation_id="inv-1")
    assert ticket.required_approvals == 2
    client = Client()
    client.force_login(fay)
    with transaction.atomic():
        before = counts()
        r = client.post("/api/adk/run", _run(ticket, RECEIPT), content_type="application/json")
        after = counts()
        transaction.set_rollback(True)
    assert not _refusal("/run a held approval with an image", r, before, after, api=True)
    assert r.status_code == 409, r.content
    assert r.json()["detail"] == (
        f"Ticket #{ticket.pk} needs 2 approvals: your approval would wait for the others, and nothing reaches the "
        "agent until then, so the message's other parts (a file or an image beside the answer) would not reach "
        "it. Send the approval alone, and the other parts with text in a message of their own. Nothing was sent."
    )

    alone = client.post("/api/adk/run", _run(ticket), content_type="application/json")
    assert alone.status_code == 200 and alone.json() == [], alone.content  # held: 1 of 2, no run
    assert list(Response.objects.filter(pending_call=ticket).values_list("final", flat=True)) == [False]
