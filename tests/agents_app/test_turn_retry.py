"""Running a failed turn again: only when the agent never saw it (it stored no event), only by the
conversation's owner or an approver, shown as a Retry button that leaves live when used."""

from __future__ import annotations

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.test import Client

from agents_app import services
from agents_app.models import AgentConfig, Turn
from agents_app.routing import websocket_urlpatterns
from approvals import services as approvals
from tests.engine_scenarios import agent_texts, calls, failed_turns, flaky, settle, ticket_opened


def _approval_that_fails(demo, wait):
    """An approval whose turn fails before reaching the agent: the agent was disabled meanwhile."""
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")
    services.message_send(session=session, text="Please reimburse 200$ for meals", actor=demo["requester"])
    call = ticket_opened(session, wait)
    AgentConfig.objects.filter(name="reimbursement_agent").update(enabled=False)
    approvals.ticket_approve(ticket=call, actor=demo["approver"])
    settle(session, wait)
    turn = Turn.objects.filter(session=session).latest("id")
    assert failed_turns(session) == [
        (turn.pk, "agents_app.agents.AgentNotFound: No enabled agent named 'reimbursement_agent'.")
    ]
    return session, turn


def test_a_failed_answer_runs_again_once_the_agent_is_back(demo, worker, wait):
    session, turn = _approval_that_fails(demo, wait)
    client = Client()
    client.force_login(demo["approver"])
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "No enabled agent named" in page and ">Retry</button>" in page

    AgentConfig.objects.filter(name="reimbursement_agent").update(enabled=True)
    r = client.post(f"/sessions/{session.pk}/turns/{turn.pk}/retry/", HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and "Retrying" in r.content.decode()
    settle(session, wait, "the retried turn")
    assert [c["name"] for c in calls(session)][-1] == "reimburse"
    assert agent_texts(session)[-1] == "Done: I reimbursed $200.00 for meals."
    assert (
        failed_turns(session) == [] and ">Retry</button>" not in client.get(f"/sessions/{session.pk}/").content.decode()
    )
    again = client.post(f"/sessions/{session.pk}/turns/{turn.pk}/retry/")
    assert again.status_code == 409 and "only a failed turn can be retried" in again.content.decode()


def test_who_may_retry(demo, worker, wait):
    session, turn = _approval_that_fails(demo, wait)
    url = f"/sessions/{session.pk}/turns/{turn.pk}/retry/"
    observer = Client()
    observer.force_login(demo["observer"])
    assert ">Retry</button>" not in observer.get(f"/sessions/{session.pk}/").content.decode()
    assert observer.post(url).status_code == 403
    assert Client().post(url).status_code == 302  # to the login page
    csrf = Client(enforce_csrf_checks=True)
    csrf.force_login(demo["requester"])
    assert csrf.post(url).status_code == 403
    assert Turn.objects.get(pk=turn.pk).status == Turn.Status.FAILED  # nothing changed
    owner = Client()
    owner.force_login(demo["requester"])
    assert owner.post(f"/sessions/{session.pk}/turns/999999/retry/").status_code == 404


def test_a_turn_that_reached_the_agent_is_not_run_twice(demo, worker, wait, settings):
    settings.ADKWEB_CODE_AGENTS = {**settings.ADKWEB_CODE_AGENTS, flaky.APP_NAME: flaky.DOTTED}
    session = services.session_create(app_name=flaky.APP_NAME, user_id="requester")
    services.message_send(session=session, text="order 7 boom", actor=demo["requester"])
    settle(session, wait)
    ((turn_id, error),) = failed_turns(session)
    assert "order system is down" in error
    client = Client()
    client.force_login(demo["requester"])
    assert ">Retry</button>" not in client.get(f"/sessions/{session.pk}/").content.decode()
    r = client.post(f"/sessions/{session.pk}/turns/{turn_id}/retry/")
    assert r.status_code == 409 and "send a new message instead" in r.content.decode()


@pytest.mark.django_db(transaction=True)
async def test_the_error_line_leaves_open_pages_when_retried(demo, worker, wait):
    from asgiref.sync import sync_to_async

    # Not thread-sensitive: this waits on the worker thread, which needs the shared sync thread.
    session, turn = await sync_to_async(_approval_that_fails, thread_sensitive=False)(demo, wait)
    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/sessions/{session.pk}/?after=999999999")
    comm.scope["user"] = demo["requester"]
    assert (await comm.connect())[0]
    await comm.receive_from()  # the status badge
    await sync_to_async(services.turn_retry, thread_sensitive=False)(turn=turn)
    seen = ""
    while f'<div id="turn-{turn.pk}-error" hx-swap-oob="delete"></div>' not in seen:
        seen += await comm.receive_from(timeout=10)
    await comm.disconnect()
    await sync_to_async(settle, thread_sensitive=False)(
        session, wait
    )  # it fails again (the agent is still disabled): a new error line
