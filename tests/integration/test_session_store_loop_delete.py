"""ADK's delete_session from async code on PostgreSQL (agents_app.session_archive.asession_delete): a
session that owes nothing is archived by one statement sent from the event loop (no thread hop), and its
status is published from the loop once that statement has committed, to the conversation's group and the
lists', once; a session something is owed in takes the checked way as before (a turn queued: 409); a
statement whose connection broke after its commit archives once. The store's other statements from the
loop: test_session_store_loop.py."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from channels.layers import get_channel_layer
from django.db import connection

from agents_app.events import SESSIONS_GROUP, session_group
from agents_app.models import AdkSession, Turn
from agents_app.session_service import SessionBusy

from .test_session_store_loop import _no_hooks, _text, batches_seen, broken_after_commit, sent

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["_no_hooks"]  # its autouse fixture: no event hook (a scenario imported earlier may add one)
APP = "my_app"


def _archived_elsewhere(session_pk: int) -> bool:
    """Whether another connection sees the session archived (committed)."""
    db = connection.settings_dict["NAME"]
    with psycopg.connect(f"dbname={db} user=postgres host=127.0.0.1", autocommit=True) as other:
        sql = f"SELECT archived_at IS NOT NULL FROM {AdkSession._meta.db_table} WHERE id = %s"
        return bool(other.execute(sql, [session_pk]).fetchone()[0])


async def _watchers(monkeypatch: pytest.MonkeyPatch, session_pk: int) -> tuple[list[str], list[bool]]:
    """A watcher of the conversation's group and one of the lists' group; for each `session.status`
    the process publishes, whether the session was archived for another connection at that moment."""
    layer = get_channel_layer()
    channels = []
    for group in (session_group(session_pk), SESSIONS_GROUP):
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        channels.append(channel)
    committed: list[bool] = []

    def check(pairs: Any) -> None:
        if any(message["type"] == "session.status" for _, message in pairs):
            committed.append(_archived_elsewhere(session_pk))

    batches_seen(monkeypatch, check)
    return channels, committed


async def _received(channel: str) -> list[tuple[str, Any]]:
    """Everything the channel receives until it has been quiet for 0.3 s."""
    layer, got = get_channel_layer(), []
    while True:
        try:
            message = await asyncio.wait_for(layer.receive(channel), 0.3)
        except TimeoutError:
            return got
        got.append((message["type"], message.get("session_pk")))


async def test_a_session_that_owes_nothing_is_deleted_by_one_statement_from_the_loop(service, monkeypatch):
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    await service.append_event(session, _text("hello"))
    pk = (await AdkSession.objects.aget(session_id="s")).pk
    channels, committed = await _watchers(monkeypatch, pk)
    with sent(monkeypatch) as seen:
        await service.delete_session(app_name=APP, user_id="u", session_id="s")
    assert seen["django"] == [], seen
    assert [sql.split()[:2] for sql in seen["loop"]] == [["UPDATE", AdkSession._meta.db_table]]
    for channel in channels:  # the status, once, to each group; published after the archive committed
        assert await _received(channel) == [("session.status", pk)]
    assert committed == [True]
    assert await service.get_session(app_name=APP, user_id="u", session_id="s") is None
    assert (await AdkSession.all_objects.aget(pk=pk)).status == "idle"
    # Deleting it again, or what was never there, changes nothing and publishes nothing.
    await service.delete_session(app_name=APP, user_id="u", session_id="s")
    await service.delete_session(app_name=APP, user_id="u", session_id="never")
    assert [await _received(channel) for channel in channels] == [[], []]


async def test_a_session_with_a_turn_owed_is_refused_the_checked_way(service, monkeypatch):
    session = await service.create_session(app_name=APP, user_id="u", session_id="busy")
    row = await AdkSession.objects.aget(session_id=session.id)
    await Turn.objects.acreate(session=row, kind="message", content={})
    with sent(monkeypatch) as seen, pytest.raises(SessionBusy):
        await service.delete_session(app_name=APP, user_id="u", session_id="busy")
    assert len(seen["loop"]) == 1 and seen["django"], seen  # the loop's statement changed nothing
    assert await service.get_session(app_name=APP, user_id="u", session_id="busy") is not None


async def test_a_delete_whose_connection_broke_after_its_commit_archives_once(service, monkeypatch):
    """The statement committed, then its connection broke: the thread path finds nothing left to archive."""
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    broken_after_commit(monkeypatch, "UPDATE")
    await service.delete_session(app_name=APP, user_id="u", session_id=session.id)
    monkeypatch.undo()
    rows = [row async for row in AdkSession.all_objects.filter(session_id="s").values_list("archived_at", flat=True)]
    assert len(rows) == 1 and rows[0] is not None


async def test_a_delete_from_the_loop_closes_the_conversations_open_pages(service, monkeypatch):
    """Each audience's open pages are told at once (they ask their rights again, none left: they close;
    tests/agents_app/test_conversation_deleted_live.py), not at their next re-check."""
    from agents_app.fanout import AUDIENCES, audience_group

    await service.create_session(app_name=APP, user_id="u", session_id="watched")
    pk = (await AdkSession.objects.aget(session_id="watched")).pk
    layer = get_channel_layer()
    pages = [await layer.new_channel() for _ in AUDIENCES]
    for channel, audience in zip(pages, AUDIENCES, strict=True):
        await layer.group_add(audience_group(pk, audience), channel)
    with sent(monkeypatch) as seen:
        await service.delete_session(app_name=APP, user_id="u", session_id="watched")
    assert seen["django"] == [], seen  # the loop's one statement
    got = [[kind for kind, _ in await _received(channel)] for channel in pages]
    assert [kinds[-1:] for kinds in got] == [["rights.changed"]] * len(AUDIENCES), got  # after the status
