"""Dry run: what a policy would have done to the last N closed tickets, had it been in force when
they opened. Computed from the stored tickets and their responses; nothing is changed."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from .models import PendingCall, Policy, Response
from .rules import auto_decision, candidates, matches, specificity

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
    four_eyes: int = 0  # decided by their own requester: refused under four-eyes
    short: int = 0  # approved with fewer approvers than the policy requires
    tickets: list[dict[str, Any]] = field(default_factory=list)

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
            "tickets": self.tickets,
        }


def _wins(policy: Policy, ticket: PendingCall) -> bool:
    """Whether the policy would have beaten every other enabled policy that matches the ticket."""
    for other in candidates(app_name=ticket.app_name, tool_name=ticket.tool_name, kind=ticket.kind):
        if other.pk == policy.pk:
            continue
        if specificity(other) > specificity(policy) and matches(
            other, app_name=ticket.app_name, tool_name=ticket.tool_name, kind=ticket.kind, args=ticket.tool_args
        ):
            return False
    return True


def _outcome(policy: Policy, ticket: PendingCall, approvers: int, groups: list[str]) -> str:
    auto = auto_decision(policy, ticket.kind)
    if auto:
        return f"auto-{auto}d"
    due = timedelta(seconds=policy.due_in_seconds) if policy.due_in_seconds else None
    if due is not None and ticket.closed_at and ticket.closed_at - ticket.created_at > due:
        return "expired"
    if policy.four_eyes and ticket.closed_by and ticket.closed_by.get_username() == ticket.requester:
        return "refused: four-eyes"
    if ticket.status == "approved" and approvers < policy.required_approvals:
        return f"waiting: {approvers} of {policy.required_approvals} approvals"
    return f"routed to {', '.join(groups)}"


def policy_dry_run(*, policy: Policy, last: int = DEFAULT_LAST) -> DryRun:
    """The policy (as saved now, enabled or not) over the last `last` closed tickets."""
    closed = PendingCall.objects.exclude(status__in=PendingCall.OPEN_STATUSES).select_related("closed_by")
    rows = list(closed.order_by("-closed_at", "-id")[:last])
    groups = sorted(g.name for g in policy.approver_groups.all()) or ["approvers"]
    approvals = Counter(
        Response.objects.filter(pending_call__in=rows, action=Response.Action.APPROVE, actor__isnull=False)
        .values_list("pending_call_id", "actor_id")
        .distinct()
        .values_list("pending_call_id", flat=True)
    )
    result = DryRun(policy=policy, considered=len(rows))
    for ticket in rows:
        if not matches(
            policy, app_name=ticket.app_name, tool_name=ticket.tool_name, kind=ticket.kind, args=ticket.tool_args
        ):
            continue
        result.matched += 1
        if not _wins(policy, ticket):
            continue
        result.applied += 1
        outcome = _outcome(policy, ticket, approvals[ticket.pk], groups)
        if outcome.startswith("auto-"):
            result.auto[outcome[5:-1]] += 1
        else:
            for name in groups:
                result.routed[name] += 1
        result.expired += outcome == "expired"
        result.four_eyes += outcome == "refused: four-eyes"
        result.short += outcome.startswith("waiting")
        if len(result.tickets) < SHOWN:
            result.tickets.append({"id": ticket.pk, "status": ticket.status, "wouldBe": outcome})
    return result
