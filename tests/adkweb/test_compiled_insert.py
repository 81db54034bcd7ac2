"""`adkweb.compiled_insert.inserted`: on SQLite, a session's row (its creation) and a decision's row
(`approvals.record.response_append`) written by an INSERT whose SQL is written once per process, not
compiled by the ORM per call. Pinned here: the rows are the ORM's, column by column (JSON beyond ASCII,
booleans, auto_now_add times, the columns left to their database defaults, read back onto the row as
the ORM reads them); a second live session of one identity is still refused; the row goes with its
transaction; the decision chain still verifies."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.db.models.sql.compiler import SQLInsertCompiler
from google.adk.errors.already_exists_error import AlreadyExistsError

from adkweb import compiled_insert
from agents_app import session_orm
from agents_app.models import AdkSession
from approvals import chain
from approvals.models import Response
from approvals.record import response_append
from tests.approvals_factories import ticket

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's path"),
]
DELTAS: dict[str, dict[str, Any]] = {"app": {}, "user": {}, "session": {"café": "naïve ✓", "n": 1}}


def _columns(row: Any, *, but: tuple[str, ...]) -> dict[str, Any]:
    return {f.attname: getattr(row, f.attname) for f in row._meta.concrete_fields if f.attname not in but}


def test_a_sessions_row_is_the_orms_written_without_compiling(monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(SQLInsertCompiler, "as_sql", lambda *a, **k: pytest.fail("the ORM compiled the INSERT"))
        pk, revision, app_state, user_state = session_orm.create("app_a", "ann", "s-1", DELTAS, 1700000000.25)
        with pytest.raises(AlreadyExistsError):  # the live identity's unique constraint, as before
            session_orm.create("app_a", "ann", "s-1", DELTAS, 1700000001.0)
    ours = AdkSession.all_objects.get(pk=pk)
    assert (revision, app_state, user_state) == (0, {}, {})
    orm = AdkSession.all_objects.create(
        app_name="app_a", user_id="ann", session_id="s-2", state=DELTAS["session"], create_time=1700000000.25,
        update_time=1700000000.25,
    )  # fmt: skip
    orm.refresh_from_db()
    assert _columns(ours, but=("id", "session_id")) == _columns(orm, but=("id", "session_id"))
    assert ours.state == {"café": "naïve ✓", "n": 1} and ours.status == "idle"


def test_a_decisions_row_is_the_orms_written_without_compiling(demo, monkeypatch):
    t = ticket()
    fields = dict(pending_call=t, action="approve", payload={"status": "approved", "note": "ça ✓"}, final=True)
    with transaction.atomic():
        orm = Response.objects.create(**fields, actor=demo["approver"], actor_username="approver")
    with monkeypatch.context() as m:
        m.setattr(SQLInsertCompiler, "as_sql", lambda *a, **k: pytest.fail("the ORM compiled the INSERT"))
        with transaction.atomic():
            ours = response_append(actor=demo["approver"], link=False, **fields)
            assert ours.pk and not ours._state.adding
            assert ours.chain_hash == "" and ours.source == "person"  # left to the database: read back
    with transaction.atomic():
        chain.link([orm, ours])  # the first links ever make the chain's head (the ORM's)
    call_command("audit_verify", stdout=StringIO())  # the chain, each row's bytes hashed as stored
    stored = Response.objects.get(pk=ours.pk)
    orm.refresh_from_db()
    assert _columns(stored, but=("id", "created_at", "chain_seq", "chain_hash", "actor_name")) == _columns(
        orm, but=("id", "created_at", "chain_seq", "chain_hash", "actor_name")
    )
    assert stored.actor_name == "approver" and stored.created_at >= orm.created_at
    assert stored.chain_seq is not None and stored.chain_hash


def test_an_inserted_row_goes_with_its_transaction():
    row = AdkSession(app_name="app_a", user_id="bob", session_id="s-9", state={}, create_time=1.0, update_time=1.0)
    with pytest.raises(RuntimeError), transaction.atomic():
        compiled_insert.inserted(row)
        assert AdkSession.all_objects.filter(pk=row.pk).exists()
        raise RuntimeError("rolled back")
    assert not AdkSession.all_objects.filter(session_id="s-9").exists()
