"""On SQLite the drain's bookkeeping (agents_app.turn_sqlite's `start` and `done_next`) commits without
waiting for the disk (`PRAGMA synchronous = NORMAL` for those two transactions only), as
agents_app.turn_sql commits them asynchronously on PostgreSQL. Here: only those two commits are
unsynced (every other commit, events' included, is FULL); and a lost turn's end, the one state such
a commit can leave behind (tests/integration/test_drain_async_done.py on PostgreSQL), is closed by
the sweeper's drain from what is stored, without calling the model or a tool again."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from agents_app import enqueue, runner, services, turn_sqlite
from agents_app.models import AdkSession, StoredEvent, Turn
from tests.engine_scenarios import agent_texts, crashy

pytestmark = pytest.mark.django_db(transaction=True)
FULL, NORMAL = 2, 1


@pytest.fixture
def crashy_app(settings, tmp_path, monkeypatch, transactional_db):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's bookkeeping commits (PostgreSQL: tests/integration/test_drain_async_done.py)")
    settings.ADKWEB_CODE_AGENTS = {**settings.ADKWEB_CODE_AGENTS, crashy.APP_NAME: crashy.DOTTED}
    monkeypatch.setenv("ADKWEB_TEST_GATE_DIR", str(tmp_path))
    monkeypatch.delenv("ADKWEB_TEST_GATE_MODE", raising=False)
    swept: list[int] = []
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda **kw: True)  # drains are driven by the test
    monkeypatch.setattr("agents_app.enqueue._send_drain", swept.append)  # what the sweeper would wake
    return swept


def _synchronous() -> int:
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA synchronous")
        return int(cursor.fetchone()[0])


def test_only_the_bookkeeping_commits_unsynced(demo, crashy_app, monkeypatch):
    """`start` and `done_next` commit with NORMAL, every other commit of a drain (the events, the
    ticket hook's) with FULL: the connection is FULL again as soon as each is done, also after one fails."""
    commits: list[tuple[bool, int]] = []  # (inside start / done_next, the setting the commit ran with)
    inside = False
    wrapper = type(connections["default"])
    real_commit, real_unsynced = wrapper._commit, turn_sqlite._unsynced

    def commit(self):
        commits.append((inside, int(self.connection.execute("PRAGMA synchronous").fetchone()[0])))
        return real_commit(self)

    @contextmanager
    def watched():
        nonlocal inside
        with real_unsynced():
            inside = True
            yield
        inside = False

    monkeypatch.setattr(wrapper, "_commit", commit)
    monkeypatch.setattr(turn_sqlite, "_unsynced", watched)
    session = services.session_create(app_name=crashy.APP_NAME, user_id="requester")
    services.message_send(session=session, text="work s", actor=demo["requester"], streaming=False)
    del commits[:]
    assert runner.session_turns_run(session.pk) == 1
    assert agent_texts(session) == ["done s"]
    assert sorted(set(commits)) == [(False, FULL), (True, NORMAL)]
    assert commits.count((True, NORMAL)) == 2 and len(commits) > 4  # start, done_next; the events
    assert _synchronous() == FULL

    # A bookkeeping transaction that fails leaves the connection FULL too.
    Turn.objects.create(session=session, kind="message", content={"parts": [{"text": "hi"}]})

    def broken(sql, params):
        raise RuntimeError("broken")

    monkeypatch.setattr(turn_sqlite, "_one", broken)
    now = timezone.now()
    with pytest.raises(RuntimeError):
        turn_sqlite.start(session_pk=session.pk, owner="me", until=now + timedelta(seconds=30), now=now)
    assert _synchronous() == FULL
    monkeypatch.undo()

    # Inside an outer transaction (SQLite refuses the change there) the outer commit decides: untouched.
    with transaction.atomic():
        started = turn_sqlite.start(session_pk=session.pk, owner="me", until=now + timedelta(seconds=30), now=now)
        assert started.leased and _synchronous() == FULL


def test_a_lost_end_of_turn_is_closed_by_the_sweeper_without_running_anything_again(demo, crashy_app, settings):
    swept = crashy_app
    session = services.session_create(app_name=crashy.APP_NAME, user_id="requester")
    first = services.message_send(session=session, text="work lost", actor=demo["requester"], streaming=False)
    assert runner.session_turns_run(session.pk) == 1
    first.refresh_from_db()
    assert first.status == "done"
    assert [e[:2] for e in crashy.executions()] == [("side_effect", "lost")]
    model_calls = len(crashy.model_calls())
    events = list(StoredEvent.objects.filter(session=session).order_by("id").values_list("id", "event_id"))
    second = services.message_send(session=session, text="and then?", actor=demo["requester"], streaming=False)
    # What SQLite recovers when done_next's unsynced commit did not reach the disk (a power cut before
    # any later FULL commit): the turn still running under the dead drain's lease (run out by now), the
    # next turn queued, the status running; every event of the turn kept (FULL commits before it).
    crashy.end_of_turn_lost(session.pk, first.pk)
    assert enqueue.owed_sessions_enqueue() == 1 and swept == [session.pk]  # the sweeper finds it
    assert runner.session_turns_run(session.pk) == 2  # the lost end closed, then the next turn
    first.refresh_from_db()
    assert (first.status, first.error, first.attempts) == ("done", "", 2)  # closed again, not run again
    assert [e[:2] for e in crashy.executions()] == [("side_effect", "lost")]  # the tool once
    turn_events = StoredEvent.objects.filter(session=session, id__lte=events[-1][0]).order_by("id")
    assert list(turn_events.values_list("id", "event_id")) == events
    assert not StoredEvent.objects.filter(turn=first, id__gt=events[-1][0]).exists()  # nothing stored again
    second.refresh_from_db()
    assert (second.status, second.attempts) == ("done", 1)
    assert len(crashy.model_calls()) == model_calls + 1  # only the next turn asked the model
    row = AdkSession.objects.get(pk=session.pk)
    assert (row.status, row.lease_owner) == ("idle", "")
