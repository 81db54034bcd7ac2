"""Which policy a ticket opens under: the first of the fitting policies (best first: policy_cache.
candidates) that applies to its arguments, else the default rule (any approver, one decision). For a new
ticket, an approver's edit (edits.rules_refusal), the dry run and the hook's fast paths alike.

A policy applies when its condition holds. When the condition cannot be decided on the arguments (an
operand it reads is missing or unreadable: approvals.conditions.decide), the ticket must not get looser
rules than a readable value could have given it, so the policy applies (fail closed: its groups, quorum,
four-eyes and deadlines; an automatic rejection rejects) unless it would approve the ticket at once:
that is the one rule looser than any a person applies, so such a policy is passed over and the next one
(or the default rule) gives a person the ticket. Either way the choice says why (`Choice.undecided`),
and no standing grant approves such a ticket at once (rules.ticket_open_rules).

A missing argument is undecided where the policy names its tool (its condition was checked against
that tool's arguments when saved); a policy for any tool may read arguments another tool does not
have, and a call without them does not meet it (missing is null there, as before).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import conditions
from .models import PendingCall, Policy


def auto_decision(policy: Policy, kind: str) -> str | None:
    """ "approve"/"reject" when the policy decides such a ticket itself; never a tool confirmation
    unless the policy allows it, never a question to the user or a credential."""
    if not policy.auto_decision:
        return None
    if kind == PendingCall.Kind.CONFIRMATION and not policy.auto_confirmations:
        return None
    if kind not in (PendingCall.Kind.LONG_RUNNING, PendingCall.Kind.CONFIRMATION):
        return None
    return policy.auto_decision


@dataclass(frozen=True)
class Choice:
    """The policy a ticket opens under (None: the default rule) and, when a condition could not be
    decided on its arguments, why and what was made of it ("amount '2.500,00' could not be read as a
    number; the policy 'Large reimbursements' applies"); "" when every condition was decided."""

    policy: Policy | None
    undecided: str = ""
    # The policies that would have approved it at once, passed over as their condition could not be
    # decided on its arguments: {"name", "version", "why"} each (the ticket's JSON `passedOver`).
    passed_over: tuple[dict[str, Any], ...] = ()


def verdict(policy: Policy, args: dict[str, Any], kind: str) -> tuple[bool, str]:
    """Whether the policy applies to a ticket of this kind with these arguments (its agent, tool and kind
    aside), and, when its condition could not be decided on them, what was made of it."""
    applies, note, _ = _verdict(policy, args, kind)
    return applies, note


def _verdict(policy: Policy, args: dict[str, Any], kind: str) -> tuple[bool, str, str]:
    """`verdict`, and why its condition was not decided where that passes the policy over ("" else)."""
    decided = conditions.decide(policy.condition, args, missing_is_unknown=bool(policy.tool))
    if decided.holds is not None:
        return decided.holds, "", ""
    if auto_decision(policy, kind) == "approve":
        return False, f"the policy {policy.name!r} does not approve it at once: {decided.why}", decided.why
    return True, f"{decided.why}; the policy {policy.name!r} applies", ""


def choose(policies: list[Policy], args: dict[str, Any], kind: str) -> Choice:
    """The first of `policies` (best first) that applies to these arguments, and why where undecided."""
    notes: list[str] = []
    passed: list[dict[str, Any]] = []
    for policy in policies:
        applies, note, passed_why = _verdict(policy, args, kind)
        notes += [note] if note else []
        if passed_why:
            passed.append({"name": policy.name, "version": policy.version, "why": passed_why})
        if applies:
            return Choice(policy, "; ".join(notes), tuple(passed))
    return Choice(None, "; ".join(notes), tuple(passed))


def first_matching(policies: list[Policy], args: dict[str, Any], kind: str) -> Policy | None:
    """The policy of `choose`, or None (the default rule)."""
    return choose(policies, args, kind).policy
