"""A turn's end (agents_app.turn_sql.done_next) commits asynchronously: a crash of PostgreSQL in the
fraction of a second before its WAL flush loses it, all or nothing (the turn's DONE, the next turn's
claim, the lease's release, the stored status), while every event of the turn, committed
synchronously before it, is kept. That state is rebuilt here after a real turn and a real `celery
worker` is woken for the session: it closes the turn from what is stored without calling the model
or the tool again, and runs the next turn."""

from __future__ import annotations

import pytest

from agents_app import services, wake
from agents_app.models import AdkSession, StoredEvent
from tests.conftest import wait_for
from tests.engine_scenarios import crashy
from tests.integration.test_wake import _ran_once, _send, _status, stack  # noqa: F401 (the fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_lost_asynchronous_end_of_turn_is_closed_from_what_is_stored(demo, stack, monkeypatch):  # noqa: F811
    stack("worker")
    session, first = _send(demo, "work lost")
    wait_for(lambda: _status(first) == "done", timeout=20, what="the turn to run")
    _ran_once(session, first, "side_effect", "lost")
    events = list(StoredEvent.objects.filter(session=session).order_by("id").values_list("id", "event_id"))
    with monkeypatch.context() as m:
        m.setattr("agents_app.enqueue.session_enqueue", lambda *, session_pk: True)  # queued, no wake-up yet
        second = services.message_send(session=session, text="and then?", actor=demo["requester"], streaming=False)
    # What PostgreSQL recovers when done_next's commit did not reach the disk: the turn still running
    # under the dead drain's lease (run out by now), the next turn queued, the status running.
    crashy.end_of_turn_lost(session.pk, first.pk)
    wake.wake(session.pk)  # as the sweeper would, once the lease has run out
    wait_for(lambda: _status(second) == "done", timeout=30, what="the next turn to run")
    first.refresh_from_db()
    assert (first.status, first.error, first.attempts) == ("done", "", 2)  # closed again, not run again
    assert [e[:2] for e in crashy.executions() if e[1] == "lost"] == [("side_effect", "lost")]
    turn_events = StoredEvent.objects.filter(session=session, id__lte=events[-1][0]).order_by("id")
    assert list(turn_events.values_list("id", "event_id")) == events  # nothing stored again for it
    assert not StoredEvent.objects.filter(turn=first, id__gt=events[-1][0]).exists()
    second.refresh_from_db()
    assert (second.status, second.attempts) == ("done", 1)  # the next turn, claimed once
    row = AdkSession.objects.get(pk=session.pk)
    assert (row.status, row.lease_owner) == ("idle", "")
