"""Demo approval policies (`manage.py demo_setup`): a newcomer sees them work in `make run`."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group

from .models import Policy
from .policies import policy_bump_version
from .rules import policy_json

FINANCE = "finance"
TREASURY = "treasury"
DAY = 24 * 3600

DEMO_POLICIES: list[dict[str, Any]] = [
    dict(
        name="Large reimbursements",
        agent="reimbursement_agent",
        tool="ask_for_approval",
        condition="amount > 1000",
        approver_groups=[FINANCE],
        required_approvals=2,
        four_eyes=True,
        due_in_seconds=DAY,
        remind_before_seconds=4 * 3600,
        allow_grants=False,
    ),
    dict(
        name="Treasury transfers",
        agent="transfer_agent",
        tool="transfer_money",
        kind="confirmation",
        approver_groups=[TREASURY],
        four_eyes=True,
    ),
]


def demo_groups_setup() -> dict[str, Group]:
    """The demo's teams: finance (reimbursements over $1000) and treasury (transfers)."""
    return {name: Group.objects.get_or_create(name=name)[0] for name in (FINANCE, TREASURY)}


def demo_policies_setup() -> None:
    """Create or reset the demo policies (idempotent; a changed rule bumps the version)."""
    groups = demo_groups_setup()
    for spec in DEMO_POLICIES:
        values: dict[str, Any] = dict(spec)
        approver_groups = [groups[g] for g in values.pop("approver_groups")]
        existing = Policy.objects.filter(name=values["name"]).first()
        before = policy_json(existing) if existing is not None else None
        policy, _ = Policy.objects.update_or_create(name=values["name"], defaults=values)
        policy.approver_groups.set(approver_groups)
        policy_bump_version(policy=policy, before=before)
