"""A ticket's history line (TicketActivity.message, 500 characters) is built from what people wrote: an
approver's edited arguments, policy and group names. An edit whose text made the line longer than the
column was PostgreSQL's DataError: a 500 for the approval (SQLite kept the whole line). The line is now
cut to the column (with an ellipsis); the edit itself is whole in the activity's detail and the ticket."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from agents_app import services as agent_services
from approvals.models import TicketActivity
from tests.approvals_factories import ticket

pytestmark = pytest.mark.django_db


def test_an_edit_longer_than_the_history_line_is_approved_and_its_line_cut(demo):
    session = agent_services.session_create(app_name="reimbursement_agent", user_id="requester", session_id="s-e")
    call = ticket(session=session, invocation_id="inv-1")
    client = Client()
    client.force_login(demo["approver"])
    purpose = "p" * 600
    body = {"editedArgs": {"purpose": purpose, "amount": 200.0}}
    response = client.post(f"/api/pending-calls/{call.pk}/approve", json.dumps(body), content_type="application/json")
    assert response.status_code == 201, response.content[:300]
    edited = TicketActivity.objects.get(ticket=call, kind=TicketActivity.Kind.EDITED)
    assert len(edited.message) <= 500 and edited.message.startswith("Arguments edited: purpose meals → ppp")
    assert edited.detail["after"]["purpose"] == purpose
