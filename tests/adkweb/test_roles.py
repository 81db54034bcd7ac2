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


def test_permissions_are_read_in_one_query_and_are_django_s(db):
    """roles.load_permissions reads a person's permissions (their own and their groups') in one
    query, and they are the set Django's ModelBackend reads in two: for a group member, a direct
    grant, both, neither, several groups, an inactive user, and after a change of groups."""
    from django.contrib.auth.backends import ModelBackend
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    call_command("setup_roles", stdout=io.StringIO())
    perm = Permission.objects.get(codename="view_all_sessions", content_type__app_label="agents_app")
    people = {
        "member": User.objects.create_user("member"),
        "direct": User.objects.create_user("direct"),
        "both": User.objects.create_user("both"),
        "two_groups": User.objects.create_user("two_groups"),
        "nobody": User.objects.create_user("nobody"),
        "inactive": User.objects.create_user("inactive", is_active=False),
    }
    people["member"].groups.add(Group.objects.get(name=roles.APPROVERS))
    people["direct"].user_permissions.add(perm)
    people["both"].groups.add(Group.objects.get(name=roles.AGENT_ADMINS))
    people["both"].user_permissions.add(perm)
    people["two_groups"].groups.add(*Group.objects.filter(name__in=[roles.APPROVERS, roles.STAFF_OBSERVERS]))
    people["inactive"].groups.add(Group.objects.get(name=roles.APPROVERS))

    def djangos(user: User) -> set[str]:
        return ModelBackend().get_all_permissions(User.objects.get(pk=user.pk))

    for name, person in people.items():
        user = User.objects.get(pk=person.pk)
        with CaptureQueriesContext(connection) as ctx:
            answers = [f(user) for f in (roles.is_approver, roles.is_observer, roles.is_agent_admin, roles.can_audit)]
            answers.append(roles.is_policy_admin(user))
        assert len(ctx.captured_queries) == (0 if name == "inactive" else 1), name
        assert user.get_all_permissions() == djangos(person), name
        fresh = User.objects.get(pk=person.pk)
        assert answers == [
            fresh.has_perm(roles.DECIDE_TICKETS),
            fresh.is_staff or fresh.has_perm(roles.VIEW_ALL_SESSIONS),
            fresh.has_perm(roles.CONFIGURE_AGENTS),
            any(answers[:3]),
            fresh.has_perm(roles.MANAGE_POLICIES),
        ], name
    assert roles.is_approver(User.objects.get(username="two_groups"))
    assert roles.is_observer(User.objects.get(username="two_groups"))
    assert not roles.is_approver(User.objects.get(username="inactive"))
    # A change of groups counts from the next request's user object (nothing is kept across them).
    people["nobody"].groups.add(Group.objects.get(name=roles.APPROVERS))
    assert roles.is_approver(User.objects.get(username="nobody"))
    people["member"].groups.clear()
    assert not roles.is_approver(User.objects.get(username="member"))
