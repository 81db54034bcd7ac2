"""Every refused answer on `/run` says "Nothing was sent." once, from the refusal (approvals.decision_plan.
unsent), as a refused decision does anywhere (commit 426d046). The answers' own refusals (run_answers:
an unknown call id, a response under another name than its call's, one call answered twice, calls of
two invocations) said it in one case only, written into its text (a misnamed response), and not at all in
the others; a decision's refusals (four-eyes, an approval already given, a closed ticket) got it from the
refusal."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from django.test import Client

from approvals import services
from tests.adkweb.bad_input.sweep import Objs, _refusal, counts

SENT = "Nothing was sent."


def _message(objs: Objs, *responses: dict[str, Any]) -> dict[str, Any]:
    parts = [{"functionResponse": r} for r in responses]
    run = {"appName": "reimbursement_agent", "userId": "requester", "sessionId": "s-bad"}
    return {**run, "newMessage": {"role": "user", "parts": parts}}


def _cases(objs: Objs) -> dict[str, tuple[str, dict[str, Any], int, str]]:
    t, q = objs.call, objs.input_call
    fr = {"id": t.call_id, "name": t.call_name, "response": {"status": "approved"}}
    other = {"id": q.call_id, "name": q.call_name, "response": {"model": "x"}}
    return {
        "an unknown call id": ("admin", _message(objs, {**fr, "id": "nope"}), 400, "ids: nope."),
        "another call's name": ("admin", _message(objs, {**fr, "name": "reimburse"}), 400, "not 'reimburse'."),
        "no name": (
            "admin",
            _message(objs, {"id": t.call_id, "response": {}}),
            400,
            "and the response has no name.",
        ),
        "no id": (  # it said "...response ids: ." (ADK takes it for no call's answer and runs the model again)
            "admin",
            _message(objs, {"name": t.call_name, "response": {"status": "approved"}}),
            400,
            f"carries the id of the call it answers: the response of {t.call_name!r} has none.",
        ),
        "one call answered twice": ("admin", _message(objs, fr, fr), 400, "at most once."),
        "calls of two invocations": ("admin", _message(objs, fr, other), 400, "send them separately."),
        "not an approver": ("requester", _message(objs, fr), 403, "only approvers answer this kind of ticket."),
        "a closed ticket": ("admin", _message(objs, fr), 409, "(rejected by approver)."),
    }


@pytest.mark.parametrize(
    "case",
    [
        "an unknown call id",
        "another call's name",
        "no name",
        "no id",
        "one call answered twice",
        "calls of two invocations",
        "not an approver",
        "a closed ticket",
    ],
)
def test_a_refused_run_answer_says_nothing_was_sent_once(demo, objs, case):
    who, body, status, words = _cases(objs)[case]  # staff (admin) answer in the requester's conversation
    client = Client()
    client.force_login(demo[who])
    if case == "a closed ticket":
        services.ticket_reject(ticket=objs.call, actor=objs.approver, reason="no")
    with transaction.atomic():
        before = counts()
        r = client.post("/api/adk/run", body, content_type="application/json")
        after = counts()
        transaction.set_rollback(True)
    assert not _refusal(f"/run {case}", r, before, after, api=True)
    detail = r.json()["detail"]
    assert r.status_code == status, detail
    assert detail.endswith(f"{words} {SENT}") and detail.count("othing was sent") == 1, detail
