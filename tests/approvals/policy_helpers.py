"""Helpers for policy tests: policies, teams, and tickets opened the way the session service opens
them (a ticket row, then the matching policy's rules, in one transaction)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, User
from django.db import transaction

from approvals import rules
from approvals.models import PendingCall, Policy
from tests import approvals_factories


def team(name: str, *users: User) -> Group:
    group, _ = Group.objects.get_or_create(name=name)
    for user in users:
        user.groups.add(group)
    return group


def policy(
    name: str = "p", *, groups: tuple[Group, ...] = (), escalation: tuple[Group, ...] = (), **fields: Any
) -> Policy:
    made = Policy.objects.create(name=name, **fields)
    made.approver_groups.set(groups)
    made.escalation_groups.set(escalation)
    return made


@transaction.atomic
def open_ticket(**fields: Any) -> PendingCall:
    """A ticket as an agent's pause opens it: rules applied, maybe decided at once."""
    ticket = approvals_factories.ticket(**fields)
    rules.ticket_open_rules(ticket)
    ticket.refresh_from_db()
    return ticket


def person(username: str, *groups: Group, approver: bool = False) -> User:
    user = User.objects.create_user(username, password=f"{username}-pw")
    for group in groups:
        user.groups.add(group)
    if approver:
        user.groups.add(Group.objects.get(name="approvers"))
    return User.objects.get(pk=user.pk)  # fresh permission cache
