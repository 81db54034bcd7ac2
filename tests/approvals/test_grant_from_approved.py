"""A standing grant ("allow this tool for N minutes") says its giver approved this tool: the grants API
made one from any ticket its caller may decide, also one still open, rejected, cancelled, expired or
answered otherwise. Now only an approved ticket gives one; any other is 409 with why, nothing made."""

from __future__ import annotations

import pytest

from approvals import services
from approvals.models import PendingCall, StandingGrant, TicketActivity
from tests.approvals.policy_helpers import open_ticket
from tests.approvals_factories import session_for, ticket

pytestmark = pytest.mark.django_db


def _give(client, call: PendingCall):
    body = {"ticket": call.pk, "scope": "session", "minutes": 60}
    return client.post("/api/grants", body, content_type="application/json")


def _decided(how: str, demo) -> PendingCall:
    call = open_ticket(session=session_for())
    if how == "rejected":
        services.ticket_reject(ticket=call, actor=demo["approver"], reason="not this month")
    elif how == "answered":
        services.response_submit(ticket=call, actor=demo["approver"], payload={"status": "noted"}, final=True)
    elif how in ("cancelled", "expired"):
        call = ticket(session=session_for(), status=how)
    call.refresh_from_db()
    assert call.status == ("pending" if how == "open" else how)
    return call


@pytest.mark.parametrize("how", ["open", "rejected", "answered", "cancelled", "expired"])
def test_a_grant_from_a_ticket_that_was_not_approved_is_409_and_nothing_is_made(api, demo, how):
    call = _decided(how, demo)
    r = _give(api(demo["approver"]), call)
    assert r.status_code == 409, r.content
    assert r.json()["detail"].startswith(f"Ticket #{call.pk} ")
    assert "a standing grant comes only from an approved ticket" in r.json()["detail"]
    assert not StandingGrant.objects.exists()
    assert not TicketActivity.objects.filter(ticket=call, kind=TicketActivity.Kind.GRANTED).exists()


def test_a_grant_from_an_approved_ticket_is_made(api, demo):
    call = open_ticket()
    services.ticket_approve(ticket=call, actor=demo["approver"])
    r = _give(api(demo["approver"]), call)
    assert r.status_code == 201, r.content
    assert r.json()["ticket"] == call.pk and r.json()["createdBy"] == "approver"
    assert TicketActivity.objects.filter(ticket=call, kind=TicketActivity.Kind.GRANTED).count() == 1
