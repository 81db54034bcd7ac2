"""Who takes part in which ticket on PostgreSQL, where the inbox's "mine" reads it: the same paths as on
SQLite (tests/approvals/test_ticket_participants.py: the page, the API, bulk, links, quorum, expiry,
cancel, the ticket rider's SQL, deleted users, bare writes), then concurrent writers on one ticket
(real requests racing; a response's trigger waiting for a close it cannot see yet)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import httpx
import psycopg
from django.db import connection, connections
from django.utils import timezone

from agents_app.models import AdkSession, Turn
from agents_app.session_status import sessions_status_refresh
from approvals import deadlines
from approvals.models import PendingCall, Response
from tests.approvals.participant_helpers import exact, pairs, part
from tests.approvals.test_ticket_participants import (  # noqa: F401 - run here on PostgreSQL
    test_a_decision_on_the_page_makes_the_decider_part_of_the_closed_ticket,
    test_a_deleted_conversations_tickets_cancelled_and_an_aborted_call,
    test_a_deleted_person_leaves_the_record_and_no_part,
    test_a_policy_decision_and_expiry_close_the_rows_of_those_who_took_part,
    test_a_quorum_ticket_open_after_one_approval_closed_after_the_second,
    test_an_update_keeps_its_sender_on_the_open_ticket_until_another_closes_it,
    test_api_responses_and_decisions_as_their_token_holder,
    test_assigning_and_giving_back_and_a_response_that_keeps_me_on_it,
    test_bare_orm_and_sql_writes_to_a_ticket,
    test_bulk_decisions_and_one_tap_links,
    test_tickets_the_ticket_hook_opens_and_tickets_inserted_closed,
)
from tests.approvals_factories import ticket

pytest_plugins = ["tests.conftest_live"]


def _psycopg() -> psycopg.Connection:
    """A connection of its own to the test database (not Django's: its transaction stays open here)."""
    s = connection.settings_dict
    return psycopg.connect(dbname=s["NAME"], user=s["USER"], host=s["HOST"], port=s["PORT"] or 5432)


def test_a_response_written_while_a_close_is_uncommitted_waits_for_it_and_carries_closed(transactional_db, demo):
    """The response's trigger takes the ticket's row lock before it reads the status: written while
    another transaction's close is not committed, its row is written once that close committed, as
    closed. (Every app path already holds the ticket FOR UPDATE when it writes a response; this is the
    trigger's own guarantee, for a writer that does not.)"""
    me, call = demo["approver"], ticket()
    closer = _psycopg()
    closer.execute("UPDATE approvals_pendingcall SET status = 'expired', closed_at = now() WHERE id = %s", [call.pk])
    written: list[Response] = []

    def respond() -> None:
        try:
            written.append(
                Response.objects.create(pending_call_id=call.pk, action="update", payload={}, final=False, actor=me)
            )
        finally:
            connections.close_all()

    writer = threading.Thread(target=respond)
    writer.start()
    try:
        writer.join(timeout=1.0)
        waited = writer.is_alive()
    finally:  # a failure must not leave the ticket locked (the database's flush would wait on it)
        closer.commit()
        closer.close()
        writer.join(timeout=10)
    assert waited, "the response's trigger did not wait for the ticket's lock"
    assert written and pairs(exact()) == {part(call, me): False}
    sessions_status_refresh(AdkSession, Turn, PendingCall)  # the bare close skipped the session's status


def test_racing_requests_on_each_ticket_leave_the_participants_exact(demo, live_asgi, api_token):
    """Real requests at once on each of 8 tickets: an approver's update from the page, an approval
    through the API by another, a third taking the ticket, and the ticket's expiry in the sweeper's
    code as its due time passes (a moment after the requests start, staggered: on most tickets the
    requests meet the expiry, on two they come first): whoever wins, no 500, and the rows equal
    what they derive from. A request after the due time is refused (409) like one after the expiry."""
    from tests.integration.races import page_auth

    me, admin, third = demo["approver"], demo["admin"], demo["approver2"]
    calls = [ticket(due_at=timezone.now() + timedelta(hours=1)) for _ in range(8)]
    cookies, headers = page_auth(me)
    third_cookies, third_headers = page_auth(third)
    token = api_token(admin)
    sends: list[tuple[str, dict]] = []
    for call in calls:
        page, api = f"/tickets/{call.pk}", f"/api/pending-calls/{call.pk}"
        sends.append(("page", {"url": f"{page}/update/", "data": {"update-message": "looking"}, "headers": headers}))
        sends.append(("api", {"url": f"{api}/approve", "json": {"comment": "ok"}, "headers": token}))
        sends.append(("take", {"url": f"{page}/assign/", "data": {"assign": "me"}, "headers": third_headers}))
    for jar, h in ((cookies, headers), (third_cookies, third_headers), (None, token)):  # warm: no first-request costs
        with httpx.Client(base_url=live_asgi.url, timeout=60, cookies=jar) as client:
            assert client.get(f"/api/pending-calls/{calls[0].pk}" if jar is None else "/", headers=h).status_code == 200
    statuses: list[int] = []
    barrier = threading.Barrier(len(sends) + len(calls))
    start = timezone.now()
    # Six meet their expiry (due 0.3-1.2 s after the start); two are due later than any request can take on
    # a loaded machine, so something wins there and the rows checked below are not empty by a slow start.
    ahead = (0.3, 0.6, 0.9, 1.2, 0.3, 0.6, 5.0, 5.0)
    due = {c.pk: start + timedelta(seconds=at) for c, at in zip(calls, ahead, strict=True)}
    for pk, at in due.items():
        PendingCall.objects.filter(pk=pk).update(due_at=at)

    def send(kind: str, request: dict) -> None:
        jar = {"page": cookies, "take": third_cookies}.get(kind)
        with httpx.Client(base_url=live_asgi.url, timeout=60, cookies=jar) as client:
            barrier.wait()
            statuses.append(client.post(**request).status_code)

    def expire(pk: int) -> None:
        try:
            barrier.wait()
            time.sleep(max(0.0, (due[pk] - timezone.now()).total_seconds()))  # as the sweep would: once due
            deadlines.ticket_expire(ticket_id=pk)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=send, args=s) for s in sends]
    threads += [threading.Thread(target=expire, args=(c.pk,)) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(statuses) == len(sends) and all(s < 500 for s in statuses), statuses
    rows = pairs(exact())
    assert all(not PendingCall.objects.get(pk=c.pk).is_open for c in calls)
    assert rows and not any(rows.values())  # every ticket closed: so is every row
