"""A take of a ticket and the change of rights that would give it back, racing on PostgreSQL's real row
locks (approvals.assignees): whichever commits first, the ticket does not end up assigned to someone who
may no longer decide it. Each side is held open, its lock taken, until the other has blocked on it (or
had a second to)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection, transaction

from approvals import services
from approvals.models import PendingCall, TicketActivity
from tests.approvals_factories import ticket
from tests.integration.races import waiting_on_a_lock

pytestmark = pytest.mark.django_db(transaction=True)


def _held_then(first: Callable[[], Any], second: Callable[[], Any]) -> dict[str, Any]:
    """Run `first` in a transaction held open in one thread, then `second` in another; once `second`
    waits on a lock (or after a second), `first` commits. What each returned or raised."""
    done: dict[str, Any] = {}
    began, release = threading.Event(), threading.Event()

    def one() -> None:
        try:
            with transaction.atomic():
                done["first"] = first()
                began.set()
                release.wait(10)
        except Exception as exc:  # reported by the test
            done["first"] = exc
        finally:
            began.set()
            connection.close()

    def two() -> None:
        try:
            done["second"] = second()
        except Exception as exc:  # a refusal is an answer the person sees
            done["second"] = exc
        finally:
            connection.close()

    t1 = threading.Thread(target=one)
    t1.start()
    assert began.wait(10)
    t2 = threading.Thread(target=two)
    t2.start()
    deadline = time.monotonic() + 1
    while time.monotonic() < deadline and not waiting_on_a_lock():
        time.sleep(0.01)
    release.set()
    t1.join(10)
    t2.join(10)
    return done


def test_a_take_first_then_the_lost_right_gives_the_ticket_back(demo):
    call = ticket()
    approver, approvers = demo["approver"], Group.objects.get(name="approvers")
    done = _held_then(
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
    done = _held_then(
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
    done = _held_then(
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
    done = _held_then(
        lambda: User.objects.get(username="admin").delete(),
        lambda: services.ticket_assign(ticket=PendingCall.objects.get(pk=call.pk), actor=admin, assignee=admin),
    )
    assert isinstance(done["second"], services.NotAllowed), done
    assert str(done["second"]) == f"You may not take ticket #{call.pk}: log in to answer tickets."
    call.refresh_from_db()
    assert call.assigned_to is None
    assert not TicketActivity.objects.filter(ticket=call, kind="given_back").exists()
