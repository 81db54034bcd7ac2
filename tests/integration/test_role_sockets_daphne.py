"""A change of roles reaches a person's sockets at once on every web process (adkweb.live_roles), and a
socket closes when its login's session expires: two daphne processes on one Redis channel layer, a
re-check interval far longer than the test (adkweb.live_rights is not what closes them), real logins."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.sessions.models import Session
from django.utils import timezone

from adkweb.roles import APPROVERS
from agents_app import services

from .test_live_rights_daphne import _closed_with
from .test_logout_sockets_daphne import WITHIN, _login, _socket, _still_open_and_receiving, webs  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def _out_of_the_approvers() -> None:
    get_user_model().objects.get(username="approver").groups.remove(Group.objects.get(name=APPROVERS))


def _staff_cleared() -> None:
    user = get_user_model().objects.get(username="staffer")
    user.is_staff = False
    user.save()  # every field, as the admin's change form saves it


@pytest.mark.parametrize(
    "who, inbox, change, codes",
    [
        # Still in finance, whose tickets a policy routes to them: the inbox reconnects under the new rights.
        ("approver", "/ws/approvals/", _out_of_the_approvers, [4403, 1012]),
        ("staffer", None, _staff_cleared, [4403, 4403]),
    ],
    ids=["out of the approvers", "staff status cleared"],
)
def test_a_change_of_roles_closes_the_sockets_it_concerns_on_every_process(demo, webs, who, inbox, change, codes):  # noqa: F811
    one, two = webs
    get_user_model().objects.get_or_create(username="staffer", defaults={"is_staff": True})
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")
    mine, observer = _login(one, who, "their-password"), _login(two, "observer", "observer-demo")
    path = f"/ws/sessions/{session.pk}/?after=0"
    sockets = [_socket(one, path, mine), _socket(two, inbox or path, mine), _socket(two, path, observer)]
    try:
        for ws in sockets if inbox is None else (sockets[0], sockets[2]):
            assert 'id="session-status"' in ws.recv(timeout=20)
        change()
        started = time.monotonic()
        got = [_closed_with(ws, within=WITHIN)[0] for ws in sockets[:2]]
        assert got == codes, got
        assert time.monotonic() - started < WITHIN
        _still_open_and_receiving(sockets[2], session, "after a change to another person")
    finally:
        for ws in sockets:
            ws.close()


def test_a_socket_closes_when_its_logins_session_expires_on_every_process(demo, webs):  # noqa: F811
    one, two = webs
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")
    expiring, lasting = _login(one, "approver", "approver-demo"), _login(two, "approver", "approver-demo")
    expiry = timezone.now() + timedelta(seconds=3)
    Session.objects.filter(session_key=expiring.cookies["sessionid"]).update(expire_date=expiry)
    path = f"/ws/sessions/{session.pk}/?after=0"
    sockets = [_socket(one, path, expiring), _socket(two, "/ws/approvals/", expiring), _socket(one, path, lasting)]
    try:
        for ws in (sockets[0], sockets[2]):
            assert 'id="session-status"' in ws.recv(timeout=20)
        codes = [_closed_with(ws, within=(expiry - timezone.now()).total_seconds() + WITHIN)[0] for ws in sockets[:2]]
        assert codes == [4403, 4003], codes
        assert timezone.now() >= expiry
        _still_open_and_receiving(sockets[2], session, "after the other login expired")
    finally:
        for ws in sockets:
            ws.close()
