"""`adkweb.compiled.rows`: a `values_list` query compiled once per process, its arguments swapped in
per call. What a caller sees must be what the ORM gives: the same rows, JSON decoded, datetimes as
datetimes (SQLite stores them as text), a str argument kept apart from a str constant of the query."""

from __future__ import annotations

import datetime

from django.contrib.auth.models import User
from django.db.models import QuerySet

from adkweb import compiled
from agents_app.models import ApiToken, StoredEvent
from agents_app.tokens import token_create, token_user
from tests.approvals_factories import session_for


def _events(session_pk: int, after_pk: int) -> QuerySet:
    found = StoredEvent.objects.filter(session_id=session_pk, pk__gt=after_pk).exclude(author="user")
    return found.order_by("id").values_list("pk", "author", "data", "timestamp")


def _store(session, author: str, n: int) -> StoredEvent:
    return StoredEvent.objects.create(
        session=session, event_id=f"e{n}", author=author, timestamp=float(n), data={"id": f"e{n}", "n": [n, {"x": n}]}
    )


def test_rows_are_the_orms_for_each_call_and_the_query_is_built_once(demo):
    built: list[tuple] = []

    def build(session_pk: int, after_pk: int) -> QuerySet:
        built.append((session_pk, after_pk))
        return _events(session_pk, after_pk)

    first, second = session_for(user_id="a"), session_for(user_id="b")
    stored = [_store(first, author, n) for n, author in enumerate(["agent", "user", "agent", "tool"])]
    _store(second, "agent", 9)
    for session, after in ((first, 0), (first, stored[0].pk), (second, 0), (first, stored[-1].pk)):
        got = compiled.rows("test_events", (), build, session.pk, after)
        assert got == [list(row) for row in _events(session.pk, after)]
    assert got == []
    assert compiled.rows("test_events", (), build, first.pk, 0)[0][2] == {"id": "e0", "n": [0, {"x": 0}]}
    assert len(built) == 1  # compiled once, with stand-ins for the arguments


def test_the_columns_converters_are_asked_once_per_connection_and_query(demo, monkeypatch):
    from django.db import connection

    session = session_for(user_id="a")
    _store(session, "agent", 1)
    orms = [list(row) for row in _events(session.pk, 0)]
    asked: list[object] = []
    ask = connection.ops.get_db_converters

    def counted(expression: object) -> list:
        asked.append(expression)
        return ask(expression)

    monkeypatch.setattr(connection.ops, "get_db_converters", counted)
    for _ in range(3):
        assert compiled.rows("test_converted", (), _events, session.pk, 0) == orms  # JSON decoded, and so on
    assert orms[0][2] == {"id": "e1", "n": [1, {"x": 1}]}
    assert len(asked) == 4, asked  # each of the four columns, once


def test_a_str_argument_equal_to_a_constant_of_the_query_stays_an_argument(demo):
    """The query excludes author "user"; asking for author "user" must still find the user's rows."""
    session = session_for(user_id="a")
    _store(session, "user", 1)
    _store(session, "agent", 2)

    def build(author: str) -> QuerySet:
        return StoredEvent.objects.filter(author=author).exclude(author="nobody").values_list("event_id", flat=False)

    assert compiled.rows("test_by_author", (), build, "user") == [["e1"]]
    assert compiled.rows("test_by_author", (), build, "agent") == [["e2"]]
    assert compiled.rows("test_by_author", (), build, "nobody") == []


def test_an_argument_that_is_not_a_parameter_falls_back_to_the_orm(demo):
    session = session_for(user_id="a")
    _store(session, "agent", 1)
    _store(session, "agent", 2)

    def build(limit: int) -> QuerySet:  # a slice's bound is in the SQL text, not a parameter
        return StoredEvent.objects.order_by("id").values_list("event_id")[:limit]

    assert compiled.rows("test_sliced", (), build, 1) == [["e1"]]
    assert compiled.rows("test_sliced", (), build, 2) == [["e1"], ["e2"]]


def test_the_token_lookup_gives_the_user_and_keeps_its_bookkeeping(demo):
    """agents_app.tokens.token_user, compiled once: the token's user (a whole User), None for a
    revoked token, an inactive user or an unknown key, and `last_used_at` written at most once a minute."""
    alice = User.objects.create_user("alice", email="a@example.com", first_name="Alice")
    token, key = token_create(user=alice, name="ci")
    user = token_user(key)
    assert isinstance(user, User) and (user.pk, user.username, user.email, user.first_name) == (
        alice.pk,
        "alice",
        "a@example.com",
        "Alice",
    )
    assert user.date_joined == alice.date_joined and user.is_active
    used = ApiToken.objects.get(pk=token.pk).last_used_at
    assert used is not None
    assert token_user(f"  {key} ") == user  # the key as a header may carry it
    assert ApiToken.objects.get(pk=token.pk).last_used_at == used  # not again within the minute
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=used - datetime.timedelta(minutes=2))
    token_user(key)
    assert ApiToken.objects.get(pk=token.pk).last_used_at > used
    assert token_user(key + "x") is None
    User.objects.filter(pk=alice.pk).update(is_active=False)
    assert token_user(key) is None
    User.objects.filter(pk=alice.pk).update(is_active=True)
    ApiToken.objects.filter(pk=token.pk).update(revoked_at=used)
    assert token_user(key) is None


def test_instances_are_the_orms_for_each_call(demo):
    """`compiled.instances`: each pk's own row, every field as the ORM loads it (JSON decoded, datetimes
    as datetimes), nothing for a pk no row has; compiled once (the notifications' reads by pk)."""
    from approvals.models import PendingCall
    from tests.approvals_factories import ticket

    built: list[int] = []

    def build(pk: int) -> QuerySet:
        built.append(pk)
        return PendingCall.objects.filter(pk=pk)

    tickets = [ticket(args={"amount": n, "purpose": f"p{n}"}) for n in range(3)]
    for t in [*tickets, tickets[0]]:
        (got,) = compiled.instances(PendingCall, "test_ticket_by_pk", build, t.pk)
        orm = PendingCall.objects.get(pk=t.pk)
        fields = [f.attname for f in PendingCall._meta.concrete_fields]
        assert [getattr(got, f) for f in fields] == [getattr(orm, f) for f in fields]
        assert got.args == t.args and isinstance(got.created_at, datetime.datetime)
        assert not got._state.adding and got._state.db == "default"
    assert compiled.instances(PendingCall, "test_ticket_by_pk", build, max(t.pk for t in tickets) + 1) == []
    assert len(built) == 1


def test_owed_says_each_sessions_own_queue(demo):
    """Turn.owed (asked at every drain's end, compiled once): one session's queued turn is not another's."""
    from agents_app.models import Turn

    first, second = session_for(user_id="a"), session_for(user_id="b")
    turn = Turn.objects.create(session=first, kind=Turn.Kind.MESSAGE, content={}, status=Turn.Status.QUEUED)
    Turn.objects.create(session=second, kind=Turn.Kind.MESSAGE, content={}, status=Turn.Status.DONE)
    assert [Turn.owed(first.pk), Turn.owed(second.pk)] == [True, False]
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.RUNNING)
    assert [Turn.owed(first.pk), Turn.owed(second.pk)] == [False, False]
