"""The claim's question "is a page of this conversation open?" (agents_app.events.ask_ahead) is not
asked where this process counted every audience group of the conversation empty a moment ago
(adkweb.watch_hints.counted_empty_lately: its previous turn's batches just did), and a page that opens in
that moment still gets every event of the next turn, once. PostgreSQL (the drain's statements), the
Redis channel layer, drains run in this process; the page is a real websocket to a live uvicorn
server of this process."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import pytest

from adkweb import live, watch_hints
from agents_app import runner, services
from agents_app.models import StoredEvent
from agents_app.timeline import event_dom_id, event_view
from tests.agents_app.test_worker_loop import drained  # noqa: F401 - the fixture
from tests.integration.test_live_services import login, open_socket, ws_receive_until

pytest_plugins = ["tests.conftest_live"]
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("drained")]
TEXT = "What is the price of GOOG?"


@pytest.fixture
def questions(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The groups of every claim's question (events.ask_ahead: asked alone, by a task of its own)."""
    asked: list[list[str]] = []
    awatched = live._awatched

    async def watched(layer: Any, groups: list[str]) -> set[str]:
        task = asyncio.current_task()
        if task is not None and task.get_coro().__qualname__ == "agroups_watched":
            asked.append(list(groups))
        return await awatched(layer, groups)

    monkeypatch.setattr(live, "_awatched", watched)
    return asked


def _turn(session: Any) -> list[StoredEvent]:
    turn = services.message_send(session=session, text=TEXT, streaming=False)
    assert runner.session_turns_run(session.pk) == 1
    turn.refresh_from_db()
    assert turn.status == "done", turn.error
    return list(StoredEvent.objects.filter(turn=turn).order_by("pk"))


def test_a_turn_of_a_conversation_counted_empty_lately_sends_no_question(demo, questions, monkeypatch):
    monkeypatch.setattr(watch_hints, "EMPTY_LATELY", 30.0)  # however slow this machine is now
    watch_hints._seen.clear()
    session = services.session_create(app_name="stock_agent", user_id="requester")
    _turn(session)
    assert len(questions) == 1  # nothing known of this conversation's pages: its first claim asks
    _turn(session)
    _turn(session)
    assert len(questions) == 1  # its previous turn's batches counted every page group empty


def test_once_the_moment_has_passed_the_claim_asks_again(demo, questions, monkeypatch):
    watch_hints._seen.clear()
    session = services.session_create(app_name="stock_agent", user_id="requester")
    _turn(session)
    monkeypatch.setattr(watch_hints, "EMPTY_LATELY", 0.0)
    _turn(session)
    assert len(questions) == 2


def test_a_conversation_waiting_on_a_ticket_asks_when_the_click_resumes_it(demo, questions, monkeypatch):
    """Its last turn left a ticket open: the next turn is a person's click, whose page may have opened
    since the groups were counted (target 6's bench opens it a few ms before clicking): the claim asks."""
    from approvals.models import PendingCall
    from approvals.services import ticket_approve

    monkeypatch.setattr(watch_hints, "EMPTY_LATELY", 30.0)
    watch_hints._seen.clear()
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")
    services.message_send(session=session, text="Please reimburse 200$ for meals", streaming=False)
    assert runner.session_turns_run(session.pk) == 1
    ticket = PendingCall.objects.get(session_id=session.pk, status="pending")
    asked = len(questions)
    ticket_approve(ticket=ticket, actor=demo["approver"])
    assert runner.session_turns_run(session.pk) == 1
    assert len(questions) == asked + 1
    assert not PendingCall.objects.filter(session_id=session.pk, status="pending").exists()


def test_a_page_opened_in_that_moment_gets_every_event_of_the_next_turn_once(demo, questions, live_asgi, monkeypatch):
    monkeypatch.setattr(watch_hints, "EMPTY_LATELY", 30.0)
    watch_hints._seen.clear()
    session = services.session_create(app_name="stock_agent", user_id="requester")
    first = _turn(session)  # nobody watches: counted empty
    requester = login(live_asgi.url, "requester", "requester-demo")
    with open_socket(live_asgi, f"/ws/sessions/{session.pk}/?after={first[-1].pk}", requester) as page:
        assert 'id="session-status"' in page.recv(timeout=10)  # joined: the page is open
        asked = len(questions)
        events = _turn(session)
        assert len(questions) == asked  # the claim did not ask: the moment was that short
        # What a page shows of the turn: not ADK's end-of-agent marker (timeline.EventView.bookkeeping).
        shown = [e for e in events if not event_view(e, {}).bookkeeping]
        ids = [f'id="{event_dom_id(e.event_id)}"' for e in shown]
        frames = ws_receive_until(page, lambda html: all(i in html for i in ids), "every event of the turn")
        time.sleep(0.3)  # anything sent twice would be in by now
        while True:
            try:
                frames.append(page.recv(timeout=0.2))
            except TimeoutError:
                break
    requester.close()
    pushed = "".join(frames)
    assert len(shown) >= 3 and len(events) > len(shown)  # the run's end marker was stored, not pushed
    assert all(f'id="{event_dom_id(e.event_id)}"' not in pushed for e in events if e not in shown)
    for i in ids:
        assert len(re.findall(re.escape(i), pushed)) == 1, (i, pushed[-3000:])
    assert all(f'id="{event_dom_id(e.event_id)}"' not in pushed for e in first)
