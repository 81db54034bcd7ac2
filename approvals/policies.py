"""Writing policies (the Policies page, the Django admin and `/api/policies` all come here): the
checks that refuse a policy that cannot work, and the version that changes with its rules."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from django.db import transaction

from adkweb.errors import Forbidden, Invalid
from adkweb.roles import is_policy_admin

from . import conditions, grants
from .models import Policy
from .rules import policy_json

MAX_APPROVALS = 20
SCALAR_FIELDS = (
    "name",
    "agent",
    "tool",
    "kind",
    "condition",
    "priority",
    "required_approvals",
    "four_eyes",
    "auto_decision",
    "auto_reason",
    "auto_confirmations",
    "due_in_seconds",
    "remind_before_seconds",
    "escalate_after_seconds",
    "allow_grants",
    "enabled",
)


def problems(values: dict[str, Any], *, approver_groups: list[Group], escalation_groups: list[Group]) -> dict[str, str]:
    """Field → what is wrong, for a policy as it would be saved (empty: it can be saved)."""
    out: dict[str, str] = {}
    error = conditions.validate(values.get("condition") or "")
    if error:
        out["condition"] = f"Invalid condition: {error}"
    elif values.get("tool") and values.get("condition"):
        unknown = _unknown_names(values["condition"], values.get("agent") or "", values["tool"])
        if unknown:
            out["condition"] = unknown
    required = values.get("required_approvals") or 1
    if not 1 <= required <= MAX_APPROVALS:
        out["required_approvals"] = f"Required approvals go from 1 to {MAX_APPROVALS}."
    auto = values.get("auto_decision") or ""
    if auto == Policy.AutoDecision.REJECT and not (values.get("auto_reason") or "").strip():
        out["auto_reason"] = "An automatic rejection needs a reason: the agent (and the requester) receive it."
    if auto and required > 1:
        out["auto_decision"] = "A policy that decides by itself takes no approvals: set required approvals to 1."
    due, remind = values.get("due_in_seconds"), values.get("remind_before_seconds")
    escalate = values.get("escalate_after_seconds")
    if remind and not due:
        out["remind_before_seconds"] = "A reminder comes before a due time: set 'due in' too."
    elif remind and due and remind >= due:
        out["remind_before_seconds"] = "The reminder must come before the ticket is due (shorter than 'due in')."
    if escalate and not escalation_groups:
        out["escalation_groups"] = "Name the groups the ticket escalates to."
    if escalation_groups and not escalate:
        out["escalate_after_seconds"] = "Say after how long the ticket escalates to its escalation groups."
    if escalate and due and escalate >= due:
        out["escalate_after_seconds"] = "Escalation must come before the ticket is due (shorter than 'due in')."
    return out


def _unknown_names(condition: str, agent: str, tool: str) -> str | None:
    """A typo in an argument name would make the condition never hold: refuse names the tool's
    declaration does not have (when it has one)."""
    from agents_app.agents import tool_parameters

    schema = tool_parameters(agent, tool)
    props = schema.get("properties") if schema else None
    if not isinstance(props, dict):
        return None
    unknown = sorted(conditions.names(condition) - set(props))
    if not unknown:
        return None
    return f"Invalid condition: {tool} has no argument {', '.join(unknown)} (its arguments: {', '.join(props)})."


def _rules(policy: Policy) -> dict[str, Any]:
    rules = policy_json(policy)
    rules.pop("version", None)
    return rules


def policy_bump_version(*, policy: Policy, before: dict[str, Any] | None) -> Policy:
    """After a save: a new version when the rules differ from `before` (the policy's JSON then)."""
    if before is not None:
        before = {k: v for k, v in before.items() if k != "version"}
        if before != _rules(policy):
            Policy.objects.filter(pk=policy.pk).update(version=policy.version + 1)
            policy.refresh_from_db(fields=["version"])
    return policy


def _check_actor(actor: Any) -> None:
    if not is_policy_admin(actor):
        raise Forbidden("Only agent admins manage approval policies.")


@transaction.atomic
def policy_save(
    *,
    policy: Policy | None,
    values: dict[str, Any],
    approver_groups: list[Group],
    escalation_groups: list[Group],
    actor: Any,
) -> Policy:
    """Create (policy None) or update a policy; refuses one that cannot work (Invalid, 400)."""
    _check_actor(actor)
    found = problems(values, approver_groups=approver_groups, escalation_groups=escalation_groups)
    if found:
        raise Invalid(" ".join(f"{field}: {message}" for field, message in found.items()))
    others = Policy.objects.filter(name=values["name"])
    name_taken = (others.exclude(pk=policy.pk) if policy is not None else others).exists()
    if name_taken:
        raise Invalid(f"name: a policy named {values['name']!r} already exists.")
    before = policy_json(Policy.objects.get(pk=policy.pk)) if policy is not None else None
    policy = policy or Policy()
    for field in SCALAR_FIELDS:
        if field in values:
            setattr(policy, field, values[field])
    policy.updated_by = actor
    policy.save()
    policy.approver_groups.set(approver_groups)
    policy.escalation_groups.set(escalation_groups)
    return policy_bump_version(policy=policy, before=before)


@transaction.atomic
def policy_delete(*, policy: Policy, actor: Any) -> None:
    """Delete a policy: its open tickets keep the rules they opened with; its grants end now."""
    _check_actor(actor)
    grants.grants_revoke_for_policy(policy=policy, actor=actor)
    policy.delete()
