"""One Idempotency-Key sent with several requests at once by one approver, against a real server on
PostgreSQL: the approval retried N times at once and, under the same key, a rejection (another request).
Exactly one of them decides; each retry of the decision gets that decision's answer (201, marked
replayed, the same body), the other request is refused with 422 if the approval went first (never a
409 'already closed', never a silent replay of the other request's answer), and the agent hears one
answer, once."""

from __future__ import annotations

import json
from collections import Counter

from agents_app import services
from approvals.models import PendingCall, Response
from tests.conftest import wait_for
from tests.engine_scenarios import settle
from tests.integration.races import post_at_once

pytest_plugins = ["tests.conftest_live"]

N = 12


def test_one_key_sent_with_many_requests_at_once_decides_once(demo, worker, live_asgi, api_token):
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")
    services.message_send(session=session, text="Please reimburse 200$ for meals", streaming=False)
    ticket = wait_for(lambda: PendingCall.objects.filter(session=session).first(), timeout=30, what="the ticket")
    settle(session, wait_for)
    headers = {**api_token(demo["approver"]), "Idempotency-Key": "retry-7f3e"}
    api = f"/api/pending-calls/{ticket.pk}"
    requests = [{"label": "approve", "url": f"{api}/approve", "json": {"comment": "ok"}, "headers": headers}] * (N - 2)
    requests += [{"label": "reject", "url": f"{api}/reject", "json": {"reason": "no"}, "headers": headers}] * 2

    results = post_at_once(live_asgi.url, requests)

    assert [r for r in results if r[1] not in (201, 422)] == [], Counter((r[0], r[1]) for r in results)
    (row,) = Response.objects.filter(pending_call=ticket)
    won = row.action  # "approve" or "reject": whichever took the key first
    for label, status, body in results:
        if label == won:
            assert status == 201 and json.loads(body)["id"] == row.pk, (label, status, body)
        else:
            assert status == 422 and "was already used for a different request" in body, (label, status, body)
    settle(session, wait_for, "the one resumed turn")
    assert session.turns.filter(kind="function_response").count() == 1
