"""adkweb behind a real PgBouncer (tests/integration/pgbouncer.py; agents_app.pooler). In transaction mode
with two server connections taken in turn, the session store's statements (the event loop's connection)
and the drain's claim and finish (Django's connection and the loop's) alternate between servers: each
stores and claims exactly once, and no statement fails on a name prepared on another server; Django's
`.iterator()` (audit_verify) works. With `ADKWEB_DB_POOLER` said, a PgBouncer that refuses the `options`
startup parameter (1.18's default) serves every connection, in transaction and in session mode."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.management import call_command
from django.db import connection, connections
from django.utils import timezone

from agents_app import pooler, session_async, turn_sql
from agents_app.models import AdkSession, Turn

from . import pgbouncer
from .conftest import ROOT
from .test_session_store_loop import _events, _no_hooks, _text  # noqa: F401  (_no_hooks: autouse)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_connections")]
APP = "my_app"


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """No pooler seen yet in this process, server-side cursors on (all restored after; statements prepared:
    fresh_connections)."""
    pgbouncer.require()
    monkeypatch.setattr(pooler, "text_only", False)
    monkeypatch.setattr(pooler, "_seen", False)
    monkeypatch.setitem(connection.settings_dict, "DISABLE_SERVER_SIDE_CURSORS", False)
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda *, session_pk: True)  # no worker here


def _point(port: str) -> str:
    """This process's new connections (Django's pool, the event loop's) to `port`; the port before."""
    session_async.close_all()
    connections.close_all()
    connection.close_pool()  # type: ignore[attr-defined]  # PostgreSQL's wrapper: its psycopg pool
    before = connection.settings_dict["PORT"]
    connection.settings_dict["PORT"] = port
    return str(before)


def _lease() -> tuple[str, dict[str, Any]]:
    now = timezone.now()
    return "me", {"until": now + timedelta(seconds=30), "now": now}


async def test_the_store_and_the_drain_alternate_between_servers_and_each_runs_once(service, caplog):
    caplog.set_level(logging.WARNING, logger="agents_app")
    with pgbouncer.running(mode="transaction", servers=2) as port:
        before = await sync_to_async(_point)(str(port))
        try:
            session = await service.create_session(app_name=APP, user_id="u", session_id="s")
            row = await AdkSession.objects.aget(session_id="s")
            for i in range(3):
                session = await service.get_session(app_name=APP, user_id="u", session_id="s")
                await service.append_event(session, _text(f"event {i}"))
                turn = await Turn.objects.acreate(session=row, kind="message", content={"parts": [{"text": f"{i}"}]})
                owner, times = _lease()
                # The claim on Django's connection (the database thread), the finish on the loop's.
                started = await sync_to_async(turn_sql.start)(session_pk=row.pk, owner=owner, **times)
                assert started.leased and started.turn is not None and started.turn.pk == turn.pk
                done = await turn_sql.adone_next(turn_id=turn.pk, session_pk=row.pk, owner=owner, **times)
                assert done.finished and done.released and done.turn is None
            assert session_async._loops and all(state.opened for state in session_async._loops.values())
        finally:
            await sync_to_async(_point)(before)
    assert len(await _events("s")) == 3 and (await AdkSession.objects.aget(pk=row.pk)).revision == 3
    turns = [(t.status, t.attempts) async for t in Turn.objects.filter(session=row).order_by("id")]
    assert turns == [("done", 1)] * 3
    assert (await AdkSession.objects.aget(pk=row.pk)).lease_owner == ""
    # Nothing failed on the way (a statement prepared on one server and executed on the other): only
    # the pooler's own notice that it was recognised.
    warned = [(r.name, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING]
    assert [name for name, _ in warned] == ["agents_app.pooler"], warned
    assert pooler.text_only and connection.settings_dict["DISABLE_SERVER_SIDE_CURSORS"]


def test_audit_verify_reads_through_a_transaction_pooler():
    """Django's .iterator() declares a cursor WITH HOLD and fetches from it in the next transaction,
    which the pooler sends to the other server."""
    with pgbouncer.running(mode="transaction", servers=2) as port:
        before = _point(str(port))
        try:
            out = StringIO()
            call_command("audit_verify", stdout=out)
        finally:
            _point(before)
    assert "Decision chain intact: 0 decision(s)" in out.getvalue()


_SCRIPT = """
import asyncio, json, django
from datetime import timedelta
django.setup()
from django.conf import settings
from django.utils import timezone
from google.adk.events.event import Event
from google.genai import types
from agents_app import pooler, session_async, turn_sql
from agents_app.models import AdkSession, Turn
from agents_app.session_service import DjangoSessionService

async def main():
    service = DjangoSessionService()
    session = await service.create_session(app_name="my_app", user_id="u", session_id="p")
    event = Event(author="user", invocation_id="i", content=types.Content(role="user", parts=[types.Part(text="hi")]))
    await service.append_event(session, event)
    got = await service.get_session(app_name="my_app", user_id="u", session_id="p")
    loop = session_async._loops[asyncio.get_running_loop()]
    async def prepared(conn):
        cursor = await conn.execute("SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'adkweb_%'")
        return (await cursor.fetchone())[0]
    count = await session_async.on_connection(prepared, again_if_lost=False)
    return len(got.events), loop.opened, count

events, opened, prepared = asyncio.run(main())
row = AdkSession.objects.get(session_id="p")
turn = Turn.objects.create(session=row, kind="message", content={"parts": [{"text": "x"}]})
now = timezone.now()
started = turn_sql.start(session_pk=row.pk, owner="me", until=now + timedelta(seconds=30), now=now)
done = turn_sql.done_next(turn_id=turn.pk, session_pk=row.pk, owner="me", until=now + timedelta(seconds=30), now=now)
print(json.dumps({
    "events": events, "loop_connections": opened, "prepared": prepared, "text_only": pooler.text_only,
    "claimed": started.turn is not None and started.turn.pk == turn.pk, "done": done.finished and done.released,
    "server_side_cursors": not settings.DATABASES["default"].get("DISABLE_SERVER_SIDE_CURSORS"),
}))
"""


@pytest.mark.parametrize("mode", ["transaction", "session"])
def test_said_a_pooler_is_there_every_connection_goes_through_one_that_refuses_startup_options(mode):
    db = settings.DATABASES["default"]
    with pgbouncer.running(mode=mode, servers=2, ignore_options=False) as port:
        env = {
            **os.environ,
            "DATABASE_URL": f"postgres://{db['USER'] or 'postgres'}@127.0.0.1:{port}/{db['NAME']}",
            "REDIS_URL": settings.REDIS_URL,
            "DJANGO_SETTINGS_MODULE": "adkweb.settings",
            "ADKWEB_EMBEDDED_WORKER": "0",
            "ADKWEB_WAKE_LIST": "0",
            "ADKWEB_DB_POOLER": mode,
            "PYTHONPATH": str(ROOT),
        }
        done = subprocess.run(
            [sys.executable, "-c", _SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["events"] == 1 and seen["loop_connections"] == 1 and seen["claimed"] and seen["done"], seen
    if mode == "transaction":  # nothing that outlives a transaction
        assert seen["text_only"] and not seen["server_side_cursors"] and seen["prepared"] == 0, seen
    else:  # the client keeps its server connection: prepared statements and cursors as without a pooler
        assert not seen["text_only"] and seen["server_side_cursors"] and seen["prepared"] >= 2, seen
