"""`decides_q` (who may decide, as a filter on Response rows: the quorum's count, one query) and
`decide_refusal` (the same for one person and ticket: every decision's check) are one rule written
twice, Python and SQL. Held together here: for each kind of ticket, each person's approval counts in
SQL exactly when the Python rule lets them decide. A change to one that the other does not make fails
a case here (the cases name each clause of the rule: the roles, routing, escalation by record and by
the clock, four-eyes for the requester and for the askers before and after the ticket opened, by its
turn or, for older rows with no turn to go by, by the clock; a question to its own requester, inactive
people)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.utils import timezone

from adkweb.roles import DECIDE_TICKETS
from agents_app.models import StoredEvent
from approvals.models import PendingCall, Response
from approvals.permissions import decide_refusal, decides_q
from tests.approvals.policy_helpers import person, team
from tests.approvals_factories import asks, session_for, stamped, ticket, turn_event

Setup = Callable[[dict[str, User]], PendingCall]


def _ticket(session: Any = None, *, kind: str = "long_running", groups=(), escalation=(), **fields: Any):
    made = ticket(session=session, kind=kind, routed=bool(groups), **fields)
    made.approver_groups.set(Group.objects.filter(name__in=groups))
    made.escalation_groups.set(Group.objects.filter(name__in=escalation))
    return made


def _ago(seconds: int) -> Any:
    return timezone.now() - timedelta(seconds=seconds)


def _asked_before_and_after(people: dict[str, User]) -> PendingCall:
    session = session_for()
    asks(people["sam"], session)  # before it opened: an asker
    made = _ticket(session, groups=("finance",), four_eyes=True, required_approvals=2)
    asks(people["lea"], session)  # while it waits: not an asker
    return made


def _asked_without_four_eyes(people: dict[str, User]) -> PendingCall:
    session = session_for()
    asks(people["sam"], session)
    return _ticket(session, groups=("finance",))


def _unrouted_four_eyes_asked(people: dict[str, User]) -> PendingCall:
    session = session_for()
    asks(people["sam"], session)
    return _ticket(session, four_eyes=True)


def _clocks_disagree(people: dict[str, User]) -> PendingCall:
    """sam's message opened it, stamped by a worker 5 minutes behind; lea wrote after that turn, before
    the ticket's (wrong) time."""
    asked = asks(people["sam"], session_for())
    later = asks(people["lea"], asked.session)
    made = _ticket(asked.session, groups=("finance",), four_eyes=True, required_approvals=2, event=turn_event(asked))
    made = stamped(made, asked.created_at - timedelta(minutes=5))
    assert made.created_at < asked.created_at < later.created_at
    return made


def _worker_ahead(people: dict[str, User]) -> PendingCall:
    """The requester's message opened it, stamped by a worker 5 minutes ahead; sam wrote after that turn."""
    asked = asks(people["requester"], session_for())
    asks(people["sam"], asked.session)
    made = _ticket(asked.session, groups=("finance",), four_eyes=True, event=turn_event(asked))
    return stamped(made, timezone.now() + timedelta(minutes=5))


def _event_without_turn(people: dict[str, User]) -> PendingCall:
    """An older row: its event has no turn, so the clock decides (sam before it, lea after)."""
    session = session_for()
    asks(people["sam"], session)
    event = StoredEvent.objects.create(session=session, event_id="ev-old", author="agent", timestamp=0.0, data={})
    made = _ticket(session, groups=("finance",), four_eyes=True, event=event)
    asks(people["lea"], session)
    return made


CASES: dict[str, Setup] = {
    "routed, four-eyes, an approver's own": lambda p: _ticket(
        session_for(user_id="approver"), groups=("finance",), four_eyes=True, required_approvals=2
    ),
    "routed, an approver's own, no four-eyes": lambda p: _ticket(session_for(user_id="approver"), groups=("finance",)),
    "a superuser's own, four-eyes": lambda p: _ticket(session_for(user_id="admin"), four_eyes=True),
    "askers before and after it opened": _asked_before_and_after,
    "an asker, no four-eyes": _asked_without_four_eyes,
    "unrouted, four-eyes, an asker": _unrouted_four_eyes_asked,
    "an asker, the worker's clock behind": _clocks_disagree,
    "a later writer, the worker's clock ahead": _worker_ahead,
    "an event with no turn: by the clock": _event_without_turn,
    "unrouted": lambda p: _ticket(),
    "escalation recorded": lambda p: _ticket(
        groups=("finance",), escalation=("treasury",), escalate_at=_ago(60), escalated_at=_ago(60)
    ),
    "escalation time come, not recorded": lambda p: _ticket(
        groups=("finance",), escalation=("treasury",), escalate_at=_ago(1)
    ),
    "escalation time to come": lambda p: _ticket(
        groups=("finance",), escalation=("treasury",), escalate_at=timezone.now() + timedelta(hours=1)
    ),
    "closed before its escalation time": lambda p: _ticket(
        groups=("finance",),
        escalation=("treasury",),
        escalate_at=_ago(60),
        status="approved",
        closed_at=_ago(120),
    ),
    "closed after its escalation time, not recorded": lambda p: _ticket(
        groups=("finance",), escalation=("treasury",), escalate_at=_ago(120), status="rejected", closed_at=_ago(60)
    ),
    "a question to its requester": lambda p: _ticket(kind="input"),
    "a question under four-eyes": lambda p: _ticket(kind="input", four_eyes=True),
    "a routed question": lambda p: _ticket(kind="choice", groups=("treasury",)),
}


@pytest.fixture
def people(demo) -> dict[str, User]:
    finance, treasury = team("finance"), team("treasury")
    person("fred", finance)  # a group member with no role
    person("tess", treasury)
    ina = person("ina", finance, approver=True)
    ina.is_active = False
    ina.save(update_fields=["is_active"])
    User.objects.create_superuser("root2", password="x", is_active=False)
    direct = person("dora")  # the approvers' permission given to the person, not through a group
    app_label, codename = DECIDE_TICKETS.split(".")
    direct.user_permissions.add(Permission.objects.get(codename=codename, content_type__app_label=app_label))
    for name in ("sam", "lea"):  # staff who write in other people's conversations
        staff = person(name, finance, approver=True)
        staff.is_staff = True
        staff.save(update_fields=["is_staff"])
    return {u.username: u for u in User.objects.all()}


@pytest.mark.parametrize("case", list(CASES))
def test_decides_q_counts_exactly_whom_decide_refusal_lets_decide(people, case):
    made = CASES[case](people)
    made = PendingCall.objects.get(pk=made.pk)
    for who in people.values():
        Response.objects.create(pending_call=made, action="approve", payload={}, final=False, actor=who)
    counted = set(
        Response.objects.filter(pending_call=made).filter(decides_q()).values_list("actor__username", flat=True)
    )
    # Each person read afresh (permission caches), the ticket as one decision reads it.
    allowed = {
        name
        for name, who in people.items()
        if decide_refusal(User.objects.get(pk=who.pk), PendingCall.objects.get(pk=made.pk)) is None
    }
    assert counted == allowed, f"SQL only: {sorted(counted - allowed)}; Python only: {sorted(allowed - counted)}"
    assert allowed and allowed != set(people), "a case that tells deciders from the others"
