"""Demo conversations (`manage.py demo_setup --conversations`, what `make run` runs): a newcomer's
first look shows tickets waiting and decided. Each is made through the real paths, as a person would make
it: the requester's message (services.message_send), the agent's turns with the offline demo model run
here (runner.session_turns_run, what a worker runs), the approvers' decisions (approvals.services). So
its events, tickets, history and the session's stored status are what the app itself writes.

Kept out of `demo_setup()` (the tests' `demo` fixture), which makes no tickets. Idempotent: a conversation
whose session id exists (even deleted: archived) is not made again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User

from agents_app import runner, services
from agents_app.models import AdkSession
from approvals import services as approvals
from approvals.models import PendingCall

REQUESTER = "requester"


def _approve(by: str, comment: str = "") -> Callable[[PendingCall], Any]:
    return lambda ticket: approvals.ticket_approve(ticket=ticket, actor=User.objects.get(username=by), comment=comment)


def _reject(by: str, reason: str) -> Callable[[PendingCall], Any]:
    return lambda ticket: approvals.ticket_reject(ticket=ticket, actor=User.objects.get(username=by), reason=reason)


@dataclass(frozen=True)
class DemoConversation:
    session_id: str
    app_name: str
    text: str
    decisions: list[Callable[[PendingCall], Any]] = field(default_factory=list)  # in order, on its ticket


# Oldest first: the conversations list and the inbox show the waiting ones on top.
DEMO_CONVERSATIONS = [
    DemoConversation(
        "demo-train",
        "reimbursement_agent",
        "Please reimburse 350$ for a train ticket",
        [_approve("approver", "Receipt checked")],
    ),
    DemoConversation(
        "demo-dinner",
        "reimbursement_agent",
        "Please reimburse 450$ for a conference dinner",
        [_reject("approver", "Dinners are covered by the conference fee")],
    ),
    DemoConversation("demo-bob", "transfer_agent", "transfer $500 to Bob"),
    DemoConversation(
        "demo-laptop",
        "reimbursement_agent",
        "Please reimburse 2500$ for laptop",
        [_approve("approver", "Within the equipment budget")],  # 1 of the 2 finance approvals it needs
    ),
    DemoConversation("demo-meals", "reimbursement_agent", "Please reimburse 200$ for meals"),
]


def demo_conversations() -> int:
    """Make the demo conversations that do not exist yet; how many were made."""
    requester = User.objects.get(username=REQUESTER)  # demo_setup() made it
    made = 0
    for spec in DEMO_CONVERSATIONS:
        if AdkSession.all_objects.filter(app_name=spec.app_name, user_id=REQUESTER, session_id=spec.session_id):
            continue
        _converse(spec, requester)
        made += 1
    return made


def _converse(spec: DemoConversation, requester: User) -> None:
    session = services.session_create(app_name=spec.app_name, user_id=REQUESTER, session_id=spec.session_id)
    services.message_send(session=session, text=spec.text, actor=requester, streaming=False)
    runner.session_turns_run(session.pk)
    for decide in spec.decisions:
        decide(PendingCall.objects.get(session=session, status__in=PendingCall.OPEN_STATUSES))
        runner.session_turns_run(session.pk)
