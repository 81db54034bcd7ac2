"""A take of a ticket and the change of rights that would give it back, racing on PostgreSQL's real row
locks (approvals.assignees): whichever commits first, the ticket does not end up assigned to someone who
may no longer decide it. Each side is held open, its lock taken, until the other has blocked on it (or
had a second to)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from approvals import services
from approvals.models import PendingCall, TicketActivity
from tests.approvals_factories import ticket
from tests.integration.races import held_then

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_take_first_then_the_lost_right_gives_the_ticket_back(demo):
    call = ticket()
    approver, approvers = demo["approver"], Group.objects.get(name="approvers")
    done = held_then(
        lambda: services.ticket_assign(ticket=call, actor=approver, assignee=approver),
        lambda: approver.groups.remove(approvers),
    )
    assert not isinstance(done["first"], Exception) and not isinstance(done["second"], Exception), done
    call.refresh_from_db()
    assert call.assigned_to is None, "assigned to a person who may no longer decide it"
    [entry] = TicketActivity.objects.filter(ticket=call, kind="given_back")
    assert entry.message.startswith("Given back: approver may no longer decide it")


def test_the_lost_right_first_then_the_take_is_refused(demo):
    call = ticket()
    approver, approvers = demo["approver"], Group.objects.get(name="approvers")
    done = held_then(
        lambda: approver.groups.remove(approvers),
        lambda: services.ticket_assign(ticket=PendingCall.objects.get(pk=call.pk), actor=approver, assignee=approver),
    )
    assert isinstance(done["second"], services.NotAllowed), done
    assert "only approvers answer this kind of ticket." in str(done["second"])
    call.refresh_from_db()
    assert call.assigned_to is None
    assert not TicketActivity.objects.filter(ticket=call, kind="given_back").exists()


def test_a_take_first_then_the_deletion_gives_the_ticket_back_with_its_entry(demo):
    call = ticket()
    approver = demo["approver"]
    done = held_then(
        lambda: services.ticket_assign(ticket=call, actor=approver, assignee=approver),
        lambda: User.objects.get(username="approver").delete(),
    )
    assert not isinstance(done["first"], Exception) and not isinstance(done["second"], Exception), done
    call.refresh_from_db()
    assert call.assigned_to is None and not User.objects.filter(username="approver").exists()
    [entry] = TicketActivity.objects.filter(ticket=call, kind="given_back")
    assert entry.message == "Given back: approver may no longer decide it (their account was deleted.)"


def test_the_deletion_first_then_the_take_is_refused(demo):
    """Before: the take, waiting on the deleted person's row, found it gone and went on with the copy it
    had; a superuser's copy may decide anything: an assignment to a row that no longer exists, which
    PostgreSQL refused at commit (an IntegrityError: a 500)."""
    call = ticket()
    admin = demo["admin"]
    done = held_then(
        lambda: User.objects.get(username="admin").delete(),
        lambda: services.ticket_assign(ticket=PendingCall.objects.get(pk=call.pk), actor=admin, assignee=admin),
    )
    assert isinstance(done["second"], services.NotAllowed), done
    assert str(done["second"]) == f"You may not take ticket #{call.pk}: log in to answer tickets."
    call.refresh_from_db()
    assert call.assigned_to is None
    assert not TicketActivity.objects.filter(ticket=call, kind="given_back").exists()
