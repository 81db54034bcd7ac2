"""A closed quorum ticket keeps the record of which approvals closed it: the decision that closes it
records, in its own row (and so in the decision chain), the held approvals that counted then (their
givers could still decide it). The ticket page, the approvals API and the audit show those as the
approvals and the others of its arguments apart, as not counted; no later change of who may decide
rewrites it. A ticket closed with no record (before it was kept) lists every approval it
holds and says which counted was not recorded."""

from __future__ import annotations

import io
import json
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.utils import timezone

from approvals import deadlines
from approvals.models import PendingCall, Response
from approvals.record import response_append
from tests.approvals.policy_helpers import open_ticket, person, team

BIG = {"purpose": "laptop", "amount": 2500.0}  # the demo's "Large reimbursements": finance, 2 of N, four-eyes


def _post(client: Client, url: str, body: dict | None = None):
    return client.post(url, data=body or {}, content_type="application/json")


def _finance() -> Group:
    return Group.objects.get(name="finance")


def _three_of_two(api, demo) -> tuple[PendingCall, User]:
    """2 of N: approver approves, then leaves finance; approver2 and fay approve: closed approved."""
    fay = person("fay", team("finance"), approver=True)
    ticket = open_ticket(args=BIG)
    url = f"/api/pending-calls/{ticket.pk}/approve"
    assert _post(api(demo["approver"]), url).json()["final"] is False
    demo["approver"].groups.remove(_finance())
    assert _post(api(demo["approver2"]), url).json()["final"] is False  # 1 of 2: approver's no longer counts
    closing = _post(api(fay), url)
    assert closing.status_code == 201 and closing.json()["final"] is True
    ticket.refresh_from_db()
    assert ticket.status == "approved"
    return ticket, fay


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html)).strip()


def _shown(api, demo, ticket: PendingCall) -> dict:
    """What the API, the ticket page and the audit page say of the ticket's approvals."""
    body = api(demo["observer"]).get(f"/api/pending-calls/{ticket.pk}").json()
    page = api(demo["observer"]).get(f"/tickets/{ticket.pk}/").content.decode()
    audit = api(demo["observer"]).get(f"/audit/?agent={ticket.app_name}").content.decode()
    rows = {}
    for r in Response.objects.filter(pending_call=ticket, action="approve"):
        row = re.search(rf'<tr id="decision-{r.pk}">(.*?)</tr>', audit, re.S)
        assert row, r.pk
        outcome = re.search(r'<td data-label="Outcome">(.*?)</td>', row.group(1), re.S)
        rows[r.actor_username] = _text(outcome.group(1))
    return {
        "approvals": [a["who"] for a in body["approvals"]],
        "lapsed": [a["who"] for a in body["lapsedApprovals"]],
        "recorded": body["approvalsRecorded"],
        "quorum": _text(re.search(r'id="approval-count">(.*?)</p>', page, re.S).group(1)),
        "chips": re.findall(r'<span class="chip st-\w+">([^<]*)</span>', page.split('id="ticket-history"')[1]),
        "audit": rows,
    }


def test_a_closed_ticket_shows_the_approvals_that_closed_it_and_the_lapsed_one_apart(api, demo):
    ticket, _ = _three_of_two(api, demo)
    shown = _shown(api, demo, ticket)
    assert (shown["approvals"], shown["lapsed"], shown["recorded"]) == (["approver2", "fay"], ["approver"], True)
    assert "2 of 2 approvals: approver2, fay." in shown["quorum"], shown["quorum"]
    assert "Not counted when it closed: approver (could no longer decide it)." in shown["quorum"]
    assert "3 of 2" not in shown["quorum"]
    assert shown["chips"] == ["approval, not counted", "approval, counted", "final"]
    assert shown["audit"] == {
        "approver": "approve (not counted when the ticket closed)",
        "approver2": "approve (counted when the ticket closed)",
        "fay": "approve",
    }
    closing = Response.objects.get(pending_call=ticket, final=True)
    held = Response.objects.get(pending_call=ticket, actor_username="approver2")
    assert closing.counted == [held.pk]  # the record, on the closing decision's row


def test_no_later_change_of_who_may_decide_rewrites_the_record(api, demo):
    ticket, fay = _three_of_two(api, demo)
    before = _shown(api, demo, ticket)
    User.objects.get(username="approver").groups.add(_finance())  # its approval would count again now
    User.objects.get(username="approver2").groups.remove(_finance())  # and theirs would not
    fay.is_active = False
    fay.save(update_fields=["is_active"])
    assert _shown(api, demo, ticket) == before


def test_a_rejection_records_the_approvals_that_counted_when_it_closed(api, demo):
    ticket = open_ticket(args=BIG)
    url = f"/api/pending-calls/{ticket.pk}"
    assert _post(api(demo["approver"]), url + "/approve").status_code == 201
    demo["approver"].groups.remove(_finance())
    assert _post(api(demo["approver2"]), url + "/reject", {"reason": "no"}).status_code == 201
    body = api(demo["observer"]).get(url).json()
    assert body["status"] == "rejected" and body["approvalsRecorded"] is True
    assert (body["approvals"], [a["who"] for a in body["lapsedApprovals"]]) == ([], ["approver"])
    User.objects.get(username="approver").groups.add(_finance())
    assert api(demo["observer"]).get(url).json()["approvals"] == []


def test_an_expiry_records_the_approvals_that_counted_when_it_closed(api, demo):
    ticket = open_ticket(args=BIG)
    url = f"/api/pending-calls/{ticket.pk}"
    assert _post(api(demo["approver2"]), url + "/approve").status_code == 201
    PendingCall.objects.filter(pk=ticket.pk).update(due_at=timezone.now() - timedelta(seconds=1))
    assert deadlines.ticket_expire(ticket_id=ticket.pk)
    User.objects.get(username="approver2").groups.remove(_finance())
    body = api(demo["observer"]).get(url).json()
    assert body["status"] == "expired" and body["approvalsRecorded"] is True
    assert ([a["who"] for a in body["approvals"]], body["lapsedApprovals"]) == (["approver2"], [])


def test_a_ticket_closed_without_a_record_lists_every_approval_and_says_so(api, demo):
    """As a ticket closed before the record was kept: three approvals of a 2-of-N ticket, none recorded
    as counted. Who could decide then is not known (today's groups must not answer for then): every
    approval is listed, none as lapsed, and the page says the count was not recorded."""
    ticket = open_ticket(args=BIG)
    fay = person("fay", team("finance"), approver=True)
    for i, who in enumerate([demo["approver"], demo["approver2"], fay]):
        response_append(
            pending_call=ticket, action="approve", payload={}, final=i == 2, actor=who, args_hash=ticket.args_hash
        )
    ticket.status, ticket.closed_at, ticket.closed_by = "approved", timezone.now(), fay
    ticket.save()  # the conversation's stored status follows
    shown = _shown(api, demo, ticket)
    assert (shown["approvals"], shown["lapsed"], shown["recorded"]) == (["approver", "approver2", "fay"], [], False)
    assert "3 approvals given (2 required): approver, approver2, fay." in shown["quorum"], shown["quorum"]
    assert "Which of them counted when it closed was not recorded." in shown["quorum"]
    assert shown["audit"]["approver"] == "approve (counted toward approvals)"  # as the audit said before


def test_an_open_ticket_says_nothing_is_recorded_yet(api, demo):
    ticket = open_ticket(args=BIG)
    url = f"/api/pending-calls/{ticket.pk}"
    assert _post(api(demo["approver"]), url + "/approve").status_code == 201
    body = api(demo["observer"]).get(url).json()
    assert body["approvalsRecorded"] is None and [a["who"] for a in body["approvals"]] == ["approver"]
    listed = api(demo["approver2"]).get("/api/pending-calls?status=open").json()["results"]
    assert [t["approvalsRecorded"] for t in listed if t["id"] == ticket.pk] == [None]


def test_the_api_list_reads_the_record_of_each_closed_ticket(api, demo):
    ticket, _ = _three_of_two(api, demo)
    listed = api(demo["observer"]).get("/api/pending-calls?status=approved").json()["results"]
    (found,) = [t for t in listed if t["id"] == ticket.pk]
    assert [a["who"] for a in found["approvals"]] == ["approver2", "fay"]
    assert [a["who"] for a in found["lapsedApprovals"]] == ["approver"] and found["approvalsRecorded"] is True


def _verify() -> str:
    out = io.StringIO()
    call_command("audit_verify", stdout=out)
    return out.getvalue()


def test_the_record_is_in_the_decision_chain(api, demo):
    ticket, _ = _three_of_two(api, demo)
    assert _verify().startswith("Decision chain intact: 3 decision(s)")
    closing = Response.objects.get(pending_call=ticket, final=True)
    lapsed = Response.objects.get(pending_call=ticket, actor_username="approver")
    with connection.cursor() as cursor:  # claim afterwards that the lapsed approval counted
        cursor.execute(
            "UPDATE approvals_response SET counted = %s WHERE id = %s", [json.dumps([lapsed.pk]), closing.pk]
        )
    with pytest.raises(CommandError) as failed:
        _verify()
    assert str(failed.value).startswith(f"Decision chain broken at response #{closing.pk} (chain position 3, ")


def test_the_audit_export_carries_the_record(api, demo):
    from asgiref.sync import async_to_sync

    from approvals import audit

    async def exported() -> list[dict]:
        return [row async for row in audit.export_rows(audit.AuditFilters(), audit.Q())]

    ticket, _ = _three_of_two(api, demo)
    rows = {r["id"]: r for r in async_to_sync(exported)() if r["ticket"] == ticket.pk}
    closing = Response.objects.get(pending_call=ticket, final=True)
    held = Response.objects.get(pending_call=ticket, actor_username="approver2")
    assert {pk: r["counted"] for pk, r in rows.items()} == {pk: [held.pk] if pk == closing.pk else None for pk in rows}
