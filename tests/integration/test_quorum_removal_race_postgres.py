"""A held approval of a quorum ticket and its giver's removal from the approvers, racing a second
approver's decision on PostgreSQL's real row locks. Before: nothing the removal locks was read by the
decision, so a removal that committed while the decision was open still counted for it: the ticket closed
approved with the removed person's approval among those that counted, after the removal had returned.
Now the decision locks the givers' rows of its quorum tickets' held approvals (FOR SHARE), which a change
of rights locks too (approvals.assignees): the decision first, the removal waits for its commit; the
removal first, the decision waits and the approval lapses."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group

from approvals import services
from approvals.models import PendingCall, Response
from tests.approvals_factories import ticket
from tests.integration.races import at_once, held_then

pytestmark = pytest.mark.django_db(transaction=True)


def _held_approval(demo) -> tuple[PendingCall, Response]:
    call = ticket(required_approvals=2)
    held = services.ticket_approve(ticket=call, actor=demo["approver"])
    assert not held.final
    return call, held


def _decide(call: PendingCall, who: Any, order: list[str]) -> Response:
    response = services.ticket_approve(ticket=PendingCall.objects.get(pk=call.pk), actor=who)
    order.append("decision")
    return response


def _remove(who: Any, order: list[str]) -> None:
    who.groups.remove(Group.objects.get(name="approvers"))
    order.append("removal")


def test_the_decision_first_then_the_removal_waits_for_its_commit(demo):
    call, held = _held_approval(demo)
    order: list[str] = []
    done = held_then(lambda: _decide(call, demo["approver2"], order), lambda: _remove(demo["approver"], order))
    assert not isinstance(done.get("second"), Exception), done
    assert done["waited"], "the removal committed while the decision that counts the approval was open"
    call.refresh_from_db()
    final = Response.objects.get(pending_call=call, final=True)
    assert call.status == "approved" and final.counted == [held.pk]


def test_the_removal_first_then_the_approval_no_longer_counts(demo):
    call, held = _held_approval(demo)
    order: list[str] = []
    done = held_then(lambda: _remove(demo["approver"], order), lambda: _decide(call, demo["approver2"], order))
    assert isinstance(done["second"], Response), done
    assert done["waited"], "the decision read the rights of a removal not committed yet"
    call.refresh_from_db()
    assert call.is_open and not done["second"].final, "closed with the approval of someone removed"
    assert not Response.objects.filter(pending_call=call, final=True).exists()


def test_decisions_removals_and_takes_raced_many_times_never_deadlock(demo):
    """A second approval, the first giver's removal and an admin's take of the ticket, released together,
    10 times (the removal given back to the approvers after each): no deadlock or other error; the ticket
    closed counting the first approval (the decision first) or waits with it lapsed (the removal first)."""
    approvers = Group.objects.get(name="approvers")
    for round_ in range(10):
        call, held = _held_approval(demo)
        order: list[str] = []
        done = at_once(
            {
                "decision": lambda call=call, order=order: _decide(call, demo["approver2"], order),
                "removal": lambda order=order: _remove(demo["approver"], order),
                "take": lambda call=call: services.ticket_assign(
                    ticket=PendingCall.objects.get(pk=call.pk), actor=demo["admin"], assignee=demo["admin"]
                ),
            }
        )
        late = isinstance(done["take"], services.TicketClosed)  # the take after the decision: refused
        errors = {k: v for k, v in done.items() if isinstance(v, Exception) and not (k == "take" and late)}
        assert not errors, (round_, errors)
        call.refresh_from_db()
        final = Response.objects.filter(pending_call=call, final=True).first()
        if call.is_open:  # the removal first: the first approval lapsed, the second waits for another
            assert final is None and not done["decision"].final, round_
        else:  # the decision first, counting the first approval; the removal after its commit
            assert call.status == "approved" and final is not None and final.counted == [held.pk], round_
        demo["approver"].groups.add(approvers)
