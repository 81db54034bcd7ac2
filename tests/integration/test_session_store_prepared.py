"""The session store's statements from the event loop prepared once per connection (agents_app.loop_prepared):
create, get, append and delete PREPAREd the first time a connection sends them and EXECUTEd with a generic
plan from then on, storing and reading what the text would; a connection that lost what it prepared still
stores an event once, and prepares its statements again; a text the server cannot prepare is sent as it is."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from adkweb.postgresql import prepared_here
from agents_app import loop_prepared, session_async
from agents_app.models import AdkSession

from .test_session_store_loop import _events, _no_hooks, _text  # noqa: F401  (_no_hooks: autouse)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_connections")]
APP = "my_app"


def _sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every query text the loop's connections send from now on."""
    seen: list[str] = []
    real_execute = psycopg.AsyncClientCursor.execute

    async def execute(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        seen.append(str(query).split("(")[0])
        return await real_execute(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.AsyncClientCursor, "execute", execute)
    return seen


async def _on_the_loops_connection(sql: str) -> list[tuple]:
    async def run(conn: psycopg.AsyncConnection) -> list[tuple]:
        async with conn.cursor() as cursor:
            await cursor.execute(sql)
            return await cursor.fetchall() if cursor.description is not None else []

    assert session_async._loops[asyncio.get_running_loop()].opened == 1
    return await session_async.on_connection(run, again_if_lost=False)


async def _prepared_there() -> dict[str, tuple[int, int]]:
    names = f"name LIKE '{loop_prepared.PREFIX}%'"
    rows = await _on_the_loops_connection(
        f"SELECT name, generic_plans, custom_plans FROM pg_prepared_statements WHERE {names}"
    )
    return {name: (generic, custom) for name, generic, custom in rows}


async def _one_of_each(service: Any, session_id: str) -> None:
    session = await service.create_session(app_name=APP, user_id="u", session_id=session_id, state={"k": 1})
    session = await service.get_session(app_name=APP, user_id="u", session_id=session_id)
    await service.append_event(session, _text(f"to {session_id}"))
    await service.delete_session(app_name=APP, user_id="u", session_id=session_id)


async def test_each_statement_is_prepared_once_per_connection_and_runs_its_generic_plan(service, monkeypatch):
    sent = _sent(monkeypatch)
    await _one_of_each(service, "first")
    prepares = [text.split()[1] for text in sent if text.startswith("PREPARE")]
    assert len(prepares) == 4 and [text.split()[0] for text in sent] == ["PREPARE", "EXECUTE"] * 4, sent
    sent.clear()
    await _one_of_each(service, "second")
    assert [text.split() for text in sent] == [["EXECUTE", name] for name in prepares], sent
    assert [session.session_id async for session in AdkSession.all_objects.order_by("id")] == ["first", "second"]
    assert not await AdkSession.objects.filter(session_id__in=["first", "second"]).aexists()  # both archived
    assert len(await _events("first")) == len(await _events("second")) == 1
    plans = await _prepared_there()
    assert set(prepares) <= set(plans) and all(plans[name] == (2, 0) for name in prepares), plans


async def test_a_connection_that_lost_its_prepared_statements_stores_an_event_once(service, monkeypatch):
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    await service.append_event(session, _text("prepared"))
    assert len(await _prepared_there()) == 2
    await _on_the_loops_connection("DEALLOCATE ALL")  # as a pooler's DISCARD ALL would
    sent = _sent(monkeypatch)
    await service.append_event(session, _text("once"))
    assert [text.split()[0] for text in sent] == ["EXECUTE", "WITH"], sent  # refused before it ran; as text
    assert len(await _events("s")) == 2 and (await AdkSession.objects.aget(session_id="s")).revision == 2
    sent.clear()
    await service.append_event(session, _text("prepared again"))  # not text for good (one DISCARD ALL did that)
    assert [text.split()[0] for text in sent] == ["PREPARE", "EXECUTE"], sent
    assert len(await _events("s")) == 3 and len(await _prepared_there()) == 1


async def test_a_connection_that_keeps_losing_its_prepared_statements_sends_text(service, monkeypatch):
    """A pool resetting each connection, a pooler not recognised: after `LOSSES` losses, text on it."""
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    await service.append_event(session, _text("prepared"))
    sent = _sent(monkeypatch)
    for i in range(prepared_here.LOSSES):
        await _on_the_loops_connection("DEALLOCATE ALL")
        sent.clear()
        await service.append_event(session, _text(f"lost {i}"))
        assert [text.split()[0] for text in sent] == ["EXECUTE", "WITH"], (i, sent)
        if i < prepared_here.LOSSES - 1:
            sent.clear()
            await service.append_event(session, _text(f"prepared again {i}"))
            assert [text.split()[0] for text in sent] == ["PREPARE", "EXECUTE"], (i, sent)
    sent.clear()
    await service.append_event(session, _text("text"))
    assert [text.split()[0] for text in sent] == ["WITH"], sent
    assert len(await _events("s")) == 2 * prepared_here.LOSSES + 1 and await _prepared_there() == {}


async def test_a_statement_the_server_cannot_prepare_is_sent_as_text(monkeypatch):
    sql = "SELECT %s IS NULL"  # PostgreSQL cannot infer $1's type here
    sent = _sent(monkeypatch)
    assert await session_async.fetchone(sql, ["x"], again_if_lost=True) == (False,)
    assert await session_async.fetchone(sql, [None], again_if_lost=True) == (True,)
    assert [text.split()[0] for text in sent] == ["PREPARE", "SELECT", "SELECT"], sent
    assert loop_prepared._statements[sql] is None
