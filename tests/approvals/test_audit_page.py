"""The audit page: every decision for approvers, observers and agent admins (403 for requesters,
login for the anonymous), its filters, pagination and escaping, links to ticket and conversation,
and archived conversations' decisions still listed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from approvals import services
from approvals.models import Response
from tests.approvals_factories import session_for, ticket


@pytest.fixture
def decided(demo):
    """Three decisions: approver approves meals, admin rejects a transfer (other agent), approver updates."""
    approver, admin = demo["approver"], demo["admin"]
    approver.first_name, approver.last_name = "Ann", "Lee"
    approver.save()
    meals = ticket()
    a = services.ticket_approve(ticket=meals, actor=approver, comment="fine")
    transfer = ticket(session=session_for(app_name="transfer_agent"), kind="confirmation")
    r = services.ticket_reject(ticket=transfer, actor=admin, reason="too much")
    waiting = ticket()
    u = services.ticket_update(ticket=waiting, actor=approver, message="looking at it")
    return {"approve": a, "reject": r, "update": u, "tickets": (meals, transfer, waiting)}


def _ids(page) -> list[int]:
    return [r.pk for r in page.context["page"].object_list]


def test_audit_needs_login_and_an_auditing_role(demo, client):
    r = client.get("/audit/")
    assert r.status_code == 302 and r["Location"].startswith("/accounts/login/")
    assert client.get("/audit/export.csv").status_code == 302
    client.force_login(demo["requester"])
    for url in ("/audit/", "/audit/export.csv", "/audit/export.jsonl"):
        assert client.get(url).status_code == 403, url
    assert b'href="/audit/"' not in client.get("/sessions/").content  # not in their navigation
    for name in ("approver", "observer", "admin"):
        client.force_login(demo[name])
        page = client.get("/audit/")
        assert page.status_code == 200, name
        assert b'href="/audit/"' in page.content  # in the navigation
    agent_admin = User.objects.create_user("audit_agent_admin", password="x", is_staff=True)
    agent_admin.groups.add(Group.objects.get(name="agent admins"))
    client.force_login(agent_admin)
    assert client.get("/audit/").status_code == 200


def test_every_decision_with_links_to_its_ticket_and_conversation(decided, demo, client):
    client.force_login(demo["observer"])
    page = client.get("/audit/")
    body = page.content.decode()
    assert _ids(page) == [decided["update"].pk, decided["reject"].pk, decided["approve"].pk]  # newest first
    meals, transfer, _ = decided["tickets"]
    assert f'href="/tickets/{meals.pk}/"' in body and f'href="/sessions/{meals.session_id}/"' in body
    assert "Ann Lee (approver)" in body and "transfer_money" in body and "too much" in body
    assert decided["approve"].args_hash[:12] in body


@pytest.mark.parametrize(
    "query, expected",
    [
        ("agent=transfer_agent", ["reject"]),
        ("tool=ask_for_approval", ["update", "approve"]),
        ("person=approver", ["update", "approve"]),
        ("person=ann+lee", ["update", "approve"]),
        ("person=admin", ["reject"]),
        ("outcome=reject", ["reject"]),
        ("outcome=approve&person=approver", ["approve"]),
        ("since=2000-01-01&until=2000-01-31", []),
    ],
)
def test_filters(decided, demo, client, query, expected):
    client.force_login(demo["approver"])
    page = client.get(f"/audit/?{query}")
    assert page.status_code == 200
    assert _ids(page) == [decided[k].pk for k in expected]


def test_period_filter_by_day(decided, demo, client):
    Response.objects.filter(pk=decided["approve"].pk).update(created_at=timezone.now() - timedelta(days=10))
    today = timezone.localdate().isoformat()
    client.force_login(demo["approver"])
    assert _ids(client.get(f"/audit/?since={today}&until={today}")) == [decided["update"].pk, decided["reject"].pk]
    old = (timezone.localdate() - timedelta(days=10)).isoformat()
    assert _ids(client.get(f"/audit/?since={old}&until={old}")) == [decided["approve"].pk]


@pytest.mark.parametrize(
    "query",
    ["since=yesterday", "outcome=delete", "page=0", "page=99999999999999999999", "since=2026-02-02&until=2026-02-01"],
)
def test_bad_filters_are_400_with_a_message(demo, client, query):
    client.force_login(demo["approver"])
    r = client.get(f"/audit/?{query}")
    assert r.status_code == 400 and r.content.startswith(b"Bad filter: ")


def test_pagination(demo, client):
    call = ticket()
    for i in range(55):
        services.ticket_update(ticket=call, actor=demo["approver"], message=f"update {i}")
    client.force_login(demo["approver"])
    first = client.get("/audit/?person=approver")
    assert len(first.context["page"].object_list) == 50 and b'rel="next"' in first.content
    assert b"?person=approver&amp;page=2" in first.content
    second = client.get("/audit/?person=approver&page=2")
    assert len(second.context["page"].object_list) == 5
    assert client.get("/audit/?page=9").context["page"].number == 2  # past the end: the last page


def test_everything_is_escaped(demo, client):
    evil = '<script>alert("x")</script>'
    approver = demo["approver"]
    approver.first_name = evil
    approver.save()
    call = ticket(tool_name=evil, requester=evil)
    services.ticket_reject(ticket=call, actor=approver, reason=evil)
    client.force_login(demo["observer"])
    body = client.get("/audit/").content.decode()
    assert "<script>alert" not in body
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in body


def test_archived_conversations_decisions_stay_on_the_audit_page(demo, client):
    session = session_for(user_id="requester")
    call = ticket(session=session)
    response = services.ticket_reject(ticket=call, actor=demo["approver"], reason="no receipt")
    session.turns.update(status="done")
    client.force_login(demo["requester"])
    api = f"/api/adk/apps/reimbursement_agent/users/requester/sessions/{session.session_id}"
    assert client.delete(api).status_code == 200
    client.force_login(demo["approver"])
    body = client.get("/audit/").content.decode()
    assert f'id="decision-{response.pk}"' in body and "deleted " in body and "by requester (kept here)" in body
    assert f'href="/sessions/{session.pk}/"' not in body  # the conversation page is gone
    assert client.get(f"/tickets/{call.pk}/").status_code == 200  # the ticket stays, for auditors
    assert Response.objects.filter(pk=response.pk).exists()  # and in the exports (test_audit_export)
