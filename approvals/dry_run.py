"""Dry run: what a policy would have done to the last N closed tickets, had it been in force when
they opened. Computed from the stored tickets and their responses; nothing is changed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model

from .models import PendingCall, Policy, Response
from .permissions import asked
from .policy_match import Choice
from .rules import auto_decision, candidates, choose, fits, matches, specificity

DEFAULT_LAST = 100
MAX_LAST = 1000
SHOWN = 50


@dataclass
class DryRun:
    policy: Policy
    considered: int = 0
    matched: int = 0
    applied: int = 0  # matched and would have won over the other enabled policies
    auto: Counter = field(default_factory=Counter)
    routed: Counter = field(default_factory=Counter)
    expired: int = 0
    four_eyes: int = 0  # decided by their requester or one who asked in the conversation: refused under four-eyes
    short: int = 0  # approved with fewer approvers than the policy requires
    passed_over: int = 0  # it would approve them at once, but its condition could not be read on their arguments
    tickets: list[dict[str, Any]] = field(default_factory=list)

    def show(self, ticket: PendingCall, outcome: str, passed_over: list[dict[str, Any]]) -> None:
        if len(self.tickets) < SHOWN:
            row = {"id": ticket.pk, "status": ticket.status, "wouldBe": outcome}
            self.tickets.append(row | {"passedOver": passed_over})

    def as_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy.pk,
            "version": self.policy.version,
            "considered": self.considered,
            "matched": self.matched,
            "wouldApply": self.applied,
            "autoApproved": self.auto["approve"],
            "autoRejected": self.auto["reject"],
            "routedTo": dict(sorted(self.routed.items())),
            "expired": self.expired,
            "fourEyesRefused": self.four_eyes,
            "tooFewApprovals": self.short,
            "passedOver": self.passed_over,
            "tickets": self.tickets,
        }


def _chooser(policy: Policy) -> Callable[[PendingCall], Choice | None]:
    """choice(ticket): the choice the ticket would have opened with (policy_match.choose), the policy in
    force among the other enabled ones; None where its agent, tool or kind does not fit the ticket.
    Reads the other policies once per agent, tool and kind."""
    ranked: dict[tuple[str, str, str], list[Policy]] = {}

    def choice(ticket: PendingCall) -> Choice | None:
        key = (ticket.app_name, ticket.tool_name, ticket.kind)
        if not fits(policy, app_name=key[0], tool_name=key[1], kind=key[2]):
            return None
        if key not in ranked:
            others = [p for p in candidates(app_name=key[0], tool_name=key[1], kind=key[2]) if p.pk != policy.pk]
            ranked[key] = sorted([*others, policy], key=specificity, reverse=True)
        return choose(ranked[key], ticket.tool_args, ticket.kind)

    return choice


def _closed_by_askers(rows: list[PendingCall]) -> set[int]:
    """The tickets closed by one who had asked for them: whom four-eyes keeps off them
    (approvals.permissions.asked, as a decision reads it). One query."""
    closed = PendingCall.objects.filter(pk__in=[t.pk for t in rows], closed_by__isnull=False)
    return set(closed.filter(asked("", "closed_by")).values_list("pk", flat=True))


def _approvers(rows: list[PendingCall], four_eyes: bool) -> Counter:
    """Per ticket, the distinct people whose approvals would count: under four-eyes not its requester's
    nor an asker's (approvals.permissions.decides_q)."""
    found = Response.objects.filter(pending_call__in=rows, action=Response.Action.APPROVE, actor__isnull=False)
    if four_eyes:
        found = found.exclude(asked("pending_call__", "actor"))
    requester = {t.pk: t.requester for t in rows}
    pairs = found.values_list("pending_call_id", "actor_id", f"actor__{get_user_model().USERNAME_FIELD}").distinct()
    return Counter(pk for pk, _who, name in pairs if not four_eyes or name != requester[pk])


def _outcome(policy: Policy, ticket: PendingCall, approvers: int, groups: list[str], closer_asked: bool) -> str:
    auto = auto_decision(policy, ticket.kind)
    if auto:
        return f"auto-{auto}d"
    due = timedelta(seconds=policy.due_in_seconds) if policy.due_in_seconds else None
    if due is not None and ticket.closed_at and ticket.closed_at - ticket.created_at > due:
        return "expired"
    closer = ticket.closed_by
    if policy.four_eyes and closer and (closer.get_username() == ticket.requester or closer_asked):
        return "refused: four-eyes"  # as approvals.permissions.decide_refusal: the requester, or who asked
    if ticket.status == "approved" and approvers < policy.required_approvals:
        return f"waiting: {approvers} of {policy.required_approvals} approvals"
    return f"routed to {', '.join(groups)}"


def policy_dry_run(*, policy: Policy, last: int = DEFAULT_LAST) -> DryRun:
    """The policy (as saved now, enabled or not) over the last `last` closed tickets."""
    closed = PendingCall.objects.exclude(status__in=PendingCall.OPEN_STATUSES).select_related("closed_by")
    rows = list(closed.order_by("-closed_at", "-id")[:last])
    groups = sorted(g.name for g in policy.approver_groups.all()) or ["approvers"]
    closed_by_askers = _closed_by_askers(rows) if policy.four_eyes else set()
    approvals = _approvers(rows, policy.four_eyes)
    result = DryRun(policy=policy, considered=len(rows))
    chosen = _chooser(policy)
    for ticket in rows:
        choice = chosen(ticket)
        if choice is None:
            continue
        passed = list(choice.passed_over)  # as the ticket's JSON lists them (passedOver)
        if any(p["name"] == policy.name for p in passed):  # it would approve at once; a person decides instead
            result.passed_over += 1
            result.show(ticket, "passed over: a person decides", passed)
            continue
        if not matches(
            policy, app_name=ticket.app_name, tool_name=ticket.tool_name, kind=ticket.kind, args=ticket.tool_args
        ):
            continue
        result.matched += 1
        if choice.policy is None or choice.policy.pk != policy.pk:  # a more specific policy applies
            continue
        result.applied += 1
        outcome = _outcome(policy, ticket, approvals[ticket.pk], groups, ticket.pk in closed_by_askers)
        if outcome.startswith("auto-"):
            result.auto[outcome[5:-1]] += 1
        else:
            for name in groups:
                result.routed[name] += 1
        result.expired += outcome == "expired"
        result.four_eyes += outcome == "refused: four-eyes"
        result.short += outcome.startswith("waiting")
        result.show(ticket, outcome, passed)
    return result
