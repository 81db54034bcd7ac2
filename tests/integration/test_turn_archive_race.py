"""A message sent to a conversation while it is being deleted (archived), on PostgreSQL's real row locks:
the archive's transaction is held open (the session row locked, the archive written) while the message,
from a copy of the session read before, is sent from another connection; once the message waits on the
row, the archive commits. The message is refused as for any deleted conversation (404, nothing queued),
where its turn was inserted all the same, queued in an archived session and never run, its sender told
it was accepted; a retry of a failed turn likewise. And the other way round: a message whose transaction
holds the row wins, the delete is refused (409) and the turn stays queued; a decision on a ticket of the
conversation being deleted is refused (409, the ticket was cancelled)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction

from adkweb.errors import NotFound
from agents_app import services
from agents_app.content import text_content
from agents_app.models import AdkSession, Turn
from agents_app.session_archive import session_delete
from approvals import services as approvals
from approvals.models import PendingCall, Response
from tests.approvals_factories import ticket
from tests.integration.races import waiting_on_a_lock

pytest_plugins = ["tests.conftest_live"]
pytestmark = pytest.mark.django_db(transaction=True)

APP = "stock_agent"


def _while_held(hold: Callable[[threading.Event, threading.Event], None], other: Callable[[], Any]) -> Any:
    """`hold(held, release)` in one thread: it sets `held` once its transaction holds what it holds, and
    commits once `release` is set. `other()` in another thread once `held` is set; `release` is set once
    `other` waits on a lock (it must). What `other` returned or raised."""
    held, release, outcome, errors = threading.Event(), threading.Event(), [], []

    def holding() -> None:
        try:
            hold(held, release)
        except BaseException as exc:  # reported by the test
            errors.append(exc)
            held.set()
        finally:
            connection.close()

    def sending() -> None:
        try:
            outcome.append(other())
        except Exception as exc:  # a refusal is what the sender sees
            outcome.append(exc)
        finally:
            connection.close()

    a = threading.Thread(target=holding)
    a.start()
    assert held.wait(20) and not errors, errors
    b = threading.Thread(target=sending)
    b.start()
    deadline = time.monotonic() + 10
    while not waiting_on_a_lock() and time.monotonic() < deadline and b.is_alive():
        time.sleep(0.02)
    waited = waiting_on_a_lock()
    release.set()
    a.join(20), b.join(20)
    assert not errors, errors
    assert waited, outcome  # the other waited on the row held, as the interleaving needs
    assert outcome, "the other did not answer within 20 s of the commit"
    return outcome[0]


def _archive_held(session: AdkSession) -> Callable[[threading.Event, threading.Event], None]:
    """A "delete" of the conversation (agents_app.session_archive), its transaction held open."""

    def hold(held: threading.Event, release: threading.Event) -> None:
        with transaction.atomic():
            services.session_archive(session=AdkSession.objects.get(pk=session.pk))
            held.set()
            release.wait(20)

    return hold


def _send(session: AdkSession, person: Any, how: str) -> Callable[[], Any]:
    """The message, sent as the conversation page sends it (its own transaction: the turn's statements
    and the COMMIT in one write), as /run sends it (inside a transaction the turn's statements begin),
    or inside a transaction already begun."""

    def send() -> Any:
        if how == "alone":
            return services.message_send(session=session, text="hello", actor=person)
        with transaction.atomic():
            if how == "begun":
                connection.cursor().execute("SELECT 1")
            return services.message_send(session=session, text="hello", actor=person)

    return send


@pytest.mark.parametrize("how", ["alone", "begins", "begun"])
@pytest.mark.parametrize("cap", [0, 10])  # no cap: the plain statement; a cap: the person's lock, then the capped
def test_a_message_to_a_conversation_being_deleted_is_refused_and_queues_nothing(demo, settings, monkeypatch, cap, how):
    settings.ADKWEB_MAX_QUEUED_TURNS_PER_USER = cap
    monkeypatch.setattr("agents_app.enqueue.turn_enqueue", lambda session_pk: None)  # no worker here
    session = services.session_create(app_name=APP, user_id="requester", session_id=f"going-{cap}-{how}")
    sent = _while_held(_archive_held(session), _send(session, demo["requester"], how))
    assert isinstance(sent, NotFound), sent
    assert sent.detail == f"Session not found: {session.session_id}"
    assert not Turn.objects.filter(session_id=session.pk).exists()
    row = AdkSession.all_objects.get(pk=session.pk)
    assert row.archived_at is not None and row.status == "idle"


def test_run_on_a_conversation_being_deleted_answers_404(demo, settings, adk_client, monkeypatch):
    """ADK's /run, the session read before the delete commits: 404, as for any deleted session."""
    monkeypatch.setattr("agents_app.enqueue.turn_enqueue", lambda session_pk: None)
    client = adk_client(demo["requester"])
    sid = client.create_session(APP)["id"]
    session = AdkSession.objects.get(session_id=sid)

    def run() -> Any:
        body = client.run_body(APP, sid, {"role": "user", "parts": [{"text": "hello"}]})
        return client.http.post("/api/adk/run", json=body)

    r = _while_held(_archive_held(session), run)
    assert (r.status_code, r.json()) == (404, {"detail": f"Session not found: {sid}"})
    assert not Turn.objects.filter(session_id=session.pk).exists()
    assert AdkSession.all_objects.get(pk=session.pk).archived_at is not None


def test_a_delete_waiting_on_a_message_being_queued_is_refused(demo, monkeypatch):
    """The message's transaction holds the row (its turn written): ADK's delete waits, then answers 409
    (the agent is working) and the turn stays queued in the live conversation."""
    monkeypatch.setattr("agents_app.enqueue.turn_enqueue", lambda session_pk: None)
    session = services.session_create(app_name=APP, user_id="requester", session_id="busy")
    person, queued = demo["requester"], []

    def hold(held: threading.Event, release: threading.Event) -> None:
        with transaction.atomic():
            queued.append(services.turn_add(session=session, content=text_content("hi"), actor=person))
            held.set()
            release.wait(20)

    deleted = _while_held(hold, lambda: session_delete(app_name=APP, user_id="requester", session_id="busy"))
    assert isinstance(deleted, services.SessionBusy), deleted
    assert AdkSession.objects.get(pk=session.pk).status == "running"
    assert list(Turn.objects.filter(session_id=session.pk).values_list("pk", "status")) == [(queued[0].pk, "queued")]


def test_a_decision_on_a_ticket_of_a_conversation_being_deleted_is_refused(demo, monkeypatch):
    """The approver decides as the conversation is deleted: refused (409, the ticket was cancelled by the
    delete), no decision recorded, nothing queued."""
    monkeypatch.setattr("agents_app.enqueue.turn_enqueue", lambda session_pk: None)
    monkeypatch.setattr("agents_app.enqueue.session_enqueue_before_commit", lambda *, session_pk: None)
    waiting = ticket()
    decided = _while_held(
        _archive_held(waiting.session), lambda: approvals.ticket_approve(ticket=waiting, actor=demo["approver"])
    )
    assert isinstance(decided, approvals.TicketClosed), decided
    assert PendingCall.objects.get(pk=waiting.pk).status == PendingCall.Status.CANCELLED
    assert not Response.objects.filter(pending_call=waiting).exists()
    assert not Turn.objects.filter(session_id=waiting.session_id).exists()


def test_a_retry_of_a_failed_turn_of_a_conversation_being_deleted_is_refused(demo, monkeypatch):
    """The retry button pressed as the conversation is deleted (a failed turn does not keep it from
    being deleted): 404, the turn stays failed, nothing queued in the archived conversation."""
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda *, session_pk: True)
    session = services.session_create(app_name=APP, user_id="requester", session_id="failed")
    failed = Turn.objects.create(session=session, kind=Turn.Kind.MESSAGE, content={}, status=Turn.Status.FAILED)
    retried = _while_held(_archive_held(session), lambda: services.turn_retry(turn=failed))
    assert isinstance(retried, NotFound), retried
    assert retried.detail == f"Session not found: {session.session_id}"
    assert Turn.objects.get(pk=failed.pk).status == Turn.Status.FAILED
    assert AdkSession.all_objects.get(pk=session.pk).status == "failed"
