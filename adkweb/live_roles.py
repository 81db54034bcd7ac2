"""A change of a person's roles has their open websockets' rights asked again at once, on every web process.

What a socket may carry is decided by roles (adkweb.roles: the role groups' permissions, a person's own
permissions, staff and superuser status) and by the groups approval policies route tickets to
(approvals.permissions). A socket re-checks them on a timer (adkweb.live_rights), which a change would
wait out: up to 1.3 intervals (78 s) of tickets and conversation text still pushed to someone removed
from the approvers. So once such a change is committed, each person it may concern is sent
`rights.changed` on the group every socket of theirs is in (adkweb.live_logins.persons_changed), and
each socket asks again now (adkweb.live_socket.LiveConsumer.rights_changed): no right left, it closes
with its refusal code; other rights, with live_rights.RIGHTS_CHANGED (the page reconnects under them);
the same, it stays open, and what was pushed meanwhile waited for the answer.
The sockets of one login that show the same thing share one check begun after the change was heard.

The changes, from Django's signals (groups and permissions are changed by Django's admin, not by a
service of ours): a person put in or out of a group, a permission given to or taken from a person or a
group, a group deleted; staff or superuser status or the username changed (adkweb.live_logins, which
reads the saved row anyway); a group added to or removed from an approval policy, or a policy deleted
(approvals.live_policy). Nothing is sent for a save that changes none of these (a login's last_login),
nor for one rolled back; nothing is read or sent per pushed message.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models.signals import m2m_changed, post_delete, pre_delete

from adkweb.live_logins import persons_changed

_PENDING = "_live_roles_members"  # on an instance between a pre_ and a post_ signal: whom it concerns


def members(group_pks: Iterable[Any]) -> list[Any]:
    """The people in these groups (one read)."""
    wanted = list(group_pks)
    if not wanted:
        return []
    through = get_user_model().groups.through
    return list(through.objects.filter(group_id__in=wanted).values_list("user_id", flat=True).distinct())


def group_members_changed(instance: Any, action: str, reverse: bool, pk_set: Any, groups_of: Any) -> None:
    """An m2m_changed whose far side, or near side, is groups: `groups_of(instance, reverse, pk_set)`
    names the groups whose members it concerns; a clear is read before it happens."""
    if action == "pre_clear":
        instance.__dict__[_PENDING] = members(groups_of(instance, reverse, None))
    elif action == "post_clear":
        persons_changed(instance.__dict__.pop(_PENDING, ()))
    elif action in ("post_add", "post_remove") and pk_set:
        persons_changed(members(groups_of(instance, reverse, pk_set)))


def _memberships(sender: Any, instance: Any, action: str, reverse: bool, pk_set: Any, **kwargs: Any) -> None:
    """A person's groups (user.groups), or a group's people (group.user_set); a person's own
    permissions (user.user_permissions), or a permission's people (permission.user_set)."""
    if action == "pre_clear" and reverse:
        instance.__dict__[_PENDING] = list(instance.user_set.values_list("pk", flat=True))
    elif action == "post_clear":
        persons_changed([instance.pk] if not reverse else instance.__dict__.pop(_PENDING, ()))
    elif action in ("post_add", "post_remove") and pk_set:
        persons_changed(pk_set if reverse else [instance.pk])


def _group_permissions(sender: Any, instance: Any, action: str, reverse: bool, pk_set: Any, **kwargs: Any) -> None:
    """A group's permissions (group.permissions), or a permission's groups (permission.group_set)."""

    def groups_of(instance: Any, reverse: bool, pk_set: Any) -> Any:
        if not reverse:
            return [instance.pk]
        return pk_set if pk_set is not None else instance.group_set.values_list("pk", flat=True)

    group_members_changed(instance, action, reverse, pk_set, groups_of)


def _group_deleting(sender: Any, instance: Any, **kwargs: Any) -> None:
    """Its memberships go with it (no m2m_changed): its members are read before."""
    instance.__dict__[_PENDING] = members([instance.pk])


def _group_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    persons_changed(instance.__dict__.pop(_PENDING, ()))


def connect() -> None:
    User = get_user_model()
    for through in (User.groups.through, User.user_permissions.through):
        m2m_changed.connect(_memberships, sender=through, dispatch_uid=f"adkweb_live_roles_{through.__name__}")
    m2m_changed.connect(_group_permissions, sender=Group.permissions.through, dispatch_uid="adkweb_live_roles_perms")
    pre_delete.connect(_group_deleting, sender=Group, dispatch_uid="adkweb_live_roles_group_deleting")
    post_delete.connect(_group_deleted, sender=Group, dispatch_uid="adkweb_live_roles_group_deleted")
