"""Roles are permissions: `setup_roles` makes the groups, and a permission granted in the admin counts."""

from __future__ import annotations

import io

from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.test import Client

from adkweb import roles


def test_setup_roles_creates_the_groups_with_their_permissions_and_no_users(db):
    call_command("setup_roles", stdout=io.StringIO())
    call_command("setup_roles", stdout=io.StringIO())  # idempotent
    assert not User.objects.exists()
    for name, perms in roles.ROLE_PERMISSIONS.items():
        group = Group.objects.get(name=name)
        granted = {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.all()}
        assert granted == set(perms) and not group.user_set.exists()


def test_a_permission_granted_to_a_user_makes_an_approver_without_the_group(db):
    call_command("setup_roles", stdout=io.StringIO())
    user = User.objects.create_user("dana", password="pw-dana-1")
    assert not roles.is_approver(user)
    user.user_permissions.add(Permission.objects.get(codename="decide_tickets", content_type__app_label="approvals"))
    user = User.objects.get(pk=user.pk)  # permissions are cached per user object
    assert roles.is_approver(user) and not roles.is_observer(user)
    client = Client()
    client.force_login(user)
    assert client.get("/").status_code == 200  # the inbox, not the redirect to conversations


def test_superusers_have_every_role_and_staff_observe(db):
    admin = User.objects.create_superuser("root", password="pw-root-1")
    staff = User.objects.create_user("sam", password="pw-sam-1", is_staff=True)
    assert roles.is_approver(admin) and roles.is_agent_admin(admin) and roles.is_observer(admin)
    assert roles.is_observer(staff) and not roles.is_approver(staff) and not roles.is_agent_admin(staff)


def test_demo_setup_is_for_the_demo_only(db, settings):
    from django.core.management.base import CommandError

    settings.DEPLOYED = True  # DATABASE_URL or REDIS_URL set
    try:
        call_command("demo_setup", stdout=io.StringIO())
    except CommandError as exc:
        assert "for the demo only" in str(exc) and "setup_roles" in str(exc) and "createsuperuser" in str(exc)
    else:
        raise AssertionError("demo_setup ran outside the embedded demo")
    assert not User.objects.exists()
    out = io.StringIO()
    call_command("demo_setup", "--allow-deployed", stdout=out)  # a local trial, on purpose
    assert User.objects.filter(username="approver").exists() and "demo only" in out.getvalue()
    settings.DEPLOYED = False
    call_command("demo_setup", stdout=io.StringIO())  # the embedded demo: as `make run` runs it
