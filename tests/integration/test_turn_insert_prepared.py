"""A message's turn statement(s) prepared once per connection on its pipelined path (agents_app.turn_insert,
adkweb.postgresql.pipelined's `Prepared`): sent as `EXECUTE name(literals)` with the BEGIN and the COMMIT,
parsed once and planned with it, where the text was parsed, analysed and planned at every message; the same
rows. A connection that lost what it prepared (DISCARD ALL, a pooler) still queues the message, once, and
prepares it again (up to adkweb.postgresql.prepared_here.LOSSES times); a pooler in transaction mode gets the text."""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from adkweb.postgresql.prepared_here import LOSSES
from agents_app import pooler, services, turn_insert
from agents_app.models import AdkSession, Turn

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda *, session_pk: True)


def _executed() -> dict[str, int]:
    """The turn statements prepared on this connection: name -> how many times each was executed."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, generic_plans + custom_plans FROM pg_prepared_statements "
            "WHERE name LIKE 'adkweb_turn_insert_%'"
        )
        return dict(cursor.fetchall())


def _send(session: AdkSession, actor=None) -> Turn:
    return services.message_send(session=session, text="hi", actor=actor, streaming=False)


@pytest.mark.parametrize("person", [False, True], ids=["plain", "capped"])
def test_a_messages_statements_are_prepared_once_and_executed(demo, person, settings):
    settings.ADKWEB_MAX_QUEUED_TURNS_PER_USER = 5
    actor = demo["requester"] if person else None
    sessions = [services.session_create(app_name="stock_agent", user_id="requester") for _ in range(3)]
    before = _executed()  # this connection may have run some already (an earlier test's)
    turns = [_send(s, actor) for s in sessions]
    after = _executed()
    assert {s.name: after.get(s.name, 0) - before.get(s.name, 0) for s in turn_insert._prepared(person)} == {
        s.name: 3 for s in turn_insert._prepared(person)
    }
    for session, turn in zip(sessions, turns, strict=True):
        row = Turn.objects.get(pk=turn.pk)
        assert (row.session_id, row.status, row.content, row.created_by_id) == (
            session.pk,
            "queued",
            turn.content,
            actor.pk if actor else None,
        )
        assert AdkSession.objects.get(pk=session.pk).status == "running"


def _discard_all() -> None:
    with connection.cursor() as cursor:
        cursor.execute("DISCARD ALL")


@pytest.mark.usefixtures("fresh_connections")
def test_a_connection_that_lost_its_statements_queues_the_message_once_and_prepares_them_again(demo):
    first, second, third = (services.session_create(app_name="stock_agent", user_id="requester") for _ in range(3))
    _send(first)
    _discard_all()
    _send(second)  # its EXECUTE fails before anything is written: sent again as text
    _send(third)  # prepared again (one DISCARD ALL used to turn the process to text for good)
    assert _executed() == {s.name: 1 for s in turn_insert._prepared(False)}
    for session in (first, second, third):
        assert list(Turn.objects.filter(session=session).values_list("status", flat=True)) == ["queued"]
        assert AdkSession.objects.get(pk=session.pk).status == "running"


@pytest.mark.usefixtures("fresh_connections")  # a connection with no loss yet
def test_a_connection_that_keeps_losing_its_statements_sends_text(demo):
    """A pool resetting each connection, a pooler not recognised: after `LOSSES` losses, text on it."""
    sessions = [services.session_create(app_name="stock_agent", user_id="requester") for _ in range(2 * LOSSES + 1)]
    for i in range(LOSSES):
        _send(sessions[2 * i])  # prepared (again)
        assert set(_executed()) == {s.name for s in turn_insert._prepared(False)}
        _discard_all()
        _send(sessions[2 * i + 1])  # lost: text
    _send(sessions[-1])
    assert _executed() == {}  # text: nothing prepared again
    assert Turn.objects.filter(status="queued").count() == 2 * LOSSES + 1


def test_a_pooler_in_transaction_mode_gets_the_text(demo, monkeypatch):
    monkeypatch.setattr(pooler, "text_only", True)
    session = services.session_create(app_name="stock_agent", user_id="requester")
    before = _executed()
    _send(session)
    assert _executed() == before  # none executed (none prepared, here or earlier)
    assert Turn.objects.filter(session=session).count() == 1


def test_the_prepared_statements_generic_plan_reaches_the_session_by_id(demo):
    now = timezone.now().timestamp()
    AdkSession.objects.bulk_create(
        [
            AdkSession(app_name="a", user_id="u", session_id=f"s{i}", state={}, create_time=now, update_time=now)
            for i in range(300)
        ]
    )
    (statement,) = turn_insert._prepared(False)
    execute = statement.execute.replace(statement.name, "plan_probe", 1)
    params = dict(session=1, kind="m", content="{}", state=None, streaming=False, invocation="e", user=None)
    with connection.cursor() as cursor:
        cursor.execute(statement.prepare.replace(statement.name, "plan_probe", 1))
        cursor.execute("SET plan_cache_mode = force_generic_plan")
        try:
            cursor.execute("EXPLAIN " + execute, params | {"now": timezone.now()})
            plan = "\n".join(r[0] for r in cursor.fetchall())
        finally:
            cursor.execute("RESET plan_cache_mode")
            cursor.execute("DEALLOCATE plan_probe")
    assert "$1" in plan  # generic
    scan = next(line for line in plan.splitlines() if "Scan" in line)
    assert "_pkey" in scan and "archived" not in scan, plan
