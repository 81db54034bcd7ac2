"""A message's BEGIN and its turn's statements in one round trip on PostgreSQL (agents_app.turn_insert:
the BEGIN leads their query string when they are the transaction's first, and psycopg sends none of
its own): the same rows as before, its errors raised as Django's with the transaction rolled back,
and the statements alone where the transaction had begun already (a retried request's
Idempotency-Key record)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from django.db import DataError, connection, transaction
from google.genai import types

from agents_app import services
from agents_app.models import AdkSession, Turn
from agents_app.services import TooManyTurns

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_connections")]


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The turn statements as they leave, and whether a transaction was open then; the server's
    notices ("there is already a transaction in progress": a BEGIN of psycopg's sent before ours, a
    round trip of its own) under "notices". No wake-up leaves (no worker here; the wake list is every
    worker's)."""
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda **kwargs: True)
    seen: list[dict[str, Any]] = []
    connection.ensure_connection()
    notices: list[str] = []
    connection.connection.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))

    def record(execute, sql, params, many, context):
        if "agents_app_turn" in sql or "FOR NO KEY UPDATE" in sql:
            raw = context["connection"].connection
            seen.append({"sql": sql, "begun": raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE})
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield seen
    assert notices == []


def _statuses(session: AdkSession) -> list[str]:
    return list(Turn.objects.filter(session=session).values_list("status", flat=True))


def test_a_messages_begin_and_turn_go_in_one_round_trip(demo, sent):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    turn = services.message_send(session=session, text="hi", streaming=False)
    assert [s["begun"] for s in sent] == [False]  # no BEGIN of psycopg's before it: it leads the statement
    assert sent[0]["sql"].startswith("BEGIN; WITH") and "INSERT INTO agents_app_turn" in sent[0]["sql"]
    assert _statuses(session) == ["queued"]
    assert Turn.objects.get(pk=turn.pk).content == {"role": "user", "parts": [{"text": "hi"}]}
    assert AdkSession.objects.get(pk=session.pk).status == "running"


def test_a_capped_message_locks_the_person_then_inserts_in_the_same_round_trip(demo, sent, settings):
    settings.ADKWEB_MAX_QUEUED_TURNS_PER_USER = 2
    person = demo["requester"]
    session = services.session_create(app_name="stock_agent", user_id="requester")
    for _ in range(2):
        services.message_send(session=session, text="hi", actor=person, streaming=False)
    with pytest.raises(TooManyTurns):
        services.message_send(session=session, text="hi", actor=person, streaming=False)
    # Each message: the BEGIN, the person's lock and the insert in one query string (with its COMMIT:
    # adkweb.postgresql.pipelined); the refused one's count for its message after it, its transaction
    # (a lock taken, nothing written) committed by then.
    assert [s["begun"] for s in sent] == [False] * 4
    assert all(s["sql"].startswith("BEGIN; SELECT 1 FROM auth_user") and "INSERT" in s["sql"] for s in sent[:3])
    assert _statuses(session) == ["queued", "queued"]  # the third refused, nothing of it written


def test_in_a_transaction_already_begun_the_statements_go_as_one_query_string(demo, sent, settings):
    settings.ADKWEB_MAX_QUEUED_TURNS_PER_USER = 5
    session = services.session_create(app_name="stock_agent", user_id="requester")
    with transaction.atomic():
        AdkSession.objects.filter(pk=session.pk).exists()  # the BEGIN is sent here
        services.message_send(session=session, text="hi", actor=demo["requester"], streaming=False)
    assert [s["begun"] for s in sent] == [True]
    assert sent[0]["sql"].startswith("SELECT 1 FROM auth_user") and "INSERT" in sent[0]["sql"]
    assert _statuses(session) == ["queued"]


def test_a_statement_begun_with_that_fails_raises_djangos_error_and_rolls_back(demo, sent):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    nul = types.Content(role="user", parts=[types.Part(text="a\x00b")])  # jsonb refuses \u0000
    with pytest.raises(DataError):
        services.turn_create(session=session, content=nul)
    assert sent[0]["sql"].startswith("BEGIN; ")
    assert _statuses(session) == []
    assert AdkSession.objects.get(pk=session.pk).status == "idle"  # the status write rolled back with it
    services.message_send(session=session, text="hi", streaming=False)  # the connection is usable
    assert _statuses(session) == ["queued"]
