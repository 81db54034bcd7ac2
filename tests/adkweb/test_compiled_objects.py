"""`adkweb.compiled_objects.objects`: `list(build(*args))` with the query compiled once per connection.
Pinned against the ORM on the same querysets: every field of the row and of its `select_related` rows
(nullable ones absent and present), deferred fields, annotations, the order; each call with its own
arguments; compiled once; and the querysets it cannot take answered by the ORM."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Exists, OuterRef
from django.db.models.sql.compiler import SQLCompiler
from django.test.utils import CaptureQueriesContext

from adkweb.compiled_objects import objects
from approvals.models import PendingCall, Response, TicketActivity
from tests.approvals_factories import ticket

pytestmark = pytest.mark.django_db(transaction=True)
RELATED = ("session", "closed_by", "assigned_to", "edited_by", "policy")


def _fields(obj: Any) -> dict[str, Any]:
    return {
        f.attname: (getattr(obj, f.attname), type(getattr(obj, f.attname)))
        for f in obj._meta.concrete_fields
        if f.attname not in obj.get_deferred_fields()
    }


def _same(ours: list[Any], django: list[Any], related: tuple[str, ...] = (), extra: tuple[str, ...] = ()) -> None:
    assert [o.pk for o in ours] == [d.pk for d in django]
    for a, b in zip(ours, django, strict=True):
        assert type(a) is type(b) and a.get_deferred_fields() == b.get_deferred_fields()
        assert _fields(a) == _fields(b)
        assert (a._state.adding, a._state.db) == (False, "default")
        for name in extra:
            assert getattr(a, name) == getattr(b, name)
        for path in related:
            ra, rb = a, b
            for part in path.split("__"):
                assert a._meta.model is b._meta.model
                with CaptureQueriesContext(connection) as reads:
                    ra, rb = getattr(ra, part), getattr(rb, part)
                assert not reads.captured_queries, f"{path}: loaded with the row, not read again"
                if rb is None:
                    assert ra is None
                    break
                assert _fields(ra) == _fields(rb)


def test_instances_and_their_related_rows_are_the_orms(demo):
    decider = User.objects.get(username="approver")
    t1 = ticket(args={"purpose": "café ✓", "amount": 12.5})
    t2 = ticket()
    PendingCall.objects.filter(pk=t2.pk).update(closed_by=decider, assigned_to=decider)
    Response.objects.create(pending_call=t1, action="approve", payload={"ok": True}, final=False, actor=decider)
    Response.objects.create(pending_call=t1, action="update", payload={"p": 1}, final=False, actor=None)
    TicketActivity.objects.create(ticket=t1, kind=TicketActivity.Kind.EDITED, actor=decider, message="m")

    def by_pk(pk: int) -> Any:
        return PendingCall.objects.select_related(*RELATED).filter(pk=pk)

    for t in (t1, t2):
        _same(objects("t.ticket", (), by_pk, t.pk), list(by_pk(t.pk)), related=RELATED)
    assert objects("t.ticket", (), by_pk, -1) == []

    def responses(pk: int) -> Any:
        return Response.objects.filter(pending_call_id=pk).select_related("actor", "grant__created_by").order_by("id")

    _same(objects("t.responses", (), responses, t1.pk), list(responses(t1.pk)), related=("actor", "grant"))

    def deferred(pk: int, status: str) -> Any:
        rows = PendingCall.objects.filter(session_id=pk).exclude(status=status).only("id", "status", "session_id")
        return rows.annotate(answered=Exists(Response.objects.filter(pending_call=OuterRef("pk")))).order_by("-id")

    ours = objects("t.deferred", (), deferred, t1.session_id, "zzz")
    _same(ours, list(deferred(t1.session_id, "zzz")), extra=("answered",))
    assert (
        ours
        and ours[0].get_deferred_fields()
        and {o.answered for o in ours} == {True} | ({False} if len(ours) > 1 else set())
    )
    assert [o.pk for o in objects("t.deferred", (), deferred, t1.session_id, "pending")] == [
        o.pk for o in deferred(t1.session_id, "pending")
    ]


def test_compiled_once_per_connection_and_key(demo, monkeypatch):
    t = ticket()
    compiled = []
    original = SQLCompiler.as_sql

    def counting(self: SQLCompiler, *args: Any, **kwargs: Any) -> Any:
        compiled.append(self.query.model)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SQLCompiler, "as_sql", counting)

    def build(pk: int) -> Any:
        return TicketActivity.objects.filter(ticket_id=pk).select_related("actor").order_by("id")

    for _ in range(3):
        assert objects("t.once", (), build, t.pk) == list(build(t.pk))
    orm_compiles = 3  # the ORM's own list(build()) above: once each
    assert len(compiled) == orm_compiles + 1
    objects("t.once", ("another shape",), build, t.pk)
    assert len(compiled) == orm_compiles + 2


def test_what_it_cannot_take_is_the_orms(demo):
    t = ticket()
    Response.objects.create(pending_call=t, action="approve", payload={}, final=False, actor=None)

    def prefetched(pk: int) -> Any:
        return PendingCall.objects.filter(pk=pk).prefetch_related("responses")

    got = objects("t.prefetch", (), prefetched, t.pk)
    assert [g.pk for g in got] == [t.pk]
    with CaptureQueriesContext(connection) as reads:
        assert len(got[0].responses.all()) == 1
    assert not reads.captured_queries, "prefetched as the ORM does"

    def empty_in(pk: int) -> Any:
        return PendingCall.objects.filter(session_id=pk, call_id__in=[])

    assert objects("t.empty", (), empty_in, t.session_id) == []

    def constant(pk: int) -> Any:  # the argument is not a parameter of the query: answered by the ORM
        return PendingCall.objects.filter(pk=t.pk)

    assert [o.pk for o in objects("t.constant", (), constant, -5)] == [t.pk]
