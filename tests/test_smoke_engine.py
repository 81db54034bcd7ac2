"""The reimbursement seed end to end through the services, with the real in-process worker."""

from agents_app import services
from agents_app.models import StoredEvent, Turn
from approvals import services as approvals
from approvals.models import PendingCall


def _texts(session):
    out = []
    for e in StoredEvent.objects.filter(session=session):
        for p in (e.data.get("content") or {}).get("parts", []):
            if p.get("text"):
                out.append((e.author, p["text"]))
    return out


def test_reimbursement_over_100_opens_ticket_and_pays_after_approval(demo, worker, wait):
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")
    services.message_send(session=session, text="Please reimburse 200$ for meals", actor=demo["requester"])
    call = wait(lambda: PendingCall.objects.filter(session=session).first(), what="a ticket")
    wait(lambda: call.__class__.objects.get(pk=call.pk).initial_response, what="the tool's initial response")
    call.refresh_from_db()
    assert call.kind == "long_running" and call.call_name == "ask_for_approval"
    assert call.args == {"purpose": "meals", "amount": 200.0}
    assert call.initial_response["ticket-id"].startswith("approval-ticket-")
    approvals.ticket_approve(call=call, actor=demo["approver"])
    wait(lambda: any("reimbursed $200.00 for meals" in t for _, t in _texts(session)), what="the reimbursement")
    assert not Turn.objects.filter(session=session, status="failed").exists()
