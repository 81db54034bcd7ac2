"""A deleted user's name stays on what they did to tickets. Before: deleting a user cleared "edited by"
and "closed by" on their tickets and the actor on their history entries (SET_NULL): the ticket page
said "Approved" by nobody, its diff "Edited by ?", its history no name, the API null, while the
decisions themselves kept the name (Response.actor_username). Now each keeps the username as it was
written (closed_by_username, edited_by_username, TicketActivity.actor_username) and pages show it as
"approver2 (user since deleted)", as a decision's decider already does; the API gives the username."""

from __future__ import annotations

import importlib

from django.contrib.auth.models import User
from django.test import Client

from approvals import services
from approvals.models import PendingCall, TicketActivity
from tests.approvals_factories import ticket


def _client(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


def _edited_and_approved_by_approver2(demo) -> PendingCall:
    call = ticket()
    edited = {"purpose": "meals", "amount": 150.0}
    services.ticket_approve(ticket=call, actor=demo["approver2"], args_hash=call.args_hash, edited_args=edited)
    call.refresh_from_db()
    assert call.status == "approved" and call.closed_by == demo["approver2"] and call.edited_by == demo["approver2"]
    return call


def test_the_ticket_page_still_names_who_edited_closed_and_acted(demo):
    call = _edited_and_approved_by_approver2(demo)
    User.objects.get(username="approver2").delete()
    page = _client(demo["approver"]).get(f"/tickets/{call.pk}/").content.decode()
    assert "Approved by <strong>approver2 (user since deleted)</strong>" in page, page
    assert "Edited by <strong>approver2 (user since deleted)</strong>" in page
    assert "Arguments edited</strong> · approver2 (user since deleted) ·" in page


def test_the_api_still_names_them(demo):
    call = _edited_and_approved_by_approver2(demo)
    User.objects.get(username="approver2").delete()
    data = _client(demo["approver"]).get(f"/api/pending-calls/{call.pk}").json()
    assert (data["closed_by"], data["editedBy"]) == ("approver2", "approver2"), data
    assert [r["actor"] for r in data["responses"]] == ["approver2"]


def test_the_history_and_the_audit_trail_still_name_them(demo):
    call = _edited_and_approved_by_approver2(demo)
    User.objects.get(username="approver2").delete()
    (entry,) = TicketActivity.objects.filter(ticket=call, kind="edited")
    assert entry.actor_id is None and entry.actor_username == "approver2"
    call.refresh_from_db()
    assert (call.closed_by_username, call.edited_by_username) == ("approver2", "approver2")
    audit = _client(demo["admin"]).get("/audit/?person=approver2").content.decode()
    assert "approver2" in audit and f"#{call.pk}" in audit


def test_a_live_account_is_shown_by_its_name_alone(demo):
    call = _edited_and_approved_by_approver2(demo)
    page = _client(demo["approver"]).get(f"/tickets/{call.pk}/").content.decode()
    assert "Approved by <strong>approver2</strong>" in page and "since deleted" not in page


def test_a_closer_whose_row_was_not_read_with_the_ticket_is_not_taken_for_deleted(demo):
    """A ticket locked while another transaction closed it comes back with its closer's key but not their
    row (PostgreSQL's recheck of a locked row does not read the joined one again): named by the username
    kept, not marked deleted."""
    call = _edited_and_approved_by_approver2(demo)
    call = PendingCall.objects.select_related("closed_by").get(pk=call.pk)
    type(call).closed_by.field.set_cached_value(call, None)  # the key without the row, as such a read gives
    assert (call.closed_by_label, call.closed_by_name) == ("approver2", "approver2")


def test_the_migration_fills_in_the_names_of_earlier_rows(demo):
    """Rows written before the columns: each gets its person's username as it is now, and a ticket whose
    closer was already deleted gets the name its closing decision kept."""
    from django.apps import apps

    backfill = importlib.import_module("approvals.migrations.0018_ticket_people_kept").backfill
    kept, lost = _edited_and_approved_by_approver2(demo), ticket()
    services.ticket_reject(ticket=lost, actor=demo["approver"], reason="no")
    User.objects.get(username="approver").delete()
    PendingCall.objects.update(closed_by_username="", edited_by_username="")
    TicketActivity.objects.update(actor_username="")
    backfill(apps, None)
    kept.refresh_from_db()
    lost.refresh_from_db()
    assert (kept.closed_by_username, kept.edited_by_username) == ("approver2", "approver2")
    assert TicketActivity.objects.get(ticket=kept, kind="edited").actor_username == "approver2"
    assert (lost.closed_by_id, lost.closed_by_username, lost.closed_by_label) == (
        None,
        "approver",
        "approver (user since deleted)",
    )
