"""Which policy applies to a ticket, and what it does when the ticket opens: route it, set its
quorum and deadlines, record the rules (and the policy's version) on it, and decide it at once when
the policy says so or a standing grant covers it.

The policy that applies is the first enabled match by (priority, specificity): a higher priority
wins; among equals a policy with a condition beats one without, then one naming the tool, the kind
of pause, the agent; the oldest breaks a tie. A ticket no policy matches keeps the default rule
(any approver, one decision). A condition that cannot be decided on the arguments (an amount that
does not read as a number, an argument missing) fails closed: approvals.policy_match.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from . import grants
from .decisions import Answer, answers_submit
from .models import PendingCall, Policy, Response, TicketActivity
from .payloads import approve_payload, reject_payload, schema_problem
from .policy_cache import candidates, fits, policies_and_grant, specificity  # noqa: F401  (dry_run, tests)
from .policy_match import auto_decision, choose, first_matching, verdict


def matches(policy: Policy, *, app_name: str, tool_name: str, kind: str, args: dict[str, Any]) -> bool:
    """Whether the policy applies to such a ticket (as `choose` has it: also where its condition is undecided)."""
    if not fits(policy, app_name=app_name, tool_name=tool_name, kind=kind):
        return False
    return verdict(policy, args, kind)[0]


def policy_for(ticket: PendingCall) -> Policy | None:
    """The policy that decides this ticket's rules, or None (the default rule)."""
    fitting = candidates(app_name=ticket.app_name, tool_name=ticket.tool_name, kind=ticket.kind)
    return first_matching(fitting, ticket.tool_args, ticket.kind)


def policy_json(policy: Policy) -> dict[str, Any]:
    """A policy as the API shows it (and as a ticket records it)."""
    return {
        "id": policy.pk,
        "name": policy.name,
        "agent": policy.agent or None,
        "tool": policy.tool or None,
        "kind": policy.kind or None,
        "condition": policy.condition,
        "priority": policy.priority,
        "approverGroups": sorted(g.name for g in policy.approver_groups.all()),
        "escalationGroups": sorted(g.name for g in policy.escalation_groups.all()),
        "requiredApprovals": policy.required_approvals,
        "fourEyes": policy.four_eyes,
        "autoDecision": policy.auto_decision or None,
        "autoReason": policy.auto_reason,
        "autoConfirmations": policy.auto_confirmations,
        "dueInSeconds": policy.due_in_seconds,
        "remindBeforeSeconds": policy.remind_before_seconds,
        "escalateAfterSeconds": policy.escalate_after_seconds,
        "allowGrants": policy.allow_grants,
        "enabled": policy.enabled,
        "version": policy.version,
    }


def describe(policy: Policy) -> str:
    """The rules in a sentence, for the ticket's history."""
    groups = ", ".join(sorted(g.name for g in policy.approver_groups.all())) or "approvers"
    parts = [f"{policy.required_approvals} approval{'s' if policy.required_approvals > 1 else ''} from {groups}"]
    if policy.four_eyes:
        parts.append("four-eyes")
    if policy.due_in_seconds:
        parts.append(f"due in {humanize_seconds(policy.due_in_seconds)}")
    if policy.escalate_after_seconds:
        to = ", ".join(sorted(g.name for g in policy.escalation_groups.all()))
        parts.append(f"escalates to {to} after {humanize_seconds(policy.escalate_after_seconds)}")
    if not policy.allow_grants:
        parts.append("no standing grants")
    return f"Policy {policy.name!r} v{policy.version}: " + "; ".join(parts) + "."


def humanize_seconds(seconds: int) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"


def apply(ticket: PendingCall, policy: Policy, undecided: str = "", passed_over: tuple[dict, ...] = ()) -> None:
    """Copy the policy's rules onto a ticket that just opened (same transaction); `undecided`: why a
    condition could not be decided on its arguments (policy_match.Choice), recorded with the rules, as
    the policies that would have approved it at once and were passed over for it (`passed_over`)."""
    opened = ticket.created_at
    ticket.policy, ticket.policy_name, ticket.policy_version = policy, policy.name, policy.version
    ticket.policy_rules = policy_json(policy) | _undecided_rules(undecided, passed_over)
    groups, escalation = list(policy.approver_groups.all()), list(policy.escalation_groups.all())
    ticket.routed = bool(groups)
    ticket.required_approvals, ticket.four_eyes = policy.required_approvals, policy.four_eyes
    ticket.allow_grants = policy.allow_grants
    if policy.due_in_seconds:
        ticket.due_at = opened + timedelta(seconds=policy.due_in_seconds)
        if policy.remind_before_seconds and policy.remind_before_seconds < policy.due_in_seconds:
            ticket.remind_at = ticket.due_at - timedelta(seconds=policy.remind_before_seconds)
    if policy.escalate_after_seconds and escalation:
        ticket.escalate_at = opened + timedelta(seconds=policy.escalate_after_seconds)
    ticket.save()
    ticket.approver_groups.set(groups)
    ticket.escalation_groups.set(escalation)
    TicketActivity.objects.create(
        ticket=ticket,
        kind=TicketActivity.Kind.POLICY,
        message=describe(policy) + _undecided_note(undecided),
        detail={"policy": policy.pk, "version": policy.version} | ({"undecided": undecided} if undecided else {}),
    )


def _undecided_rules(undecided: str, passed_over: tuple[dict, ...]) -> dict[str, Any]:
    """What `policy_rules` keeps of an undecided condition: why, and the policies passed over for it."""
    return ({"undecided": undecided} if undecided else {}) | ({"passed_over": list(passed_over)} if passed_over else {})


def _undecided_note(undecided: str) -> str:
    return f" Conditions not decided on the arguments: {undecided}." if undecided else ""


def ticket_open_rules(ticket: PendingCall) -> None:
    """Apply the matching policy to a new ticket, then let the policy or a standing grant decide
    it at once where they may (the agent resumes with no person involved). The policies and whether
    a grant may apply: one query (approvals.policy_cache)."""
    fitting, grant_possible = policies_and_grant(ticket)
    choice = choose(fitting, ticket.tool_args, ticket.kind)
    policy = choice.policy
    if policy is not None:
        apply(ticket, policy, choice.undecided, choice.passed_over)
    elif choice.undecided:  # an automatic approval passed over: the history and the API say why a person decides
        ticket.policy_rules = _undecided_rules("", choice.passed_over)  # no policy's rules: the default rule
        ticket.save(update_fields=["policy_rules", "updated_at"])
        TicketActivity.objects.create(
            ticket=ticket,
            kind=TicketActivity.Kind.POLICY,
            message="The default rule (any approver, one decision)." + _undecided_note(choice.undecided),
            detail={"policy": None, "undecided": choice.undecided},
        )
    decision = auto_decision(policy, ticket.kind) if policy is not None else None
    # No grant approves at once what a person should read: a ticket whose rules a condition undecided chose.
    grant = None if decision or not grant_possible or choice.undecided else grants.grant_matching(ticket)
    if decision is None and grant is None:
        return
    if decision == "reject":
        reason = (policy.auto_reason if policy is not None else "") + _undecided_note(choice.undecided)
        answer = Answer(ticket, reject_payload(ticket, reason), True, reason, Response.Action.REJECT)
        source = Response.Source.POLICY
    else:
        by = f"policy {policy.name!r}" if decision else f"standing grant #{grant.pk} from {grant.created_by}"  # type: ignore[union-attr]
        comment = f"Approved by {by}." + (
            f" {policy.auto_reason}" if decision and policy and policy.auto_reason else ""
        )
        answer = Answer(ticket, approve_payload(ticket), True, comment, Response.Action.APPROVE)
        source = Response.Source.POLICY if decision else Response.Source.GRANT
    if schema_problem(ticket, answer.payload):
        return  # an answer the question's schema refuses: leave it to a person
    answers_submit(session=ticket.session, answers=[answer], actor=None, source=source, grant=grant)
