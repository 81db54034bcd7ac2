"""A new turn on SQLite (embedded mode): `services.turn_add` writes it and the session's status in two
plain statements (agents_app.turn_insert.turn_insert_sqlite) instead of the ORM's create and its
post_save receiver. The rows must be the ORM path's."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from google.genai import types

from adkweb.errors import NotFound
from agents_app import services
from agents_app.content import content_json, text_content
from agents_app.models import AdkSession, Turn

pytestmark = pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's path (PostgreSQL: turn_insert)")

_SKIP = {"id", "created_at"}


def _columns(turn_id: int) -> dict:
    row = Turn.objects.filter(pk=turn_id).values().get()
    return {k: v for k, v in row.items() if k not in _SKIP}


def _session(session_id: str) -> AdkSession:
    return services.session_create(app_name="stock_agent", user_id="requester", session_id=session_id)


@pytest.mark.parametrize("answer", [False, True])
def test_a_turns_row_and_status_are_the_orm_paths(demo, answer):
    person = demo["requester"]
    if answer:  # an answer to a ticket: no cap, and the state delta kept
        part = types.Part(function_response=types.FunctionResponse(id="c1", name="ask", response={"ok": "sí"}))
    else:
        part = types.Part(text="Zürich \u2014 caf\u00e9 \U0001f600")
    content = types.Content(role="user", parts=[part])
    ours, theirs = _session("ours"), _session("theirs")
    with transaction.atomic(), CaptureQueriesContext(connection) as seen:
        turn = services.turn_add(
            session=ours, content=content, actor=person, state_delta={"k": [1, "é"]}, streaming=True, enqueue=False
        )
    sql = [q["sql"] for q in seen.captured_queries]
    assert any(s.startswith("INSERT INTO agents_app_turn (session_id") for s in sql), sql
    with transaction.atomic():  # the ORM path, as it was: create, and its post_save receiver's status write
        orm = Turn.objects.create(
            session=theirs,
            kind=turn.kind,
            content=content_json(content),
            state_delta={"k": [1, "é"]},
            streaming=True,
            created_by=person,
            invocation_id="",
        )
    mine, other = _columns(turn.pk), _columns(orm.pk)
    assert mine.pop("session_id") == ours.pk and other.pop("session_id") == theirs.pk
    assert mine == other
    assert mine["kind"] == (Turn.Kind.FUNCTION_RESPONSE if answer else Turn.Kind.MESSAGE)
    assert AdkSession.objects.get(pk=ours.pk).status == AdkSession.objects.get(pk=theirs.pk).status == "running"
    # The returned turn is the row as stored.
    stored = Turn.objects.get(pk=turn.pk)
    for name in ("kind", "content", "state_delta", "streaming", "status", "attempts", "invocation_id", "error"):
        assert getattr(turn, name) == getattr(stored, name), name
    assert turn.created_by_id == person.pk and turn.session_id == ours.pk
    assert abs((stored.created_at - turn.created_at).total_seconds()) < 0.001
    assert stored.created_at <= timezone.now()


def test_a_turn_for_a_session_deleted_since_it_was_read_is_refused_and_writes_nothing(demo):
    """SQLite runs one writer at a time, but the sender read the session before its write transaction
    began: a delete (archive) that committed in between leaves the status write no live row to match,
    and the message is refused as for any deleted session (404), where its turn was queued in the
    archived session, never to run. So is the retry of a failed turn there."""
    session = _session("gone")  # as the conversation page, /run or an approval read it
    failed = Turn.objects.create(session=session, kind=Turn.Kind.MESSAGE, content={}, status=Turn.Status.FAILED)
    services.session_archive(session=AdkSession.objects.get(pk=session.pk))
    with pytest.raises(NotFound, match="^Session not found: gone$"):
        services.message_send(session=session, text="hi", actor=demo["requester"])
    with pytest.raises(NotFound), transaction.atomic():
        services.turn_add(session=session, content=None, invocation_id="inv-1", enqueue=False)
    with pytest.raises(NotFound, match="^Session not found: gone$"):
        services.turn_retry(turn=failed)
    assert list(Turn.objects.filter(session_id=session.pk).values_list("pk", "status")) == [(failed.pk, "failed")]
    assert AdkSession.all_objects.get(pk=session.pk).status == "failed"


def test_a_turn_without_person_has_none(demo):
    session = _session("nobody")
    with transaction.atomic():
        turn = services.turn_add(session=session, content=None, invocation_id="inv-1", enqueue=False)
    row = Turn.objects.get(pk=turn.pk)
    assert (row.created_by_id, row.content, row.state_delta, row.invocation_id) == (None, {}, None, "inv-1")
    assert row.status == Turn.Status.QUEUED and row.kind == Turn.Kind.MESSAGE


def test_a_turn_rolled_back_with_its_transaction_leaves_no_row_and_the_status_as_it_was(demo):
    session = _session("undone")
    with pytest.raises(RuntimeError), transaction.atomic():
        services.turn_add(session=session, content=text_content("hi"), actor=demo["requester"], enqueue=False)
        raise RuntimeError("the caller's next step failed")
    assert not Turn.objects.filter(session=session).exists()
    assert AdkSession.objects.get(pk=session.pk).status == "idle"
