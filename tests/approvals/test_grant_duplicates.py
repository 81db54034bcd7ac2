"""One standing grant in force per what it approves: the same grant given twice made two, and revoking one
left the other approving. Now a like grant is refused (409 naming the one in force) on the API, with a
decision and on the ticket page; the database holds it too (migration 0012's constraints), and migration
0011 ends the duplicates a database already has, keeping the newest."""

from __future__ import annotations

from datetime import timedelta
from importlib import import_module

import pytest
from django.apps import apps
from django.db import IntegrityError, connection, transaction
from django.test import Client
from django.utils import timezone

from approvals import grants, services
from approvals.models import PendingCall, Response, StandingGrant
from tests.approvals.policy_helpers import open_ticket, policy
from tests.approvals_factories import session_for


def _give(client: Client, ticket: PendingCall, scope: str = "user", minutes: int = 60):
    body = {"ticket": ticket.pk, "scope": scope, "minutes": minutes}
    return client.post("/api/grants", body, content_type="application/json")


@pytest.fixture
def decided(demo) -> PendingCall:
    ticket = open_ticket()
    services.ticket_approve(ticket=ticket, actor=demo["approver"])
    return ticket


def test_the_same_grant_twice_on_the_api_is_409_naming_the_one_in_force(api, demo, decided):
    other = open_ticket(session=session_for())  # the same requester's other conversation
    services.ticket_approve(ticket=other, actor=demo["approver"])
    first = _give(api(demo["approver"]), decided)
    assert first.status_code == 201, first.content
    grant = first.json()["id"]
    for who in ("approver", "admin"):  # another approver's like grant is a duplicate too
        again = _give(api(demo[who]), decided, minutes=5)
        assert again.status_code == 409, again.content
        detail = again.json()["detail"]
        assert f"Standing grant #{grant} already allows ask_for_approval" in detail and "given by approver" in detail
    assert StandingGrant.objects.count() == 1
    # what differs in what it approves is no duplicate: this conversation only, or another conversation's
    assert _give(api(demo["approver"]), decided, scope="session").status_code == 201
    assert _give(api(demo["approver"]), other, scope="session").status_code == 201
    assert _give(api(demo["approver"]), other, scope="user").status_code == 409  # the same requester
    # revoked: a new one may be given, and it is the only one approving
    assert api(demo["approver"]).delete(f"/api/grants/{grant}").status_code == 200
    renewed = _give(api(demo["approver"]), decided)
    assert renewed.status_code == 201, renewed.content
    assert [g["id"] for g in api(demo["approver"]).get("/api/grants?active=1").json() if g["scope"] == "user"] == [
        renewed.json()["id"]
    ]


def test_an_ended_grant_does_not_block_a_new_one(demo, decided):
    old = grants.grant_create(ticket=decided, actor=demo["approver"], spec=grants.GrantSpec("user", 5))
    StandingGrant.objects.filter(pk=old.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    new = grants.grant_create(ticket=decided, actor=demo["approver"], spec=grants.GrantSpec("user", 5))
    old.refresh_from_db()
    assert (old.current, old.revoked_at, new.current) == (False, None, True)  # ended, not revoked: its record stays


def test_a_decision_with_a_like_grant_is_409_and_records_nothing(demo, decided):
    nxt = open_ticket(session=decided.session, args={"purpose": "taxi", "amount": 30.0})  # open before the grant
    grants.grant_create(ticket=decided, actor=demo["approver"], spec=grants.GrantSpec("session", 60))
    with pytest.raises(grants.Conflict, match=r"Standing grant #\d+ already allows"):
        services.ticket_approve(ticket=nxt, actor=demo["approver2"], grant=grants.GrantSpec("session", 30))
    nxt.refresh_from_db()
    assert nxt.is_open and not Response.objects.filter(pending_call=nxt).exists()
    assert StandingGrant.objects.count() == 1


def test_the_ticket_page_shows_the_refusal_and_sends_nothing(demo):
    session = session_for()
    first, second = open_ticket(session=session), open_ticket(session=session, args={"purpose": "bus", "amount": 3.0})
    services.ticket_approve(ticket=first, actor=demo["approver"], grant=grants.GrantSpec("session", 60))
    grant = StandingGrant.objects.get()
    c = Client()
    c.force_login(demo["approver2"])
    form = {"approve-comment": "ok", "approve-grant_scope": "session", "approve-grant_for": "2"}
    form |= {"approve-grant_unit": "hours", "approve-args_hash": second.args_hash}
    r = c.post(f"/tickets/{second.pk}/approve/", form)
    assert r.status_code == 409, r.status_code
    assert f"Standing grant #{grant.pk} already allows ask_for_approval" in r.content.decode()
    second.refresh_from_db()
    assert second.is_open and StandingGrant.objects.count() == 1


def test_the_database_refuses_a_second_current_like_grant(demo, decided):
    for scope in ("user", "session"):
        given = grants.grant_create(ticket=decided, actor=demo["approver"], spec=grants.GrantSpec(scope, 60))
        copy = {f.attname: getattr(given, f.attname) for f in StandingGrant._meta.concrete_fields if f.name != "id"}
        with pytest.raises(IntegrityError), transaction.atomic():
            StandingGrant.objects.create(**copy)  # policy NULL too: the constraint coalesces it
        StandingGrant.objects.create(**{**copy, "current": False})  # a retired one holds no place


def test_the_migration_ends_duplicates_keeping_the_newest_and_the_record(demo, decided):
    """Rows as a database before 0011 may hold them: a like grant given three times, an ended one."""
    strict = policy("strict", tool="ask_for_approval", condition="amount > 10000")
    editor, constraints = connection.schema_editor(), StandingGrant._meta.constraints
    with connection.cursor() as cursor:  # (SQLite's schema editor will not run inside the test's transaction)
        for constraint in constraints:
            cursor.execute(str(constraint.remove_sql(StandingGrant, editor)))
    given = [
        grants._insert(decided, demo[who], grants.GrantSpec("user", 60)) for who in ("approver", "approver2", "admin")
    ]
    other = StandingGrant.objects.create(**{**_fields(given[0]), "policy_id": strict.pk})  # another policy's: kept
    ended = StandingGrant.objects.create(**{**_fields(given[0]), "expires_at": timezone.now()})
    import_module("approvals.migrations.0011_grant_current").retire_and_end_duplicates(apps, None)
    with connection.cursor() as cursor:  # the constraints build: one current grant per key is left
        if connection.vendor == "postgresql":  # (migration 0012 runs in a transaction of its own)
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        for constraint in constraints:
            cursor.execute(str(constraint.create_sql(StandingGrant, editor)))
    rows = {g.pk: g for g in StandingGrant.objects.all()}
    newest = given[-1].pk
    assert rows[newest].revoked_at is None and rows[newest].current
    assert rows[other.pk].revoked_at is None and rows[other.pk].current
    assert rows[ended.pk].revoked_at is None and not rows[ended.pk].current
    for g in given[:-1]:
        row = rows[g.pk]
        assert row.revoked_at is not None and row.revoked_by is None and not row.current
        assert (
            row.revoked_reason
            == f"Ended by migration 0011: a duplicate of standing grant #{newest}, which stays in force."
        )
        assert row.created_by == g.created_by  # who gave it stays
    page = Client()
    page.force_login(demo["admin"])
    assert f"a duplicate of standing grant #{newest}" in page.get("/grants/").content.decode()
    assert open_ticket().status == "approved"  # the one kept still approves
    assert Response.objects.filter(grant_id=newest).exists()


def _fields(grant: StandingGrant) -> dict:
    return {f.attname: getattr(grant, f.attname) for f in StandingGrant._meta.concrete_fields if f.name != "id"}
