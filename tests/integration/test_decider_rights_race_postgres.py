"""A decider's own decision and an admin's removal of their right to decide, racing on PostgreSQL's real row
locks, through the ticket page, the approvals API and ADK's `/run` (a FunctionResponse). Before: the decision
checked the rights the page or the API had read before its transaction (the permissions read with the
ticket, the user row read by the login), and locked nothing of the person's: a removal committed while the
decision was open (or between that read and its transaction) still let it through, the approval recorded
(200/201) and sent to the agent after the admin had been told the right was gone. Now the decision locks the
decider's row FOR SHARE in its transaction and reads their rights after it (approvals.decider), and every
change of rights locks that row (approvals.assignees): the removal first, the decision waits and is refused
(403, nothing written); the decision first, the removal waits for its commit. Each side is held open, its
lock taken, until the other has blocked on it (or had a second to)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from google.genai import types

from agents_app.tokens import token_create
from approvals import services
from approvals.models import PendingCall, Response
from tests.approvals_factories import session_for, ticket
from tests.integration.races import held_then

pytestmark = pytest.mark.django_db(transaction=True)

REFUSED = "only approvers answer this kind of ticket."


@pytest.fixture(autouse=True)
def _no_worker_woken(monkeypatch: pytest.MonkeyPatch) -> None:
    """An approval's turn stays queued: no worker of the run's takes it (these conversations have no agent
    run behind them)."""
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda *, session_pk: True)
    monkeypatch.setattr("agents_app.enqueue.session_enqueue_before_commit", lambda *, session_pk: None)


def _page(approver: Any, call: PendingCall) -> Callable[[], Any]:
    """The approver's click on Approve (an htmx POST from the ticket page): the answer's status and text."""
    tab = Client()
    tab.force_login(approver)
    url = f"/tickets/{call.pk}/approve/"
    return lambda: _said(tab.post(url, {"approve-comment": "fine"}, headers={"HX-Request": "true"}))


def _api(approver: Any, call: PendingCall) -> Callable[[], Any]:
    """POST /api/pending-calls/<id>/approve with the approver's token."""
    _, key = token_create(user=approver, name="race")
    client, url = Client(), f"/api/pending-calls/{call.pk}/approve"
    body = json.dumps({"comment": "fine"})
    return lambda: _said(
        client.post(url, body, content_type="application/json", headers={"Authorization": f"Token {key}"})
    )


def _run(approver: Any, call: PendingCall) -> Callable[[], Any]:
    """ADK's `/run` with a FunctionResponse answering the ticket's call, with the approver's token."""
    _, key = token_create(user=approver, name="race")
    session = call.session
    answer = {"id": call.call_id, "name": call.call_name, "response": {"status": "approved"}}
    body = {
        "appName": session.app_name,
        "userId": session.user_id,
        "sessionId": session.session_id,
        "newMessage": {"role": "user", "parts": [{"functionResponse": answer}]},
    }
    client = Client()
    return lambda: _said(
        client.post(
            "/api/adk/run", json.dumps(body), content_type="application/json", headers={"Authorization": f"Token {key}"}
        )
    )


def _run_in_process(approver: Any, call: PendingCall) -> Callable[[], Any]:
    """`/run`'s decision as its view makes it (approvals.services.message_submit: the ticket read with the
    person's permissions, then the decision), in the caller's transaction: `/run`'s view answers once the
    agent's turn has run, which no worker runs here."""
    answer = types.FunctionResponse(id=call.call_id, name=call.call_name, response={"status": "approved"})
    content = types.Content(role="user", parts=[types.Part(function_response=answer)])

    def decide() -> tuple[int, str]:
        person = type(approver).objects.get(pk=approver.pk)
        services.message_submit(session=call.session, content=content, actor=person)
        return 200, ""

    return decide


def _said(answer: Any) -> tuple[int, str]:
    return answer.status_code, answer.content.decode()


def _own_ticket() -> PendingCall:
    """A ticket of the approver's own conversation (`/run` answers in one's own; no four-eyes on it)."""
    return ticket(session=session_for(user_id="approver"))


def _removed(approver: Any) -> Callable[[], None]:
    return lambda: approver.groups.remove(Group.objects.get(name="approvers"))


def _nothing_decided(call: PendingCall) -> None:
    call.refresh_from_db()
    assert call.status == PendingCall.Status.PENDING
    assert not Response.objects.filter(pending_call=call).exists()


@pytest.mark.parametrize("path", [_page, _api, _run])
def test_the_removal_first_then_the_decision_waits_and_is_refused(demo, path):
    approver = demo["approver"]
    call = _own_ticket() if path is _run else ticket()
    decide = path(approver, call)
    done = held_then(_removed(approver), decide, wait=5)  # a cold first request takes a while to reach its lock
    assert done["waited"], f"the decision did not wait for the removal's commit: {done.get('second')}"
    status, text = done["second"]
    assert status == 403 and REFUSED in text, done["second"]
    _nothing_decided(call)


@pytest.mark.parametrize("path", [_page, _api, _run_in_process])
def test_the_decision_first_then_the_removal_waits_for_its_commit(demo, path):
    approver = demo["approver"]
    call = _own_ticket() if path is _run_in_process else ticket()
    done = held_then(path(approver, call), _removed(approver), wait=5)
    assert not isinstance(done.get("second"), Exception), done
    assert done["waited"], "the removal committed while the decision it takes the right of was open"
    status, _ = done["first"]
    assert status in (200, 201), done["first"]
    call.refresh_from_db()
    decided = Response.objects.get(pending_call=call)
    assert call.status == PendingCall.Status.APPROVED and decided.actor_username == "approver"
    assert not approver.groups.filter(name="approvers").exists()


def test_a_deactivation_first_then_the_decision_is_refused(demo):
    """The account deactivated (the admin's save) while the approver's click was on its way: the user row
    the login read said active; the decision reads it again under its lock."""
    approver = demo["approver"]
    call = ticket()

    def deactivate() -> None:
        approver.is_active = False
        approver.save()

    done = held_then(deactivate, _page(approver, call), wait=5)
    assert done["waited"], done
    status, text = done["second"]
    assert status == 403 and "log in to answer tickets." in text, done["second"]
    _nothing_decided(call)


def test_two_answers_in_one_message_the_removal_first_are_refused(demo):
    """`/run`'s message answering two calls at once: the decider's row and rights in a round trip of their own
    (approvals.decider.decider_read), before the session's and the tickets' locks."""
    from approvals.decisions import NotAllowed

    approver = demo["approver"]
    session = session_for(user_id="approver")
    calls = [ticket(session=session, invocation_id="inv-two") for _ in range(2)]
    parts = [
        types.Part(
            function_response=types.FunctionResponse(id=c.call_id, name=c.call_name, response={"status": "approved"})
        )
        for c in calls
    ]
    content = types.Content(role="user", parts=parts)
    person = type(approver).objects.get(pk=approver.pk)
    done = held_then(
        _removed(approver), lambda: services.message_submit(session=session, content=content, actor=person), wait=5
    )
    assert done["waited"], done
    assert isinstance(done["second"], NotAllowed) and REFUSED in str(done["second"]), done
    for call in calls:
        _nothing_decided(call)
