"""A remote app in services mode: PostgreSQL, Redis, a `celery worker` subprocess driving a real
`adk api_server` subprocess; the approver's answer reaches the remote agent, which reimburses."""

from __future__ import annotations

from agents_app import services
from agents_app.models import RemoteApp
from approvals import services as approvals
from approvals.models import PendingCall
from tests.agents_app.remote_helpers import assert_mirrored, remote_events, user_texts
from tests.engine_scenarios import agent_texts, calls, failed_turns, settle, ticket_opened

pytest_plugins = ["tests.adk_api_server"]


def test_approve_a_remote_agents_ticket_with_a_worker_process(demo, worker, wait, adk_api_server):
    remote = RemoteApp.objects.create(
        name="remote_reimburse", base_url=adk_api_server.url, remote_app_name="cmp_reimburse"
    )
    session = services.session_create(app_name=remote.name, user_id="requester")
    services.message_send(session=session, text="Please reimburse 200$ for meals", actor=demo["requester"])
    ticket = ticket_opened(session, wait)
    assert (ticket.kind, ticket.args) == (PendingCall.Kind.LONG_RUNNING, {"purpose": "meals", "amount": 200.0})

    approvals.ticket_approve(ticket=ticket, actor=demo["approver"])
    settle(session, wait)
    assert failed_turns(session) == []
    assert [c["args"] for c in calls(session, "reimburse")] == [{"purpose": "meals", "amount": 200.0}]
    assert agent_texts(session)[-1] == "Done: I reimbursed $200.00 for meals."
    assert user_texts(remote_events(adk_api_server, remote, session)) == ["Please reimburse 200$ for meals"]
    assert_mirrored(adk_api_server, remote, session)
