"""A closed quorum ticket's record of which approvals closed it, on PostgreSQL: the unit tests again
(tests/approvals/test_quorum_closed_record.py: the record is then written in the decision's one
statement, approvals.record.response_append_with, and chained from its RETURNING), and a committed
click that closes a "3 of 2" ticket: its record in that statement, one round trip as any click's, the
chain intact, and the page as it closed after the groups change."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from approvals.models import PendingCall, Response
from tests.approvals.conftest import api  # noqa: F401  (the unit tests' fixture)
from tests.approvals.policy_helpers import open_ticket, person, team
from tests.approvals.test_quorum_closed_record import *  # noqa: F403
from tests.approvals.test_quorum_closed_record import BIG


def _tab(user) -> Client:
    tab = Client(enforce_csrf_checks=True)
    tab.force_login(user)
    return tab


def _click(tab: Client, ticket: PendingCall) -> tuple[int, list[str]]:
    page = f"/tickets/{ticket.pk}/"
    assert tab.get(page).status_code == 200
    token = tab.cookies["csrftoken"].value
    with CaptureQueriesContext(connection) as ctx:
        answer = tab.post(
            f"{page}approve/",
            {"approve-comment": "fine", "approve-args_hash": ticket.args_hash},
            headers={"X-CSRFToken": token, "HX-Request": "true"},
        )
    return answer.status_code, [q["sql"] for q in ctx.captured_queries]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_connections")
def test_a_committed_close_records_its_approvals_in_the_decisions_statement(demo, monkeypatch):
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda *, session_pk: None)  # no worker runs it
    finance = Group.objects.get(name="finance")
    fay = person("fay", team("finance"), approver=True)
    ticket = open_ticket(args=BIG)
    assert _click(_tab(demo["approver"]), ticket)[0] == 200  # held
    demo["approver"].groups.remove(finance)
    assert _click(_tab(demo["approver2"]), ticket)[0] == 200  # held: 1 of 2, approver's lapsed
    status, sent = _click(_tab(fay), ticket)
    assert status == 200
    done = sent[sent.index("BEGIN") : sent.index("COMMIT") + 1]
    inserts = [sql for sql in done if "INSERT INTO approvals_response" in sql]
    assert len(inserts) == 1 and '"counted"' in inserts[0], done  # in the decision's one statement
    assert "approvals_decisionchain" in inserts[0] and "INSERT INTO agents_app_turn" in inserts[0]
    assert not [sql for sql in done if sql.startswith("UPDATE approvals_response") and "counted" in sql]

    closing = Response.objects.get(pending_call=ticket, final=True)
    held = Response.objects.get(pending_call=ticket, actor_username="approver2")
    assert (closing.actor_username, closing.counted) == ("fay", [held.pk])
    out = io.StringIO()
    call_command("audit_verify", stdout=out)
    assert out.getvalue().startswith("Decision chain intact: 3 decision(s)")

    demo["approver"].groups.add(finance)  # later changes: the record stands
    demo["approver2"].groups.remove(finance)
    page = _tab(demo["observer"]).get(f"/tickets/{ticket.pk}/").content.decode()
    assert "2 of 2 approvals</strong>: approver2, fay." in page
    assert "Not counted when it closed: approver (could no longer decide it)." in page
