"""A change of roles reaches a person's open sockets at once (adkweb.live_roles), not at the next re-check
of rights (adkweb.live_rights, here every 600 s): taken out of a group, a permission taken from them or
their group, the group deleted, staff or superuser status cleared, their group taken off an approval
policy: the sockets whose rights went close with their refusal code (the page does not reconnect);
whose rights are unchanged stay open and served; someone else's are untouched. A save that changes no
right sends nothing. Real logins (session cookies), sockets through the project's ASGI application."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group, Permission

from adkweb import live_rights
from adkweb.roles import APPROVERS, DECIDE_TICKETS
from agents_app import services
from approvals.demo import FINANCE, TREASURY
from approvals.models import Policy
from tests.adkweb.test_live_logins import _login, _still_served
from tests.adkweb.test_live_rights import _closed_with, _open_with_cookie

pytestmark = pytest.mark.django_db(transaction=True)
AT_ONCE = 1.0  # seconds


@pytest.fixture(autouse=True)
def slow_recheck(settings):
    settings.ADKWEB_LIVE_RECHECK_SECONDS = 600


@pytest.fixture
def conversation(demo):
    return services.session_create(app_name="reimbursement_agent", user_id="requester")


def _decide_tickets() -> Permission:
    app_label, codename = DECIDE_TICKETS.split(".")
    return Permission.objects.get(content_type__app_label=app_label, codename=codename)


@sync_to_async
def _decider(how: str) -> tuple[Any, Group | None]:
    """Someone who decides tickets through a group of their own ("deciders") or their own permission."""
    from django.contrib.auth.models import User

    user = User.objects.create_user("decider", password="x")
    if how == "own permission taken":
        user.user_permissions.add(_decide_tickets())
        return user, None
    group = Group.objects.create(name="deciders")
    group.permissions.add(_decide_tickets())
    user.groups.add(group)
    return user, group


@sync_to_async
def _take_away(how: str, user: Any, group: Group | None) -> None:
    if how == "out of the group":
        user.groups.remove(group)
    elif how == "group's side":
        group.user_set.remove(user)
    elif how == "group emptied":
        group.user_set.clear()
    elif how == "group loses the permission":
        group.permissions.remove(_decide_tickets())
    elif how == "group deleted":
        group.delete()
    elif how == "own permission taken":
        user.user_permissions.remove(_decide_tickets())


@pytest.mark.parametrize(
    "how",
    [
        "out of the group",
        "group's side",
        "group emptied",
        "group loses the permission",
        "group deleted",
        "own permission taken",
    ],
)
async def test_a_decider_losing_the_right_has_their_sockets_closed_at_once(demo, conversation, how):
    user, group = await _decider(how)
    mine = await _login(user)
    sockets = [
        await _open_with_cookie(f"/ws/sessions/{conversation.pk}/", mine),
        await _open_with_cookie("/ws/approvals/", mine),
    ]
    await sockets[0].receive_from()  # the status
    other = await _open_with_cookie("/ws/approvals/", await _login(demo["approver2"]))

    await _take_away(how, user, group)
    assert [await _closed_with(s, within=AT_ONCE) for s in sockets] == [4403, 4003]
    assert await _closed_with(other, within=0.3) is None
    await _still_served(other)
    for s in [*sockets, other]:
        await s.disconnect()


@sync_to_async
def _user(username: str, **flags: bool) -> Any:
    from django.contrib.auth.models import User

    return User.objects.create_user(username, password="x", **flags)


@sync_to_async
def _clear(user: Any, flag: str) -> None:
    setattr(user, flag, False)
    user.save()  # the admin's change form saves every field


@pytest.mark.parametrize(
    "flag, path, code",
    [("is_staff", "/ws/sessions/{pk}/", 4403), ("is_superuser", "/ws/approvals/", 4003)],
)
async def test_staff_or_superuser_status_cleared_closes_what_it_let_them_watch(demo, conversation, flag, path, code):
    user = await _user("flagged", **{flag: True})
    socket = await _open_with_cookie(path.format(pk=conversation.pk), await _login(user))
    await _clear(user, flag)
    assert await _closed_with(socket, within=AT_ONCE) == code
    await socket.disconnect()


@sync_to_async
def _finance_only() -> Any:
    from django.contrib.auth.models import User

    user = User.objects.create_user("accountant", password="x")
    user.groups.add(Group.objects.get(name=FINANCE))
    return user


@sync_to_async
def _off_the_policy(how: str) -> None:
    policy = Policy.objects.get(approver_groups__name=FINANCE)
    if how == "group taken off":
        policy.approver_groups.remove(Group.objects.get(name=FINANCE))
    else:
        policy.delete()


@pytest.mark.parametrize("how", ["group taken off", "policy deleted"])
async def test_a_group_no_policy_routes_to_any_more_stops_working_the_inbox_at_once(demo, how):
    """A member of finance works the inbox because a policy routes tickets to finance."""
    inbox = await _open_with_cookie("/ws/approvals/", await _login(await _finance_only()))
    await _off_the_policy(how)
    assert await _closed_with(inbox, within=AT_ONCE) == 4003
    await inbox.disconnect()


async def test_a_socket_whose_rights_are_unchanged_stays_open_and_served(demo, conversation, monkeypatch):
    """The approver taken out of treasury still watches the conversation as an approver: asked again at
    once (one check), it stays open. A save that changes no right asks nothing."""
    checks: list[int] = []
    reads: list[int] = []
    check, read = live_rights.rights_now, live_rights.person_now
    monkeypatch.setattr(live_rights, "rights_now", lambda *a: checks.append(1) or check(*a))
    monkeypatch.setattr(live_rights, "person_now", lambda scope: reads.append(1) or read(scope))
    approver = demo["approver"]
    mine = await _login(approver)
    sockets = [await _open_with_cookie(f"/ws/sessions/{conversation.pk}/", mine) for _ in range(3)]
    for s in sockets:
        await s.receive_from()

    approver.first_name = "Renamed"
    await sync_to_async(approver.save)()
    await _login(approver)  # another login: its last_login saved
    assert await _closed_with(sockets[0], within=0.3) is None
    assert checks == []

    await sync_to_async(approver.groups.remove)(await sync_to_async(Group.objects.get)(name=TREASURY))
    assert [await _closed_with(s, within=0.5) for s in sockets] == [None, None, None]
    assert (len(checks), len(reads)) == (3, 1)  # each socket asked; the three share one read
    for s in sockets:
        await s.disconnect()


async def test_removing_the_approvers_role_from_an_approver_reaches_the_conversation_socket(demo, conversation):
    """The demo's approver, out of the approvers (still in finance and treasury): no longer sees the
    conversation, whose tickets no policy routes."""
    approver = demo["approver"]
    socket = await _open_with_cookie(f"/ws/sessions/{conversation.pk}/", await _login(approver))
    await socket.receive_from()
    await sync_to_async(approver.groups.remove)(await sync_to_async(Group.objects.get)(name=APPROVERS))
    assert await _closed_with(socket, within=AT_ONCE) == 4403
    await socket.disconnect()


async def test_a_renamed_owner_no_longer_watches_the_conversation_their_old_name_owns(demo, conversation):
    """A conversation is its owner's by username (ADK's user_id)."""
    requester = demo["requester"]
    socket = await _open_with_cookie(f"/ws/sessions/{conversation.pk}/", await _login(requester))
    await socket.receive_from()
    requester.username = "requester-renamed"
    await sync_to_async(requester.save)()
    assert await _closed_with(socket, within=AT_ONCE) == 4403
    await socket.disconnect()
