"""A click's round trips to PostgreSQL, pinned (issue 12, target 6: POST approve -> the resumed turn's
first event; the worker's claim waits on the session row until the decision commits, so every round
trip before the COMMIT is on the click's path): what the approve POST sends, counted on the
connection (Django logs BEGIN and COMMIT too), and what the person sees and the record keeps."""

from __future__ import annotations

import io

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from agents_app.models import AdkSession, Turn
from approvals.models import PendingCall, Response
from notifications.models import NotificationEvent
from tests.approvals_factories import session_for
from tests.approvals_factories import ticket as new_ticket

from . import processes

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_connections")]


@pytest.fixture(autouse=True)
def _no_worker_woken(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The decisions commit: their turns stay queued (no worker of the run's runs them while the test
    database is flushed); the wake-ups sent are listed."""
    woken: list[int] = []
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda *, session_pk: woken.append(session_pk))
    return woken


def _tab(user) -> Client:
    """A logged-in browser tab with the CSRF cookie the ticket page gives (checks enforced)."""
    tab = Client(enforce_csrf_checks=True)
    tab.force_login(user)
    return tab


def _click(tab: Client, ticket: PendingCall, action: str = "approve") -> tuple[int, list[str]]:
    page = f"/tickets/{ticket.pk}/"
    assert tab.get(page).status_code == 200
    token = tab.cookies["csrftoken"].value
    with CaptureQueriesContext(connection) as ctx:
        answer = tab.post(
            f"{page}{action}/", {"approve-comment": "fine"}, headers={"X-CSRFToken": token, "HX-Request": "true"}
        )
    return answer.status_code, [q["sql"] for q in ctx.captured_queries]


def _before_the_transaction(sent: list[str]) -> list[str]:
    return sent[: sent.index("BEGIN")]


def _the_transaction(sent: list[str]) -> list[str]:
    return sent[sent.index("BEGIN") : sent.index("COMMIT") + 1]


def test_a_click_reads_the_ticket_and_the_deciders_permissions_in_one_round_trip(demo):
    ticket = new_ticket()
    status, sent = _click(_tab(demo["approver"]), ticket)
    assert status == 200
    # Django's session and user, then the ticket with its conversation and the person's permissions
    before = _before_the_transaction(sent)
    assert len(before) == 3, before
    assert "auth_permission" in before[2] and "approvals_pendingcall" in before[2]
    ticket.refresh_from_db()
    assert ticket.status == PendingCall.Status.APPROVED and ticket.closed_by == demo["approver"]
    decided = Response.objects.get(pending_call=ticket)
    assert (decided.actor_username, decided.final) == ("approver", True)
    assert Turn.objects.filter(session=ticket.session).count() == 1


def test_a_person_without_the_permission_is_refused_and_nothing_is_written(demo):
    ticket = new_ticket()  # the requester's own conversation: they see the ticket, they may not decide it
    status, sent = _click(_tab(demo["requester"]), ticket)
    assert status == 403
    assert "BEGIN" not in sent
    ticket.refresh_from_db()
    assert ticket.status == PendingCall.Status.PENDING
    assert not Response.objects.filter(pending_call=ticket).exists()
    assert not Turn.objects.filter(session=ticket.session).exists()


def test_a_click_records_its_decision_notice_and_link_in_one_round_trip(demo, _no_worker_woken):
    first = new_ticket()
    assert _click(_tab(demo["approver"]), first)[0] == 200  # the chain's head exists from here on
    ticket = new_ticket()
    status, sent = _click(_tab(demo["admin"]), ticket)
    assert status == 200
    done = _the_transaction(sent)
    # BEGIN; the session and ticket locks; the turn, the response, the ticket, the outbox row and the
    # chain's head; the link; COMMIT
    assert len(done) == 5, done
    record = done[2]
    assert "approvals_response" in record and "notifications_notificationevent" in record
    assert "approvals_decisionchain" in record and "INSERT INTO agents_app_turn" in record
    assert _no_worker_woken == [first.session_id, ticket.session_id]  # one wake-up each
    ticket.refresh_from_db()
    assert ticket.status == PendingCall.Status.APPROVED and ticket.closed_by == demo["admin"]
    decided = Response.objects.get(pending_call=ticket)
    assert (decided.actor_username, decided.action, decided.final) == ("admin", "approve", True)
    assert decided.chain_seq == 2
    # the turn written in the record's statement: queued, carrying the answer, the row's turn
    turn = Turn.objects.get(session=ticket.session)
    assert (turn.status, turn.kind, turn.created_by, decided.turn_id) == (
        "queued",
        "function_response",
        demo["admin"],
        turn.pk,
    )
    response = turn.content["parts"][0]["function_response"]
    assert (turn.content["role"], response["id"], response["name"]) == ("user", ticket.call_id, ticket.call_name)
    assert AdkSession.objects.get(pk=ticket.session_id).status == "running"
    notice = NotificationEvent.objects.get(ticket=ticket)
    assert (notice.name, notice.data) == ("ticket.decided", {"status": "approved", "by": "admin", "comment": "fine"})
    assert notice.fanned_out_at is None  # the requester may be owed an email: the fan-out decides
    out = io.StringIO()
    call_command("audit_verify", stdout=out)
    assert out.getvalue().startswith("Decision chain intact: 2 decision(s)")


def _free(sql: str, *params: object) -> bool:
    """Whether another connection could lock these rows now (not held by anyone)."""
    with psycopg.connect(processes.database_url(), autocommit=True) as other:
        try:
            other.execute(f"{sql} NOWAIT", params)
        except psycopg.errors.LockNotAvailable:
            return False
    return True


def test_the_wake_up_leaves_with_the_session_row_held_and_the_chain_free(demo, monkeypatch):
    """The worker's claim must wait for this decision (its session row held); every other decision must
    not wait for this one's wake-up (a Redis that hangs holds only this session: the chain's head, which
    every decision locks, is taken after it)."""
    seen: list[tuple[bool, bool]] = []

    def enqueue(*, session_pk: int) -> None:
        session_free = _free("SELECT 1 FROM agents_app_adksession WHERE id = %s FOR NO KEY UPDATE", session_pk)
        chain_free = _free("SELECT 1 FROM approvals_decisionchain WHERE id = 1 FOR UPDATE")
        seen.append((session_free, chain_free))

    monkeypatch.setattr("agents_app.enqueue.session_enqueue", enqueue)
    tab = _tab(demo["approver"])
    for _ in range(2):  # the first decision ever creates the chain's head; the second finds it
        assert _click(tab, new_ticket())[0] == 200
    assert seen == [(False, True), (False, True)]


def test_an_own_decision_that_owes_nothing_asks_for_endpoints_in_the_records_statement(demo):
    """The requester's own decision with no endpoint subscribed owes nobody anything: its notice is
    written done in the record's statement, which asks itself whether an enabled endpoint subscribes
    (in a savepoint of its own: SAVEPOINT; the record; RELEASE in one query string), where the endpoints
    were read in a round trip of their own before it."""
    first = new_ticket(session=session_for(user_id="approver"))
    assert _click(_tab(demo["approver"]), first)[0] == 200  # the chain's head exists from here on
    ticket = new_ticket(session=session_for(user_id="approver"))  # the approver's own request
    status, sent = _click(_tab(demo["approver"]), ticket)
    assert status == 200
    done = _the_transaction(sent)
    # BEGIN; the locks; the turn and the record with its notice, asking for endpoints; the link; COMMIT
    assert len(done) == 5, done
    record = done[2]
    assert record.startswith("SAVEPOINT") and "RELEASE SAVEPOINT" in record
    assert "approvals_response" in record and "notifications_notificationevent" in record
    assert "notifications_webhookendpoint" in record
    notice = NotificationEvent.objects.get(ticket=ticket)
    assert (notice.name, notice.data) == ("ticket.decided", {"status": "approved", "by": "approver", "comment": "fine"})
    assert notice.fanned_out_at is not None  # recorded as done: no fan-out owed
    out = io.StringIO()
    call_command("audit_verify", stdout=out)
    assert out.getvalue().startswith("Decision chain intact: 2 decision(s)")


def test_an_own_decision_with_an_endpoint_subscribed_leaves_its_notice_owed(demo, monkeypatch):
    """The same decision with an enabled endpoint subscribed to ticket.decided (and a disabled one, and
    one subscribed to another event): its notice is owed, and its fan-out sent after the commit."""
    from adkweb import notify
    from notifications.models import WebhookEndpoint

    outbox = notify.outbox()
    assert outbox is not None
    fanned: list[int] = []
    monkeypatch.setattr(notify, "_outbox", notify.Outbox(**{**outbox.__dict__, "committed": fanned.append}))

    def endpoint(name: str, events: list[str], on: bool = True) -> None:
        WebhookEndpoint.objects.create(url=f"https://h.example.com/{name}", secret="s" * 20, events=events, enabled=on)

    endpoint("off", ["ticket.decided"], on=False)
    endpoint("other", ["ticket.opened"])
    quiet = new_ticket(session=session_for(user_id="approver"))
    assert _click(_tab(demo["approver"]), quiet)[0] == 200
    assert NotificationEvent.objects.get(ticket=quiet).fanned_out_at is not None and fanned == []
    endpoint("a", ["ticket.opened", "ticket.decided"])
    ticket = new_ticket(session=session_for(user_id="approver"))
    assert _click(_tab(demo["approver"]), ticket)[0] == 200
    notice = NotificationEvent.objects.get(ticket=ticket)
    assert notice.fanned_out_at is None and fanned == [notice.pk]


def test_an_endpoint_question_that_fails_in_the_database_leaves_the_decision_whole(demo, monkeypatch):
    """The endpoints' question failing in PostgreSQL (here: a division by zero) is rolled back to the
    record's savepoint: the decision is recorded again without it and commits, its notice left owed
    (the fan-out decides)."""
    from adkweb import compiled
    from notifications import selectors
    from notifications.models import WebhookEndpoint

    monkeypatch.setattr(
        selectors, "_enabled_endpoints", lambda: WebhookEndpoint.objects.filter(enabled=True).extra(where=["1 / 0 = 1"])
    )
    monkeypatch.setitem(compiled._compiled, "webhook_endpoints_enabled", {})
    monkeypatch.setitem(compiled._compiled, "webhook_endpoints_subscribed_sql", {})
    first = new_ticket(session=session_for(user_id="approver"))
    assert _click(_tab(demo["approver"]), first)[0] == 200
    ticket = new_ticket(session=session_for(user_id="approver"))
    status, _sent = _click(_tab(demo["approver"]), ticket)
    assert status == 200
    ticket.refresh_from_db()
    assert ticket.status == PendingCall.Status.APPROVED
    decided = Response.objects.get(pending_call=ticket, final=True)
    assert decided.chain_seq == 2
    notice = NotificationEvent.objects.get(ticket=ticket)
    assert notice.name == "ticket.decided" and notice.fanned_out_at is None
    out = io.StringIO()
    call_command("audit_verify", stdout=out)
    assert out.getvalue().startswith("Decision chain intact: 2 decision(s)")


def test_a_run_answer_reads_its_ticket_and_the_deciders_permissions_in_one_round_trip(demo):
    """`/run`'s approval (approvals.services.message_submit with a FunctionResponse): the ticket is read
    with the person's permissions before BEGIN; inside the transaction the decision reads them again after
    locking the person's row (approvals.decider), in the round trip of its locks, in no statement of its own."""
    from google.genai import types

    from approvals.services import message_submit

    ticket = new_ticket(session=session_for(user_id="approver"))
    approver = type(demo["approver"]).objects.get(pk=demo["approver"].pk)  # no permissions cached
    answer = types.FunctionResponse(id=ticket.call_id, name=ticket.call_name, response={"status": "approved"})
    content = types.Content(role="user", parts=[types.Part(function_response=answer)])
    with CaptureQueriesContext(connection) as ctx:
        turn = message_submit(session=ticket.session, content=content, actor=approver)
    sent = [q["sql"] for q in ctx.captured_queries]
    before, done = _before_the_transaction(sent), _the_transaction(sent)
    assert len(before) == 1 and "auth_permission" in before[0] and "approvals_pendingcall" in before[0], before
    rights = [q for q in done if "auth_permission" in q]
    assert len(rights) == 1 and "FOR SHARE" in rights[0] and "agents_app_adksession" in rights[0], done
    # the turn written in the record's statement (after the locks), in no statement of its own
    turns = [q for q in done if "INSERT INTO agents_app_turn" in q]
    assert len(turns) == 1 and "approvals_response" in turns[0] and done.index(turns[0]) == 2, done
    assert turn is not None
    stored = Turn.objects.get(pk=turn.pk)
    assert stored.status == "queued" and stored.content["parts"][0]["function_response"]["id"] == ticket.call_id
    assert Response.objects.get(pending_call=ticket).turn_id == turn.pk
    ticket.refresh_from_db()
    assert ticket.status == PendingCall.Status.APPROVED and ticket.closed_by == demo["approver"]
    assert Response.objects.get(pending_call=ticket).actor_username == "approver"


def test_a_run_answer_by_someone_who_may_not_decide_is_refused_and_nothing_is_written(demo):
    from google.genai import types

    from approvals.decisions import NotAllowed
    from approvals.services import message_submit

    ticket = new_ticket()  # the requester's own request: they may not decide it
    answer = types.FunctionResponse(id=ticket.call_id, name=ticket.call_name, response={"status": "approved"})
    content = types.Content(role="user", parts=[types.Part(function_response=answer)])
    with pytest.raises(NotAllowed):
        message_submit(session=ticket.session, content=content, actor=demo["requester"])
    ticket.refresh_from_db()
    assert ticket.status == PendingCall.Status.PENDING and not Response.objects.filter(pending_call=ticket).exists()


def test_a_decisions_begin_leads_its_locks_in_one_round_trip(demo):
    """A decision's first statements (the session and ticket locks) carry its transaction's BEGIN: psycopg
    sends none of its own before them (it would be a round trip of its own, and the server would say
    "there is already a transaction in progress" of ours); the decision is recorded as before."""
    first = new_ticket()
    assert _click(_tab(demo["approver"]), first)[0] == 200  # the chain's head exists from here on
    connection.ensure_connection()
    notices: list[str] = []
    connection.connection.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
    ticket = new_ticket()
    status, sent = _click(_tab(demo["admin"]), ticket)
    assert status == 200
    locks = _the_transaction(sent)[1]
    # the decider's row (FOR SHARE) and rights (approvals.decider), then the session's and the ticket's
    assert locks.startswith('BEGIN; SELECT "auth_user"."id"'), locks
    person, rights, session, rest = locks.split("; ", 4)[1:]
    assert person.endswith("FOR SHARE") and "auth_permission" in rights, locks
    assert session.startswith("SELECT id FROM agents_app_adksession") and session.endswith("FOR NO KEY UPDATE")
    assert "approvals_pendingcall" in rest and "FOR UPDATE" in rest
    assert notices == []
    ticket.refresh_from_db()
    assert ticket.status == PendingCall.Status.APPROVED and ticket.closed_by == demo["admin"]
    assert Response.objects.get(pending_call=ticket).chain_seq == 2


def test_a_decision_inside_a_transaction_already_begun_sends_its_locks_alone(demo):
    """Nested in a transaction that has begun (a retried request's Idempotency-Key record), the locks go
    without a BEGIN: the outer transaction's is the one; the decision commits with it."""
    from django.db import transaction
    from google.genai import types

    from approvals.services import message_submit

    ticket = new_ticket(session=session_for(user_id="approver"))
    answer = types.FunctionResponse(id=ticket.call_id, name=ticket.call_name, response={"status": "approved"})
    content = types.Content(role="user", parts=[types.Part(function_response=answer)])
    with CaptureQueriesContext(connection) as ctx, transaction.atomic():
        PendingCall.objects.filter(pk=ticket.pk).exists()  # the BEGIN is sent here
        message_submit(session=ticket.session, content=content, actor=demo["approver"])
    locks = [q["sql"] for q in ctx.captured_queries if "FOR NO KEY UPDATE" in q["sql"]]
    assert len(locks) == 1 and locks[0].startswith('SELECT "auth_user"."id"'), locks
    assert "; SELECT id FROM agents_app_adksession" in locks[0], locks
    ticket.refresh_from_db()
    assert ticket.status == PendingCall.Status.APPROVED
