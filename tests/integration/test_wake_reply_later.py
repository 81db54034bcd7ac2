"""A click's early wake-up (approvals.decisions, "Waking before the commit") is pushed before the
decision's record and its reply is read after the commit (agents_app.enqueue.session_enqueue_before_commit,
agents_app.wake.replies_later): the record and the COMMIT do not wait on Redis's answer. PostgreSQL +
Redis, a wake-up list of the test's own (read here: no worker listens on it)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.test import Client

from agents_app import enqueue, wake
from approvals import chain
from approvals.models import PendingCall, Response
from tests.approvals_factories import ticket as new_ticket

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the web process did, in order: the wake-up's push written ("push"), its reply read ("reply",
    or "reply in the transaction"), and the decision's record statement ("record")."""
    log: list[str] = []
    conn_class: Any = wake.client().connection_pool.connection_class
    send, read = conn_class.send_packed_command, conn_class.read_response

    def send_packed_command(self: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
        chunks = command if isinstance(command, list) else [command]
        sent = send(self, command, *args, **kwargs)  # (a connection's handshake, read as it connects, not counted)
        if any(b"RPUSH" in bytes(c) for c in chunks):  # the push and the list's trim: two replies
            log.append("push")
            self.replies_owed = 2
        return sent

    def read_response(self: Any, *args: Any, **kwargs: Any) -> Any:
        got = read(self, *args, **kwargs)
        if getattr(self, "replies_owed", 0):
            self.replies_owed -= 1
            if not self.replies_owed:
                in_it = transaction.get_connection().in_atomic_block
                log.append("reply in the transaction" if in_it else "reply")
        return got

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if "INSERT INTO" in sql and "approvals_response" in sql:
            log.append("record")
        return execute(sql, params, many, context)

    monkeypatch.setattr(conn_class, "send_packed_command", send_packed_command)
    monkeypatch.setattr(conn_class, "read_response", read_response)
    # A list of this test's own: a worker process of the suite's (started by an earlier test) listens on
    # the real one, and would pop the wake-ups this test reads.
    monkeypatch.setattr(wake, "key", lambda app=None: wake.KEY_PREFIX + "test-reply-later")
    wake.client().delete(wake.key())
    with connection.execute_wrapper(record):
        yield log
    wake.client().delete(wake.key())


def _click(user: Any, ticket: PendingCall) -> int:
    tab = Client(enforce_csrf_checks=True)
    tab.force_login(user)
    page = f"/tickets/{ticket.pk}/"
    assert tab.get(page).status_code == 200
    token = tab.cookies["csrftoken"].value
    headers = {"X-CSRFToken": token, "HX-Request": "true"}
    return tab.post(f"{page}approve/", {"approve-comment": "fine"}, headers=headers).status_code


def _woken() -> list[int]:
    return [int(pk) for pk in wake.client().lrange(wake.key(), 0, -1)]


def test_a_clicks_wake_up_is_pushed_before_its_record_and_its_reply_read_after_the_commit(demo, steps):
    assert wake.enabled()
    ticket = new_ticket()
    assert _click(demo["approver"], ticket) == 200
    assert steps == ["push", "record", "reply"], steps
    assert _woken() == [ticket.session_id]  # one wake-up
    assert Response.objects.filter(pending_call=ticket, final=True).exists()


def _held(pool: Any) -> int:
    """Connections checked out of the wake-up pool now (an earlier test's may be: counted from here)."""
    return len(pool._in_use_connections)


def test_a_decision_rolled_back_after_its_push_has_its_reply_read_at_its_requests_end(demo, steps, monkeypatch):
    """The push of a decision that fails before its commit is not read by a commit hook: its request's
    end reads it (request_finished, on the request's thread), so a thread that ends after the request
    leaves no connection checked out; the next decision goes as any."""
    pool = wake.client().connection_pool
    held = _held(pool)
    ticket = new_ticket()
    link = chain.link

    def fails(responses: Any) -> None:
        raise RuntimeError("no commit")

    monkeypatch.setattr(chain, "link", fails)
    with pytest.raises(RuntimeError, match="no commit"):
        _click(demo["approver"], ticket)
    monkeypatch.setattr(chain, "link", link)
    assert steps == ["push", "record", "reply"], steps
    assert _held(pool) == held  # nothing left checked out for a thread that may never push again
    ticket.refresh_from_db()
    assert ticket.is_open and not Response.objects.filter(pending_call=ticket).exists()
    assert _click(demo["approver"], ticket) == 200
    assert steps == ["push", "record", "reply"] * 2, steps
    assert _held(pool) == held
    assert _woken() == [ticket.session_id] * 2  # each decision's wake-up (the worker's claim finds one turn)


def test_a_push_rolled_back_outside_a_request_leaves_its_reply_to_the_threads_next_push(demo, steps):
    """Outside a request (no request_finished), a rolled-back transaction's early wake-up is read by the
    thread's next push, inside that one's transaction; nothing is left checked out after it."""
    pool = wake.client().connection_pool
    held = _held(pool)
    ticket = new_ticket()
    with pytest.raises(RuntimeError, match="no commit"), transaction.atomic():
        enqueue.session_enqueue_before_commit(session_pk=ticket.session_id)
        raise RuntimeError("no commit")
    assert steps == ["push"], steps
    assert _held(pool) == held  # the push went on the thread's own connection (its reply unread there)
    assert wake._thread_connection() is not None
    with transaction.atomic():
        enqueue.session_enqueue_before_commit(session_pk=ticket.session_id)
    assert steps == ["push", "reply in the transaction", "push", "reply"], steps
    assert _held(pool) == held
    assert _woken() == [ticket.session_id] * 2
