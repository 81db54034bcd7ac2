"""A decision checked before anything is written (approvals.decisions): the answer a caller gives, the
refusals it may meet (each an HTTP 403 or 409) and what it will do (its plan: the ticket's outcome, held
for a quorum or not, the arguments' hash). What of it reaches the agent: approvals.answer_turn."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.template.defaultfilters import truncatechars
from django.utils import timezone
from google.genai import types

from adkweb.errors import Conflict, Forbidden, Refused
from agents_app.agents import configured_without_tool

from . import edits, grants, payloads
from .hashing import args_hash
from .models import PendingCall, Response
from .payloads import InvalidResponse
from .permissions import decide_refusal, decides_q

NOTHING_SENT = "Nothing was sent."


def unsent(refusal: Refused) -> Refused:
    """A refused decision as every caller shows it (the API's detail, the pages' alert): saying, once and
    last, that nothing was sent. Given to every refusal met while deciding (`refused_unsent`: approvals.
    decisions.answers_submit, and /run's answers as they are read, approvals.run_answers), not written
    into each refusal's own text."""
    return refusal.ending(NOTHING_SENT)


@contextmanager
def refused_unsent() -> Iterator[None]:
    """Whatever refuses a decision in here (its plan's checks, an edit's, a payload's, a /run answer's
    reading) says nothing was sent (`unsent`). Also a decorator."""
    try:
        yield
    except Refused as refusal:
        unsent(refusal)
        raise


class TicketClosed(Conflict):
    """The ticket already has its final response (HTTP 409)."""

    def __init__(self, ticket: PendingCall) -> None:
        who = f" by {ticket.closed_by_label}" if ticket.closed_by_label else ""
        status = ticket.get_status_display()
        super().__init__(f"Ticket #{ticket.pk} is already closed ({status}{who}).")
        self.ticket = ticket


class NotAllowed(Forbidden):
    """The actor may not answer this ticket (HTTP 403)."""

    @classmethod
    def answering(cls, ticket: PendingCall, refusal: str) -> NotAllowed:
        """`refusal` (approvals.permissions.decide_refusal) as a decision's refusal says it."""
        return cls(f"You may not answer ticket #{ticket.pk}: {refusal}")


class StaleArguments(Conflict):
    """The decider saw other arguments than the ticket's current ones (HTTP 409)."""

    def __init__(self, ticket: PendingCall) -> None:
        by = f" by {ticket.edited_by_label}" if ticket.edited_by_label else ""
        super().__init__(
            f"The arguments of ticket #{ticket.pk} changed since you saw them (edited{by}); "
            "reload it and decide on what it says now."
        )


class ArgumentsUnsaid(Conflict):
    """An approval of a ticket whose arguments an approver edited that does not say which arguments it
    approves (no argsHash, no editedArgs): it would count toward arguments its sender may never have
    seen (HTTP 409)."""

    def __init__(self, ticket: PendingCall, via_run: bool) -> None:
        by = f" by {ticket.edited_by_label}" if ticket.edited_by_label else ""
        changed = truncatechars(edits.changes_text(ticket.tool_args, ticket.current_args), 300)
        approve = f"/api/pending-calls/{ticket.pk}/approve"
        how = (
            f"a function response on /run cannot say it: approve through {approve} with argsHash"
            if via_run
            else "send argsHash (the ticket's JSON has it) or editedArgs with it, or approve on the ticket's page"
        )
        super().__init__(
            f"The arguments of ticket #{ticket.pk} were edited{by} since the agent asked ({changed}): an approval "
            f"must say which arguments it approves; {how}."
        )


class PastDue(Conflict):
    """A person's answer to a ticket whose due time has passed: it expires (the deadline sweep closes it
    and tells the agent), whether or not the sweep has reached it yet (HTTP 409)."""

    def __init__(self, ticket: PendingCall) -> None:
        due = timezone.localtime(ticket.due_at).strftime("%Y-%m-%d %H:%M:%S %Z")
        super().__init__(
            f"Ticket #{ticket.pk} was due at {due} and nobody decided it by then: it expires (the agent is told so)."
        )


class ToolGone(Conflict):
    """A person's answer to a tool confirmation whose tool its agent no longer has (an admin took it out
    since the agent asked): ADK can neither run nor skip that call, the answer would fail the agent's turn
    and never reach it; refused until the agent has the tool again (HTTP 409)."""

    def __init__(self, ticket: PendingCall) -> None:
        super().__init__(
            f"Ticket #{ticket.pk} cannot be answered now: agent {ticket.app_name!r} no longer has the tool "
            f"{ticket.tool_name!r} (its configuration changed since it asked), so the agent could neither run "
            "the call nor skip it. Give the agent the tool again to decide it."
        )


def tool_gone(ticket: PendingCall) -> bool:
    """Whether this ticket is a tool confirmation whose tool its agent no longer has (`ToolGone`). Its agent's
    configuration rows stay locked FOR SHARE to the caller's commit: an admin's save that would take the tool
    out waits for the decision, or the decision for the save (agents_app.config_tools)."""
    kind = ticket.kind == PendingCall.Kind.CONFIRMATION
    return kind and configured_without_tool(ticket.app_name, ticket.tool_name, lock=True)


class AlreadyCounted(Forbidden):
    """A person's approval counts once toward a ticket's required approvals (HTTP 403)."""


@dataclass
class Answer:
    ticket: PendingCall
    payload: dict[str, Any]
    final: bool
    comment: str = ""
    action: str = Response.Action.CUSTOM
    sent: types.FunctionResponse | None = None  # a client's own FunctionResponse, passed on as is
    seen_hash: str | None = None  # the argsHash the decider saw, when given
    edited_args: dict[str, Any] | None = None  # approve these arguments instead
    grant: grants.GrantSpec | None = None  # and allow the tool for a while
    approve_extra: dict[str, Any] | None = None  # a confirmation's payload given with "approve"


@dataclass
class Plan:
    answer: Answer
    outcome: str  # the ticket status a final answer gives, or "update"
    held: bool = False  # an approval that waits for more
    hash: str = ""
    counted: list[int] | None = None  # closing a quorum ticket: its held approvals that count (Response.counted)


def approvers(ticket: PendingCall, hash_: str) -> dict[int, int]:
    """Who has approved these exact arguments so far (held approvals of a quorum ticket) and may still
    decide it, each with the approval that counts (their first): an approval counts while its giver may
    (approvals.permissions.decides_q; one query). A decision holds its givers' rows (approvals.assignees.
    givers_locked, FOR SHARE, before its session and tickets), which a change of their rights (groups,
    permissions, is_active, the account deleted) locks too: that change commits before this read, and
    counts, or waits for the decision's commit; its record (`Plan.counted`) says who counted."""
    rows = Response.objects.filter(
        pending_call=ticket, action=Response.Action.APPROVE, final=False, args_hash=hash_, actor__isnull=False
    )
    found: dict[int, int] = {}
    for actor_id, pk in rows.filter(decides_q()).order_by("created_at", "id").values_list("actor_id", "id"):
        found.setdefault(actor_id, pk)
    return found


# The final answers an agent may act on with the values they carry: an approval, and an answer whose
# status no word of payloads reads ("closed", a tool's own result), which an agent may take for one.
_ACTED_ON = (PendingCall.Status.APPROVED, PendingCall.Status.ANSWERED)


def answer_plan(answer: Answer, actor: Any, source: str) -> Plan:
    """What an answer will do, checked before anything is written (refused: an exception to say why)."""
    ticket = answer.ticket
    if source == Response.Source.PERSON:
        refusal = decide_refusal(actor, ticket)
        if refusal:
            raise NotAllowed.answering(ticket, refusal)
    if ticket.is_closed:
        raise TicketClosed(ticket)
    if source == Response.Source.PERSON and ticket.past_due:
        raise PastDue(ticket)  # the sweep's clock (approvals.deadlines), not its timing, ends a ticket
    if answer.seen_hash is not None and answer.seen_hash != ticket.args_hash:
        raise StaleArguments(ticket)
    if source == Response.Source.PERSON and tool_gone(ticket):
        raise ToolGone(ticket)
    outcome = payloads.decision_of(answer.action, ticket, answer.payload) if answer.final else "update"
    unsaid = answer.seen_hash is None and answer.edited_args is None
    if outcome == PendingCall.Status.APPROVED and unsaid and edits.edited(ticket):
        raise ArgumentsUnsaid(ticket, via_run=answer.sent is not None)
    if answer.edited_args is not None:
        if outcome != PendingCall.Status.APPROVED:
            raise InvalidResponse("Edited arguments go with an approval only.")
        edited = edits.check(ticket, answer.edited_args)
        answer.edited_args = None if edited == ticket.current_args else edited
        moved = edits.rules_refusal(ticket, edited) if answer.edited_args is not None else None
        if moved:
            raise moved
    if outcome in _ACTED_ON and ticket.kind in edits.EDITABLE_KINDS:
        approved = answer.edited_args if answer.edited_args is not None else ticket.current_args
        said = edits.answer_refusal(ticket, _said(answer), approved, via_run=answer.sent is not None)
        if said:  # the payload or answer says other arguments: an edit's to say (400)
            raise said
    if answer.action == Response.Action.APPROVE:
        answer.payload = payloads.approve_payload(ticket, answer.comment, answer.approve_extra, answer.edited_args)
    elif outcome == PendingCall.Status.APPROVED and answer.sent is None:  # a /run answer's: function_response
        answer.payload = payloads.with_edits(ticket, answer.payload, answer.edited_args)
    payloads.validate(ticket, answer.payload, answer.final)
    plan = Plan(answer, outcome, hash=args_hash(answer.edited_args or ticket.current_args))
    if ticket.required_approvals > 1 and answer.final:
        if outcome == PendingCall.Status.ANSWERED:
            raise InvalidResponse(
                f"Ticket #{ticket.pk} needs {ticket.required_approvals} approvals: approve or reject it."
            )
        if outcome == PendingCall.Status.APPROVED:
            # An approval sent as a custom response ({"status": "approved"}, a confirmation's
            # {"confirmed": true}) is one of the approvals: recorded as one, the count reads it.
            answer.action = Response.Action.APPROVE
            given = approvers(ticket, plan.hash)
            if actor is not None and actor.pk in given:
                raise AlreadyCounted(
                    f"Your approval of ticket #{ticket.pk} already counts ({len(given)} of "
                    f"{ticket.required_approvals}); another approver must give the next one."
                )
            plan.held = len(given) + 1 < ticket.required_approvals
            if not plan.held:
                plan.counted = sorted(given.values())
        else:  # a rejection (or an expiry) closes it: with the approvals that count now, recorded
            plan.counted = sorted(approvers(ticket, plan.hash).values())
    if answer.grant is not None:
        if outcome != PendingCall.Status.APPROVED:
            raise InvalidResponse("A standing grant goes with an approval only.")
        refusal = grants.grant_refusal(ticket)
        if refusal:
            raise Conflict(refusal)
        duplicate = grants.duplicate_refusal(ticket, answer.grant.scope)  # before anything is written
        if duplicate:
            raise duplicate
    return plan


def _said(answer: Answer) -> dict[str, Any]:
    """The values an approver wrote into an approval (what `edits.answer_refusal` reads): a confirmation's
    payload (given with "approve", or in the response it wrote), a long-running tool's answer but its status."""
    if answer.action == Response.Action.APPROVE:
        return answer.approve_extra or {}
    if answer.ticket.kind == PendingCall.Kind.CONFIRMATION:
        said = answer.payload.get("payload")
        return said if isinstance(said, dict) else {}
    return {k: v for k, v in answer.payload.items() if k != "status"}
