"""100 concurrent decisions on one ticket, through the API, the pages and ADK's `/run` (a
FunctionResponse for the ticket's call), against a real server on PostgreSQL: exactly one wins
(2xx), the other 99 get 409, nobody gets a 500 (issue 8: "too many clients" without a connection
pool), and the agent resumes once."""

from __future__ import annotations

from collections import Counter

from agents_app import services
from agents_app.models import Turn
from approvals.models import PendingCall, Response
from tests.conftest import wait_for
from tests.engine_scenarios import agent_texts, calls, responses, settle
from tests.integration.races import page_auth, post_at_once

pytest_plugins = ["tests.conftest_live"]

N = 100


def _run_answer(ticket: PendingCall, i: int) -> dict:
    """ADK's client answering the call through /run (staff may act in another person's session)."""
    response = {"id": ticket.call_id, "name": ticket.call_name, "response": {"status": "approved", "n": i}}
    session = ticket.session
    body = {"appName": session.app_name, "userId": session.user_id, "sessionId": session.session_id}
    return {
        "url": "/api/adk/run",
        "json": {**body, "newMessage": {"role": "user", "parts": [{"functionResponse": response}]}},
    }


def _requests(
    ticket: PendingCall, tokens: list[dict[str, str]], tabs: list[tuple[dict, dict]], staff: dict[str, str]
) -> list[dict]:
    api, page = f"/api/pending-calls/{ticket.pk}", f"/tickets/{ticket.pk}"
    kinds = [
        ("api approve", lambda i: {"url": f"{api}/approve", "json": {"comment": f"ok {i}"}}),
        ("api reject", lambda i: {"url": f"{api}/reject", "json": {"reason": f"no {i}"}}),
        ("api custom", lambda i: {"url": f"{api}/responses", "json": {"response": {"status": "approved", "n": i}}}),
        ("page approve", lambda i: {"url": f"{page}/approve/", "data": {"approve-comment": f"ok {i}"}}),
        ("page reject", lambda i: {"url": f"{page}/reject/", "data": {"reject-reason": f"no {i}"}}),
        (
            "page custom",
            lambda i: {
                "url": f"{page}/custom/",
                "data": {"custom-body": '{"status": "approved"}', "custom-final": "on"},
            },
        ),
        ("run answer", lambda i: _run_answer(ticket, i)),
    ]
    out = []
    for i in range(N):
        label, make = kinds[i % len(kinds)]
        request = {"label": label, **make(i)}
        if label == "run answer":
            request["headers"] = staff
        elif label.startswith("api"):
            request["headers"] = tokens[i % len(tokens)]
        else:
            request["cookies"], request["headers"] = tabs[i % len(tabs)]
        out.append(request)
    return out


def test_100_concurrent_decisions_one_winner_the_rest_409_and_one_resume(demo, worker, live_asgi, api_token):
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")
    services.message_send(session=session, text="Please reimburse 200$ for meals", streaming=False)
    ticket = wait_for(lambda: PendingCall.objects.filter(session=session).first(), timeout=30, what="the ticket")
    settle(session, wait_for)
    approvers = [demo["approver"], demo["admin"]]
    tokens = [api_token(u) for u in approvers]
    requests = _requests(ticket, tokens, [page_auth(u) for u in approvers], staff=tokens[1])
    assert {r["label"] for r in requests} >= {"run answer", "api approve", "page approve"}

    results = post_at_once(live_asgi.url, requests)

    statuses = Counter(status for _, status, _ in results)
    winners = [(label, status) for label, status, _ in results if 200 <= status < 300]
    assert len(results) == N
    assert [r for r in results if r[1] >= 500] == []
    assert len(winners) == 1 and statuses[409] == N - 1, statuses
    assert Response.objects.filter(pending_call=ticket).count() == 1

    settle(session, wait_for, "the one resumed turn")
    assert list(Turn.objects.filter(session=session).values_list("kind", "status")) == [
        ("message", "done"),
        ("function_response", "done"),
    ]
    answers = [r for author, r in responses(session) if author == "user"]
    assert len(answers) == 1 and answers[0]["id"] == ticket.call_id
    ticket.refresh_from_db()
    assert Response.objects.get(pending_call=ticket).actor is not None  # who decided is recorded
    if ticket.status == "approved":
        assert len(calls(session, "reimburse")) == 1
        assert agent_texts(session)[-1] == "Done: I reimbursed $200.00 for meals."
    else:
        assert ticket.status == "rejected" and winners[0][0].endswith("reject")
        assert calls(session, "reimburse") == []
