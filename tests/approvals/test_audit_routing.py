"""The audit trail honours routing: an approver outside a policy's groups never reads the decisions
on tickets routed to other groups (their arguments and answers are in each row), on the page or in
the exports; the routed group's members, staff observers and agent admins do."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.test import AsyncClient, Client

from approvals import services
from tests.approvals.policy_helpers import open_ticket, person, policy, team

SECRET = "board-bonus-7Q"


@pytest.fixture
def routed(transactional_db, demo, monkeypatch):
    # The decision commits (the exports stream through ASGI): no worker runs the turn it queues.
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda **kwargs: True)
    board = team("board-only")
    treasurer = person("treasurer", board)
    policy("Board only", groups=(board,), tool="ask_for_approval", priority=100)
    call = open_ticket(args={"purpose": SECRET, "amount": 9000.0})
    assert call.routed, "the policy routes the ticket to the board"
    decision = services.ticket_reject(ticket=call, actor=treasurer, reason=f"no {SECRET}")
    agent_admin = User.objects.create_user("aa", password="x", is_staff=True)
    agent_admin.groups.add(Group.objects.get(name="agent admins"))
    return {"decision": decision, "treasurer": treasurer, "agent admin": agent_admin}


async def _views(user) -> dict[str, str]:
    """The page and both exports as this person gets them, through the ASGI stack."""
    c = AsyncClient()
    await c.aforce_login(user)
    out = {}
    for url in ("/audit/", "/audit/export.csv", "/audit/export.jsonl"):
        r = await c.get(url)
        assert r.status_code == 200, (url, r.status_code)
        if r.streaming:
            out[url] = b"".join([chunk async for chunk in r.streaming_content]).decode()
        else:
            out[url] = r.content.decode()
    return out


async def test_an_approver_outside_the_routed_group_sees_none_of_its_decisions(routed, demo):
    for url, body in (await _views(demo["approver"])).items():
        assert SECRET not in body, f"{url} shows a decision on a ticket routed to another group"
        assert f'href="/tickets/{routed["decision"].pending_call_id}/"' not in body, url


@pytest.mark.parametrize("who", ["treasurer", "observer", "agent admin"])
async def test_the_routed_group_observers_and_agent_admins_see_it(routed, demo, who):
    user = routed.get(who) or demo[who]
    views = await _views(user)
    assert f'href="/tickets/{routed["decision"].pending_call_id}/"' in views["/audit/"], who
    assert SECRET in views["/audit/export.csv"] and SECRET in views["/audit/export.jsonl"], who


def test_a_deleted_conversations_routed_ticket_stays_with_its_group(routed, demo):
    """After the conversation is deleted its ticket page is part of the audit trail: still routed."""
    from agents_app.models import Turn
    from agents_app.session_service import session_archive

    call = routed["decision"].pending_call
    for turn in Turn.objects.filter(session=call.session):  # the answer's turn, as if it had run
        turn.status = Turn.Status.DONE
        turn.save()
    session_archive(session=call.session, actor=demo["admin"])
    c = Client()
    for who, status in (("approver", 404), ("observer", 200)):
        c.force_login(demo[who])
        assert c.get(f"/tickets/{call.pk}/").status_code == status, who
    c.force_login(routed["treasurer"])
    assert c.get(f"/tickets/{call.pk}/").status_code == 200
