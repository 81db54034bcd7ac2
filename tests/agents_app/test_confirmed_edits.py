"""A confirmed tool runs with the arguments its approval approves. An approver may edit a confirmation's
arguments before approving; adkweb records the edited arguments as approved and sends them in the
confirmation's payload, but ADK runs a confirmed call with the arguments the model gave it: a tool that
does not read its confirmation's payload (the README's `delete_account(user)`, any tool written before
edits existed) ran with the original ones. The approval of delete_account(user='bob'), edited from
'alice', deleted alice's account while the ticket, its history and the audit trail said bob's."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from agents_app import services
from agents_app.models import AgentConfig
from agents_app.tools import RegisteredTool, registry
from approvals.models import PendingCall
from tests.engine_scenarios import failed_turns, settle, ticket_opened

DELETED: list[tuple[str, bool]] = []


def delete_account(user: str, keep_backup: bool = True) -> dict:
    """Delete a user account (reads no confirmation payload, as most tools)."""
    DELETED.append((user, keep_backup))
    return {"status": "deleted", "user": user}


@pytest.fixture
def accounts_ticket(demo, worker, wait, monkeypatch) -> PendingCall:
    DELETED.clear()
    tool = RegisteredTool("delete_account", delete_account, False, True)
    monkeypatch.setitem(registry._tools, "delete_account", tool)
    AgentConfig.objects.create(name="accounts_agent", model="demo-offline", tools=["delete_account"])
    session = services.session_create(app_name="accounts_agent", user_id="requester")
    services.message_send(session=session, text='/call delete_account {"user": "alice"}', actor=demo["requester"])
    return ticket_opened(session, wait)


def _approve(demo, ticket: PendingCall, body: dict) -> int:
    client = Client()
    client.force_login(demo["approver"])
    url = f"/api/pending-calls/{ticket.pk}/approve"
    return client.post(url, data=json.dumps(body), content_type="application/json").status_code


def test_an_edited_confirmation_runs_its_tool_with_the_edited_arguments(demo, accounts_ticket, wait):
    ticket = accounts_ticket
    assert (ticket.kind, ticket.tool_args) == ("confirmation", {"user": "alice"})
    edited = {"user": "bob", "keep_backup": False}  # a changed argument and an optional one added
    assert _approve(demo, ticket, {"editedArgs": edited}) == 201
    settle(ticket.session, wait)
    ticket.refresh_from_db()
    assert ticket.status == "approved" and ticket.current_args == edited
    assert DELETED == [("bob", False)] and failed_turns(ticket.session) == []


def test_an_unedited_confirmation_runs_its_tool_as_asked(demo, accounts_ticket, wait):
    assert _approve(demo, accounts_ticket, {"payload": {"note": "checked"}}) == 201
    settle(accounts_ticket.session, wait)
    assert DELETED == [("alice", True)]


def test_a_remote_apps_confirmation_cannot_be_edited(demo):
    """A remote app's ADK server runs a confirmed call with its model's arguments, and adkweb's plugin does
    not run there: an edit would be recorded as approved and not carried out (unless the remote tool
    happens to read its payload). Refused with 400, nothing recorded; approving as asked goes as before."""
    from agents_app.models import RemoteApp
    from approvals.models import Response
    from tests.approvals_factories import session_for, ticket

    RemoteApp.objects.create(name="remote_accounts", base_url="http://127.0.0.1:9", remote_app_name="accounts")
    call = ticket(session=session_for(app_name="remote_accounts"), kind="confirmation")
    client = Client()
    client.force_login(demo["approver"])
    url = f"/api/pending-calls/{call.pk}/approve"
    r = client.post(
        url, data=json.dumps({"editedArgs": {"amount": 5.0, "recipient": "Bob"}}), content_type="application/json"
    )
    assert r.status_code == 400, r.content
    assert "served by a remote ADK server" in r.json()["detail"], r.json()
    assert not Response.objects.filter(pending_call=call).exists()
    page = client.get(f"/tickets/{call.pk}/").content.decode()
    assert 'name="approve-e_amount"' not in page
