"""A group put on or taken off an approval policy, or a policy deleted, has its members' open websockets'
rights asked again at once (adkweb.live_roles): whoever a policy's groups made work the inbox
(approvals.permissions.works_inbox) may no longer, and their inbox socket closes now, not at the next
re-check. Signals: policies are changed on the Policies page (approvals.policies) and in Django's admin."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import m2m_changed, post_delete, pre_delete

from adkweb import live_roles
from adkweb.live_logins import persons_changed

from .models import Policy

_PENDING = "_live_policy_members"


def _policy_groups(sender: Any, instance: Any, action: str, reverse: bool, pk_set: Any, **kwargs: Any) -> None:
    """policy.approver_groups / escalation_groups (or a group's policies, from the group's side)."""

    def groups_of(instance: Any, reverse: bool, pk_set: Any) -> Any:
        if reverse:
            return [instance.pk]
        return (
            pk_set if pk_set is not None else sender.objects.filter(policy=instance).values_list("group_id", flat=True)
        )

    live_roles.group_members_changed(instance, action, reverse, pk_set, groups_of)


def _policy_deleting(sender: Any, instance: Any, **kwargs: Any) -> None:
    groups = [
        *instance.approver_groups.values_list("pk", flat=True),
        *instance.escalation_groups.values_list("pk", flat=True),
    ]
    instance.__dict__[_PENDING] = live_roles.members(groups)


def _policy_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    persons_changed(instance.__dict__.pop(_PENDING, ()))


def connect() -> None:
    for through in (Policy.approver_groups.through, Policy.escalation_groups.through):
        m2m_changed.connect(_policy_groups, sender=through, dispatch_uid=f"approvals_live_policy_{through.__name__}")
    pre_delete.connect(_policy_deleting, sender=Policy, dispatch_uid="approvals_live_policy_deleting")
    post_delete.connect(_policy_deleted, sender=Policy, dispatch_uid="approvals_live_policy_deleted")
