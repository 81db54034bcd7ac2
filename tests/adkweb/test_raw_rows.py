"""`adkweb.raw_rows.raw`: `Model.objects.raw` with its column plan worked out once per connection and
statement. Pinned here against Django's RawQuerySet on the same statements: every field's value and
type (JSON beyond ASCII, datetimes, booleans, foreign keys), the fields a statement leaves out deferred,
columns that are no field set as attributes, an `UPDATE … RETURNING *`, no rows; the plan is worked out
once per statement and each statement gets its own (columns in another order, other columns)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import FieldDoesNotExist
from django.db import connection
from django.db.backends.base.introspection import BaseDatabaseIntrospection

from adkweb.raw_rows import raw
from agents_app.models import AdkSession
from approvals.models import PendingCall
from tests.approvals_factories import ticket

pytestmark = pytest.mark.django_db(transaction=True)
TICKETS = PendingCall._meta.db_table
SESSIONS = AdkSession._meta.db_table


def _same(ours: list[Any], django: list[Any], extra: tuple[str, ...] = ()) -> None:
    assert len(ours) == len(django)
    for a, b in zip(ours, django, strict=True):
        assert type(a) is type(b)
        assert a.get_deferred_fields() == b.get_deferred_fields()
        for f in a._meta.concrete_fields:
            if f.attname in a.get_deferred_fields():
                continue
            va, vb = getattr(a, f.attname), getattr(b, f.attname)
            assert (va, type(va)) == (vb, type(vb)), f.attname
        for name in extra:
            assert getattr(a, name) == getattr(b, name)
        assert (a._state.adding, a._state.db) == (b._state.adding, b._state.db) == (False, "default")


def test_rows_are_the_raw_querysets(demo):
    t1 = ticket(args={"purpose": "café ✓", "amount": 12.5})
    t2 = ticket(escalated_at=None)
    EXTRA = ("seven", "tagged")  # noqa: N806
    cases = [
        (f"SELECT * FROM {TICKETS} WHERE id IN (%s, %s) ORDER BY id", [t1.pk, t2.pk], ()),
        (f"SELECT created_at, id, status, args FROM {TICKETS} WHERE id = %s", [t1.pk], ()),  # the rest deferred
        (f"SELECT id, app_name, 7 AS seven, 'x' || status AS tagged FROM {TICKETS} WHERE id = %s", [t2.pk], EXTRA),
        (f"SELECT * FROM {TICKETS} WHERE id = %s", [-1], ()),
    ]  # fmt: skip
    for sql, params, extra in cases:
        _same(raw(PendingCall, sql, params), list(PendingCall.objects.raw(sql, params)), extra)
    ours = raw(PendingCall, cases[0][0], cases[0][1])
    assert ours[0].args == {"purpose": "café ✓", "amount": 12.5} and ours[0].created_at.tzinfo is not None
    assert ours[0].session_id == t1.session_id
    assert raw(PendingCall, cases[1][0], cases[1][1])[0].get_deferred_fields() >= {"app_name", "requester"}


def test_an_update_returning_its_row(demo):
    t = ticket()
    sql = f"UPDATE {SESSIONS} SET revision = revision + 1 WHERE id = %s RETURNING *"
    theirs = list(AdkSession.all_objects.raw(sql, [t.session_id]))
    ours = raw(AdkSession, sql, [t.session_id])
    assert ours[0].revision == theirs[0].revision + 1  # each ran its UPDATE
    theirs[0].revision = ours[0].revision
    _same(ours, theirs)
    assert raw(AdkSession, sql, [-5]) == []


def test_the_plan_is_worked_out_once_per_statement(demo, monkeypatch):
    t = ticket()
    first = f"SELECT id, status, app_name FROM {TICKETS} WHERE id = %s"
    other = f"SELECT app_name, requester, id FROM {TICKETS} WHERE id = %s"  # another order, another column
    raw(PendingCall, first, [t.pk])
    calls = []
    real = BaseDatabaseIntrospection.identifier_converter

    def counted(self: Any, name: str) -> str:
        calls.append(name)
        return real(self, name)

    monkeypatch.setattr(type(connection.introspection), "identifier_converter", counted)
    again = raw(PendingCall, first, [t.pk])[0]
    assert calls == [] and (again.pk, again.status, again.app_name) == (t.pk, t.status, t.app_name)
    row = raw(PendingCall, other, [t.pk])[0]
    assert calls  # a new statement: its own plan
    assert (row.pk, row.app_name, row.requester) == (t.pk, t.app_name, t.requester)
    assert row.get_deferred_fields() >= {"status"}


def test_a_statement_without_the_primary_key_is_refused(demo):
    ticket()
    with pytest.raises(FieldDoesNotExist):
        raw(PendingCall, f"SELECT status FROM {TICKETS}")
