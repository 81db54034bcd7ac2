"""The ticket page says "Nothing was sent." once when it refuses a decision: a refusal whose own message
already says so (an approval whose payload names an argument, an edit leaving a required argument empty)
was shown with the page's own "Nothing was sent." after it, twice in one alert."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from approvals import services
from approvals.models import PendingCall, Response
from tests.approvals_factories import ticket


def _act(user, call: PendingCall, action: str, data: dict) -> tuple[int, str]:
    client = Client()
    client.force_login(user)
    r = client.post(reverse("approvals:ticket-act", args=[call.pk, action]), data, HTTP_HX_REQUEST="true")
    return r.status_code, r.content.decode()


def _said_once(html: str) -> None:
    assert len(re.findall(r"nothing was sent", html, re.I)) == 1, re.findall(r'role="alert"[^>]*>(.*?)</', html, re.S)


@pytest.mark.parametrize(
    ("kind", "data", "status", "words"),
    [
        ("confirmation", {"approve-payload": '{"amount": 99999}'}, 400, "edit them (editedArgs"),
        ("long_running", {"approve-e_amount": "", "approve-e_purpose": "meals"}, 400, "amount is required"),
    ],
)
def test_a_refused_decision_says_nothing_was_sent_once(demo, kind, data, status, words):
    call = ticket(kind=kind)
    code, html = _act(demo["approver"], call, "approve", data)
    assert code == status and words in html, html[-3000:]
    _said_once(html)
    assert not Response.objects.filter(pending_call=call).exists()


def test_a_past_due_or_closed_ticket_says_it_once(demo):
    late = ticket(args={"purpose": "meals", "amount": 200.0})
    PendingCall.objects.filter(pk=late.pk).update(due_at=timezone.now() - timedelta(seconds=5))
    code, html = _act(demo["approver"], late, "approve", {})
    assert code == 409 and "nobody decided it by then" in html
    _said_once(html)
    done = ticket(args={"purpose": "meals", "amount": 200.0})
    services.ticket_reject(ticket=done, actor=demo["approver"], reason="no receipt")
    code, html = _act(demo["approver"], done, "approve", {})
    assert code == 409 and "already closed (rejected by approver)" in html
    _said_once(html)


def _refusals(demo) -> list[tuple[str, PendingCall, str, dict]]:
    """Refused decisions of every kind: (who, ticket, action, form data)."""
    late = ticket(args={"purpose": "meals", "amount": 200.0})
    PendingCall.objects.filter(pk=late.pk).update(due_at=timezone.now() - timedelta(seconds=5))
    done = ticket(args={"purpose": "meals", "amount": 200.0})
    services.ticket_reject(ticket=done, actor=demo["approver"], reason="no receipt")
    stale = ticket(args={"purpose": "meals", "amount": 200.0})
    own = ticket(args={"purpose": "meals", "amount": 200.0}, four_eyes=True)
    return [
        ("approver", late, "approve", {}),  # past due (409)
        ("approver", done, "approve", {}),  # closed (409)
        ("approver", stale, "reject", {"reject-reason": "no", "reject-args_hash": "0" * 64}),  # stale (409)
        ("requester", own, "approve", {}),  # four-eyes (403)
        ("approver", ticket(kind="confirmation"), "approve", {"approve-payload": '{"amount": 99999}'}),  # 400
    ]


def test_every_refused_decision_says_nothing_was_sent_once_in_the_api_and_on_the_page(demo):
    """The sentence is the refusal's own (approvals.decisions), not added by the page after reading its text:
    the API's detail and the page's alert say it alike, once."""
    for who, call, action, data in _refusals(demo):
        code, html = _act(demo[who], call, action, data)
        assert code in (400, 403, 409), (who, action, code)
        _said_once(html)
    for who, call, action, data in _refusals(demo):
        client = Client()
        client.force_login(demo[who])
        body = {"argsHash": data["reject-args_hash"], "reason": "no"} if "reject-args_hash" in data else {}
        if "approve-payload" in data:
            body = {"payload": {"amount": 99999}}
        r = client.post(f"/api/pending-calls/{call.pk}/{action}", body, content_type="application/json")
        detail = r.json()["detail"]
        assert r.status_code in (400, 403, 409) and detail.endswith(" Nothing was sent."), (r.status_code, detail)
        assert len(re.findall(r"nothing was sent", detail, re.I)) == 1, detail
