"""On SQLite the ticket hook's common cases are plain SQL (approvals.ticket_sqlite): a ticket opened by
its event, a tool's initial response. Pinned here against the ORM path it replaces, the same events
appended to two conversations, one each way: the same ticket, the same stored status, one outbox row
whose task is sent once after commit, the same announcements; a call seen twice opens one ticket; an
initial response is recorded once; a policy that applies or a live standing grant still goes the
ORM path (the policy routes, the grant decides)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.utils import timezone

from agents_app.models import AdkSession
from agents_app.session_service import DjangoSessionService
from approvals import events, services, ticket_sqlite
from approvals.models import PendingCall, StandingGrant
from notifications.models import NotificationEvent
from tests.approvals.test_ticket_hook import APP, USER, _call, _response

pytestmark = pytest.mark.django_db(transaction=True)
FIELDS = [
    f.attname
    for f in PendingCall._meta.concrete_fields
    if f.attname not in ("id", "session_id", "event_id", "created_at", "updated_at")
]


@pytest.fixture
def seen(monkeypatch) -> dict[str, list[Any]]:
    """The tasks sent (not run), the tickets announced, and which way each hook call went."""
    from adkweb.celery import app

    got: dict[str, list[Any]] = {"tasks": [], "announced": [], "sql": []}
    monkeypatch.setattr(app, "send_task", lambda name, args=(), **kw: got["tasks"].append((name, args)))
    monkeypatch.setattr(
        events, "notify_ticket_changed", lambda **kw: got["announced"].append((kw["ticket_id"], kw.get("opened")))
    )
    record = ticket_sqlite.record
    assert services.sqlite_record is record  # wired by ApprovalsConfig.ready
    monkeypatch.setattr(services, "sqlite_record", lambda *a: got["sql"].append(record(*a)) or got["sql"][-1])
    return got


async def _conversation(events_: list[Any]) -> AdkSession:
    service = DjangoSessionService()
    session = await service.create_session(app_name=APP, user_id=USER)
    for event in events_:
        await service.append_event(session, event)
    return await AdkSession.objects.aget(session_id=session.id)


def _flow(call_id: str) -> list[Any]:
    return [
        _call(call_id, "ask_for_approval", long_running=True),
        _response(call_id, "ask_for_approval", {"status": "pending", "ticket": call_id}),
        _response(call_id, "ask_for_approval", {"status": "later, not recorded"}),  # the initial one stays
    ]


def _ticket(call_id: str) -> dict[str, Any]:
    t = PendingCall.objects.get(call_id=call_id)
    return {name: getattr(t, name) for name in FIELDS} | {"pk": t.pk, "session": t.session_id}


async def test_a_ticket_in_plain_sql_is_what_the_orm_path_writes(demo, seen, monkeypatch):
    sql_session = await _conversation(_flow("call-sql"))
    assert seen["sql"] == [True, True, True]  # the call, its initial response, the later response
    with monkeypatch.context() as m:
        m.setattr(services, "sqlite_record", lambda *a: False)  # the ORM path
        orm_session = await _conversation(_flow("call-orm"))

    sql, orm = await sync_to_async(_ticket)("call-sql"), await sync_to_async(_ticket)("call-orm")
    assert sql["session"] == sql_session.pk and orm["session"] == orm_session.pk
    differ = {k for k in FIELDS if sql[k] != orm[k]}
    assert differ == {"call_id", "initial_response"}, {k: (sql[k], orm[k]) for k in differ}
    assert sql["initial_response"] == {"status": "pending", "ticket": "call-sql"}
    assert sql_session.status == orm_session.status == "waiting"
    for t in (sql, orm):  # one outbox row each, owed, its task sent once after commit
        (row,) = [r async for r in NotificationEvent.objects.filter(ticket_id=t["pk"])]
        assert (row.name, row.data, row.fanned_out_at, row.turn_id) == ("ticket.opened", {}, None, None)
        assert seen["tasks"].count(("notifications.tasks.event_fan_out", (row.pk,))) == 1
    assert len(seen["tasks"]) == 2
    for t in (sql, orm):  # opened (inbox and page), then its initial response (its page)
        assert [opened for pk, opened in seen["announced"] if pk == t["pk"]] == [True, False]
    await sync_to_async(connections.close_all)()


async def test_a_call_seen_twice_opens_one_ticket(demo, seen):
    service = DjangoSessionService()
    session = await service.create_session(app_name=APP, user_id=USER)
    await service.append_event(session, _call("twice", "ask_for_approval", long_running=True))
    await service.append_event(session, _call("twice", "ask_for_approval", long_running=True))
    assert seen["sql"] == [True, True]
    assert await PendingCall.objects.filter(call_id="twice").acount() == 1
    assert await NotificationEvent.objects.acount() == 1 and len(seen["tasks"]) == 1
    assert [opened for _, opened in seen["announced"]] == [True]
    await sync_to_async(connections.close_all)()


async def test_a_policy_that_applies_and_a_live_grant_go_the_orm_path(demo, seen):
    from approvals.models import Policy

    await Policy.objects.acreate(
        name="big", agent=APP, tool="ask_for_approval", condition="amount > 10", required_approvals=2
    )
    await _conversation([_call("ruled", "ask_for_approval", long_running=True)])
    ruled = await PendingCall.objects.aget(call_id="ruled")
    assert seen["sql"] == [False] and (ruled.policy_name, ruled.required_approvals) == ("big", 2)

    await Policy.objects.all().adelete()
    first = await PendingCall.objects.select_related("session").aget(call_id="ruled")
    await StandingGrant.objects.acreate(
        ticket=first,
        session=first.session,
        app_name=APP,
        tool_name="ask_for_approval",
        kind=first.kind,
        scope="user",
        requester=USER,
        created_by=demo["approver"],
        expires_at=timezone.now() + timedelta(hours=1),
    )
    await _conversation([_call("granted", "ask_for_approval", long_running=True)])
    granted = await PendingCall.objects.aget(call_id="granted")
    assert seen["sql"] == [False, False] and granted.status == PendingCall.Status.APPROVED
    await sync_to_async(connections.close_all)()
