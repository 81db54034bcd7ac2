"""A decider's display name is kept on each of their decisions (Response.actor_name, 300 characters), as
Django's `get_full_name()` gives it: a first and a last name of 150 characters each (what Django's user
holds) make 301, and PostgreSQL refused the row (DataError: a 500 on every decision of that person).
The name is now kept to the column's length (approvals.record.person_snapshot)."""

from __future__ import annotations

import pytest

from agents_app import services as agent_services
from approvals.models import Response
from tests.approvals_factories import ticket

pytestmark = pytest.mark.django_db


def test_a_decider_with_the_longest_names_django_holds_can_decide(client, demo):
    approver = demo["approver"]
    approver.first_name, approver.last_name = "F" * 150, "L" * 150
    approver.save()
    session = agent_services.session_create(app_name="reimbursement_agent", user_id="requester", session_id="s-n")
    call = ticket(session=session, invocation_id="inv-1")
    client.force_login(approver)
    response = client.post(f"/api/pending-calls/{call.pk}/approve", "{}", content_type="application/json")
    assert response.status_code == 201, response.content[:300]
    kept = Response.objects.get(pending_call=call).actor_name
    assert kept == ("F" * 150 + " " + "L" * 150)[:300]
